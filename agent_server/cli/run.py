"""Headless runs: ``agent-server run -p "…"`` — one prompt, no editor, the same server and log.

Role: an ACP client living in the same process as the server, connected to it through an
in-memory NDJSON pipe, so a headless run goes through exactly the code an editor drives
(sessions, policy, tools on the disk backend, the log, ``session/load`` for ``--resume``). It
prints the answer as it streams (``--json``: every session update as a JSON line), asks permission
questions on the terminal — or, without one, refuses them (fail-closed) unless ``--allow`` names
the kind — and turns Ctrl-C into ``session/cancel``.

Must never: let a permission question pass without an explicit allow (no terminal and no
``--allow`` → the question is answered "cannot ask", which the policy denies).

The process ends by ``exit_process`` (called by ``cli.main`` when it owns the process): its
logs synced and closed, its threads joined and ``atexit`` run as the interpreter would, without
the interpreter's teardown (freeing every module and object one by one: most of the time from a
Ctrl-C to the shell's prompt, bench/README.md *bounds.py*).

Exit status: 0 ``end_turn``; 1 an error (or a refusal); 2 a usage error; 3 ``max_tokens`` or
``max_turn_requests``; 130 cancelled — each non-zero one with its reason on stderr (``STOP_NOTES``).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from agent_server.cli.allow import ALLOW_KINDS, no_terminal
from agent_server.config.views import MODES
from agent_server.server.rpc.jsonrpc import MAX_LINE_BYTES, Connection, JsonRpcError

EXIT = {"end_turn": 0, "max_tokens": 3, "max_turn_requests": 3, "cancelled": 130, "refusal": 1}

STOP_NOTES = {
    "max_tokens": "the answer was cut off at the model's output limit (stop reason max_tokens); continue it with "
                  "--resume {session} -p \"continue\", or raise max_tokens in [agent] params of the config file",
    "refusal": "the model refused to answer (stop reason refusal); that turn is left out of the session's later requests",
}
"""Why ``run`` exits non-zero after a prompt that was answered (no error): one line on stderr,
``agent-server run: …`` like an error's (``{session}``: the session id). ``max_turn_requests``
needs none: the server's own notice of the step budget is on stderr already."""


class _Pipe:
    """Writer that feeds a reader in the same process (one side of the in-memory transport)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def write(self, data: bytes) -> None:
        self._reader.feed_data(data)

    async def drain(self) -> None:
        await asyncio.sleep(0)

    def close(self) -> None:
        self._reader.feed_eof()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-server run", description="Run one prompt without an editor.")
    parser.add_argument("-p", "--prompt", required=True, help="the prompt ('-' reads it from stdin)")
    parser.add_argument("--cwd", default=os.getcwd(), help="workspace folder (default: the current one)")
    parser.add_argument("--mode", choices=list(MODES))
    parser.add_argument("--resume", metavar="SESSION_ID", help="continue a stored session")
    parser.add_argument("--json", action="store_true", help="print every session update as a JSON line")
    parser.add_argument("--allow", default="", help="kinds to allow without asking: shell,edit,read")
    parser.add_argument("--config", help="TOML config file")
    return parser


def _plain_lines(texts: list[str]) -> list[str]:
    """The lines of a permission question's text blocks as a terminal shows them: each block on
    lines of its own, a markdown fence (```` ```sh ````/```` ``` ````) dropped and the code inside it
    indented, blank lines left out."""
    lines: list[str] = []
    for text in texts:
        fenced = False
        for line in text.splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
            elif line.strip():
                lines.append(("  " if fenced else "") + line.rstrip())
    return lines


def _diff_lines(blocks: list[Any], limit: int = 60) -> list[str]:
    """The ``diff`` blocks of a permission question as unified diffs (``-``/``+`` lines), at most
    ``limit`` lines, saying how many more there are: what a choice would change, on a terminal."""
    import difflib

    lines: list[str] = []
    for block in blocks:
        if not isinstance(block, dict) or block.get("type") != "diff":
            continue
        old, new = str(block.get("oldText") or ""), str(block.get("newText") or "")
        name = str(block.get("path") or "")
        lines += [ln.rstrip("\r\n") for ln in difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), name, name, n=1)]
    if len(lines) > limit:
        lines = lines[:limit] + [f"… {len(lines) - limit} more diff lines"]
    return lines


def _is_notice(update: dict[str, Any]) -> bool:
    """Whether ``update`` is one of the server's notices, not the answer: any chunk the server marks
    (``_meta.agentServer.notice``: an MCP server's problem, the step budget, dropped tool calls, a
    hook that ran …; ``retry``: a model request being retried; ``waiting``: one not answered yet; ``compaction``: the history
    compacted). ``run`` prints them on stderr, so stdout holds the answer alone."""
    meta = update.get("_meta")
    server = meta.get("agentServer") if isinstance(meta, dict) else None
    return isinstance(server, dict) and any(key in server for key in ("notice", "retry", "waiting", "compaction"))


ANSWERS = {"o": "allow_once", "a": "allow_always", "r": "reject_once", "w": "reject_always"}


class HeadlessClient:
    """The client half: prints updates, answers permission questions, tracks the session.

    Text output: the answer on ``out`` (ending with a newline); thinking on ``err`` under a
    ``[thinking]`` line; tool calls on ``err`` as ``[tool] TITLE: completed`` / ``failed — why``;
    the server's notices (``_is_notice``: a retry, the step budget, an MCP server's problem …) on
    ``err``, each on a line of its own — the text a broken-off try had streamed stays on ``out`` (it
    was printed as it came), ended by a newline.
    """

    def __init__(self, *, as_json: bool, allow: set[str], out: Any = None, err: Any = None) -> None:
        self.as_json = as_json
        self.allow = set(allow)
        """The run's ``--allow`` names; the server's ``HeadlessApprover`` applies them, per question."""
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.quiet = False  # while session/load replays the history
        self.last_kind: str | None = None
        self.titles: dict[str, str] = {}
        self.kinds: dict[str, str] = {}
        self.answer_open = False  # the answer's last character on ``out`` was not a newline
        self.input_ended = False  # stdin reached its end at a question: no later question can be answered

    async def on_update(self, params: dict[str, Any]) -> None:
        if self.quiet:
            return
        update = params.get("update") or {}
        if self.as_json:
            self.out.write(json.dumps(params, ensure_ascii=False) + "\n")
            self.out.flush()
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk" and _is_notice(update):
            self.end_answer()  # the retry's text starts on a line of its own
            if self.last_kind == "agent_thought_chunk":
                self.err.write("\n")
            self.err.write(str(update.get("content", {}).get("text", "")).strip() + "\n")
            kind = "notice"
        elif kind == "agent_message_chunk":
            if self.last_kind == "agent_thought_chunk":
                self.err.write("\n")
                self.err.flush()
            text = update.get("content", {}).get("text", "")
            self.out.write(text)
            self.out.flush()
            if text:
                self.answer_open = not text.endswith("\n")
        elif kind == "agent_thought_chunk":
            self.end_answer()
            if self.last_kind != kind:
                self.err.write("[thinking]\n")
            self.err.write(update.get("content", {}).get("text", ""))
        elif kind == "tool_call":
            self.end_answer()
            self.titles[update["toolCallId"]] = update.get("title", "")
            self.kinds[update["toolCallId"]] = update.get("kind", "other")
            self.err.write(f"{'' if self.last_kind in (None, 'tool_call_update', 'retry_notice') else chr(10)}"
                           f"[tool] {update.get('title', '')}\n")
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            line = f"[tool] {self.titles.get(update['toolCallId'], '')}: {update['status']}"
            if update["status"] == "failed":
                line += self._why_failed(update)
            self.err.write(line + "\n")
        else:
            return
        self.err.flush()
        self.last_kind = kind

    def end_answer(self) -> None:
        """End the answer's line on ``out`` (before other output, and at the end of the run)."""
        if self.answer_open:
            self.out.write("\n")
            self.out.flush()
            self.answer_open = False

    def _why_failed(self, update: dict[str, Any]) -> str:
        """`` — <first line of the result>`` and, for a call refused for want of a terminal, the
        ``--allow`` that would allow it."""
        texts = [c.get("content", {}).get("text", "") for c in update.get("content") or []
                 if isinstance(c, dict) and c.get("type") == "content"]
        first = next((ln.strip() for t in texts for ln in t.splitlines() if ln.strip()), "")
        if len(first) > 300:
            first = first[:299] + "…"
        why = f" — {first}" if first else ""
        if first.startswith("Approval unavailable") and not self.can_ask() and "--allow" not in first:
            why += f" ({no_terminal(self.kinds.get(update['toolCallId'], 'other'))})"  # the hint was cut off
        return why

    def can_ask(self) -> bool:
        """Whether permission questions can be asked (stdin and stderr are a terminal, and its
        input has not ended at an earlier question)."""
        return not self.input_ended and sys.stdin.isatty() and self.err.isatty()

    async def request_permission(self, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        """A question the server's ``HeadlessApprover`` could not decide itself (``--allow`` grants
        and the no-terminal refusal are decided there, per question): asked on the terminal."""
        from agent_server.policy.approvals import OPTION_NAMES

        tool = params.get("toolCall") or {}
        listed = [o for o in params.get("options", []) if isinstance(o, dict) and "optionId" in o]
        options = {o["optionId"] for o in listed}
        if not self.can_ask():  # not sent without a terminal; refuse this question alone if it is
            return {"outcome": {"outcome": "cancelled"}}
        self.end_answer()
        texts = [c.get("content", {}).get("text", "") for c in tool.get("content") or []
                 if isinstance(c, dict) and c.get("type") == "content"]
        shown = _plain_lines(texts) + _diff_lines(list(tool.get("content") or []))
        self.err.write(f"\n[permission] {tool.get('title', 'a tool call')}\n" + "".join(f"  {ln}\n" for ln in shown))
        letters = [k for k, v in ANSWERS.items() if v in options]
        menu = ", ".join({"o": "allow [o]nce", "a": "[a]lways", "r": "[r]eject", "w": "reject al[w]ays"}[k]
                         for k in letters)
        if any(o.get("name") != OPTION_NAMES.get(o["optionId"]) for o in listed):
            # a question that names its options (/undo's "Undo the agent's change, keep the rest", "Take the
            # checkpoint", "Keep mine") is answered by number, each option with its own name, in its order
            letters = [str(i) for i in range(1, len(listed) + 1)]
            self.err.write("".join(f"  [{i}] {o.get('name') or o['optionId']}\n" for i, o in enumerate(listed, 1)))
            menu = f"choose {letters[0]}-{letters[-1]}" if len(letters) > 1 else "choose 1"
        while True:
            self.err.write(f"  {menu}? ")
            self.err.flush()
            line = await asyncio.to_thread(sys.stdin.readline)
            if not line:  # end of input: no answer can be read (the approver says so: not the user's choice)
                self.input_ended = True
                self.err.write("\n  [no answer: the terminal's input ended — denied]\n")
                self.err.flush()
                return {"outcome": {"outcome": "cancelled"}}
            typed = line.strip().lower()
            if letters and letters[0] == "1":
                choice = listed[int(typed) - 1]["optionId"] if typed.isdigit() and 0 < int(typed) <= len(listed) else None
            else:
                choice = ANSWERS.get(typed[:1]) if len(typed) == 1 else None
            if choice in options:
                return {"outcome": {"outcome": "selected", "optionId": choice}}
            self.err.write(f"  please type one of: {', '.join(letters)}\n")


async def run(args: argparse.Namespace, prompt: str) -> int:
    """Serve the in-process ACP server, drive it as a client for one prompt; the exit status."""
    from agent_server.config.load import ConfigError, load_config
    from agent_server.cli.approvals import HeadlessServer
    from agent_server.session import SessionStore, default_state_dir

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write(f"agent-server run: {exc}\n")
        return 2
    client = HeadlessClient(as_json=args.json, allow={a for a in args.allow.split(",") if a})
    grants = {kind: name for name in client.allow for kind in ALLOW_KINDS[name]}
    server = HeadlessServer(config, SessionStore(default_state_dir()), config_loader=lambda: load_config(args.config),
                            grants=grants, can_ask=client.can_ask)
    # one JSON-RPC message per line: a big prompt or tool result is one long line (not 64 KiB at most)
    to_server, to_client = asyncio.StreamReader(limit=MAX_LINE_BYTES), asyncio.StreamReader(limit=MAX_LINE_BYTES)
    server_conn = Connection(to_server, _Pipe(to_client), requests=server.request_handlers(),
                             notifications=server.notification_handlers())
    server.bind(server_conn)
    client_conn = Connection(to_client, _Pipe(to_server),
                             requests={"session/request_permission": client.request_permission},
                             notifications={"session/update": client.on_update})
    tasks = [asyncio.ensure_future(server_conn.serve()), asyncio.ensure_future(client_conn.serve())]
    try:
        return await _drive(client_conn, client, args, prompt, server)
    finally:
        to_server.feed_eof()
        await asyncio.gather(tasks[0], return_exceptions=True)
        await server.aclose()
        to_client.feed_eof()
        await asyncio.gather(tasks[1], return_exceptions=True)


def _sent_nothing(server: Any, session_id: str) -> bool:
    """Whether the session's log shows no model request at all (no step, no compaction)."""
    session = server.sessions.get(session_id)
    return session is not None and not any(e.type in ("step/start", "compaction/start") for e in session.log.events)


async def _drive(conn: Connection, client: HeadlessClient, args: argparse.Namespace, prompt: str,
                 server: Any) -> int:
    await conn.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"fs": {}},
                                      "clientInfo": {"name": "agent-server run", "version": "1"}})
    cwd = str(Path(args.cwd).resolve())
    try:
        if args.resume:
            client.quiet = True
            await conn.request("session/load", {"sessionId": args.resume, "cwd": cwd, "mcpServers": []})
            client.quiet = False
            session_id = args.resume
        else:
            session_id = (await conn.request("session/new", {"cwd": cwd, "mcpServers": []}))["sessionId"]
        if args.mode:
            await conn.request("session/set_mode", {"sessionId": session_id, "modeId": args.mode})
    except JsonRpcError as exc:
        sys.stderr.write(f"agent-server run: {exc.message}\n")
        return 2 if exc.code in (-32602, -32002) else 1
    sys.stderr.write(f"[session {session_id}]\n")
    loop = asyncio.get_running_loop()
    interrupted: list[bool] = []

    def on_sigint() -> None:
        if interrupted:  # a second Ctrl-C: stop waiting
            os._exit(130)
        interrupted.append(True)
        sys.stderr.write("\n[cancelling…]\n")
        asyncio.ensure_future(conn.notify("session/cancel", {"sessionId": session_id}))

    try:
        loop.add_signal_handler(signal.SIGINT, on_sigint)
    except (NotImplementedError, RuntimeError):
        pass
    try:
        result = await conn.request("session/prompt", {"sessionId": session_id,
                                                       "prompt": [{"type": "text", "text": prompt}]})
    except JsonRpcError as exc:
        client.end_answer()
        data = exc.data if isinstance(exc.data, dict) else {}
        reason = data.get("message") or exc.message
        code = f"{data['code']}: " if data.get("code") else ""
        sys.stderr.write(f"\nagent-server run: {code}{' '.join(str(reason).split())}\n")
        if not args.resume and _sent_nothing(server, session_id):
            # nothing reached a model: leave no empty session behind (it would only clutter `sessions`)
            try:
                await conn.request("session/delete", {"sessionId": session_id})
                sys.stderr.write(f"[session {session_id} removed: nothing was sent to a model]\n")
            except JsonRpcError:
                pass
        return 2 if exc.code == -32602 else 1  # -32602: a usage error, e.g. `/mode bogus`
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
    stop = result.get("stopReason")
    client.end_answer()
    if args.json:
        sys.stdout.write(json.dumps({"stopReason": stop, "sessionId": session_id}) + "\n")
    sys.stdout.flush()
    if stop == "cancelled":
        sys.stderr.write("[cancelled]\n")
    elif stop in STOP_NOTES:
        sys.stderr.write(f"agent-server run: {STOP_NOTES[stop].format(session=session_id)}\n")
    return EXIT.get(stop, 1)


def exit_process(status: int) -> int:
    """End the process with ``status`` now that ``run`` is over (its sessions' logs synced and
    closed, its tools and servers stopped: ``run``'s ``finally``), doing first what the interpreter's
    exit would do that anyone sees — the threads' shutdown (``threading._shutdown``: executors
    stopped, non-daemon threads joined), the ``atexit`` handlers (logging's flush), stdout and stderr
    flushed — and skipping what nobody sees: its teardown, which frees every module and object one
    by one before the process may end (the kernel frees the memory at once). On an interpreter
    without those hooks, returns ``status`` for the ordinary exit."""
    shutdown = getattr(threading, "_shutdown", None)
    run_exits = getattr(atexit, "_run_exitfuncs", None)
    if shutdown is None or run_exits is None or threading.current_thread() is not threading.main_thread():
        return status
    shutdown()
    run_exits()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can reach it
            pass
    os._exit(status)


def main(argv: list[str]) -> int:
    """``agent-server run …``: parse, run, return the exit status (2 for usage errors)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    if args.allow and not set(args.allow.split(",")) <= set(ALLOW_KINDS):
        sys.stderr.write(f"agent-server run: --allow takes {','.join(ALLOW_KINDS)}\n")
        return 2
    if args.resume is not None and not args.resume.strip():
        sys.stderr.write("agent-server run: --resume needs a session id\n")
        return 2
    try:
        prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    except KeyboardInterrupt:
        return 130
    if not prompt.strip():
        sys.stderr.write("agent-server run: the prompt is empty\n")
        return 2
    if not Path(args.cwd).is_dir():
        sys.stderr.write(f"agent-server run: --cwd {args.cwd} is not a folder\n")
        return 2
    import logging

    logging.basicConfig(stream=sys.stderr, level=os.environ.get("AGENT_SERVER_LOG_LEVEL", "WARNING").upper()
                        if os.environ.get("AGENT_SERVER_LOG_LEVEL", "WARNING").upper() in logging.getLevelNamesMapping()
                        else "WARNING")
    try:
        return asyncio.run(run(args, prompt))
    except KeyboardInterrupt:  # Ctrl-C before the turn started (no session to cancel yet)
        sys.stderr.write("\n[cancelled]\n")
        return 130
