"""Headless runs: ``agent-server run -p "…"`` — one prompt, no editor, the same server and log.

Role: an ACP client living in the same process as the server, connected to it through an
in-memory NDJSON pipe, so a headless run goes through exactly the code an editor drives
(sessions, policy, tools on the disk backend, the log, ``session/load`` for ``--resume``). It
prints the answer as it streams (``--json``: every session update as a JSON line), asks permission
questions on the terminal — or, without one, refuses them (fail-closed) unless ``--allow`` names
the kind — and turns Ctrl-C into ``session/cancel``.

Must never: let a permission question pass without an explicit allow (no terminal and no
``--allow`` → the question is answered "cannot ask", which the policy denies).

Exit status: 0 ``end_turn``; 1 an error (or a refusal); 2 a usage error; 3 ``max_tokens`` or
``max_turn_requests``; 130 cancelled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from agent_server.server.jsonrpc import METHOD_NOT_FOUND, Connection, JsonRpcError

EXIT = {"end_turn": 0, "max_tokens": 3, "max_turn_requests": 3, "cancelled": 130, "refusal": 1}
ALLOW_KINDS = {"shell": {"execute"}, "edit": {"edit", "delete", "move"}, "read": {"read", "search"}}


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
    parser.add_argument("--mode", choices=["read-only", "workspace-write", "danger-full-access"])
    parser.add_argument("--resume", metavar="SESSION_ID", help="continue a stored session")
    parser.add_argument("--json", action="store_true", help="print every session update as a JSON line")
    parser.add_argument("--allow", default="", help="kinds to allow without asking: shell,edit,read")
    parser.add_argument("--config", help="TOML config file")
    return parser


class HeadlessClient:
    """The client half: prints updates, answers permission questions, tracks the session."""

    def __init__(self, *, as_json: bool, allow: set[str], out: Any = None, err: Any = None) -> None:
        self.as_json = as_json
        self.allowed_kinds = set().union(*(ALLOW_KINDS[a] for a in allow)) if allow else set()
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.quiet = False  # while session/load replays the history
        self.last_kind: str | None = None
        self.titles: dict[str, str] = {}

    async def on_update(self, params: dict[str, Any]) -> None:
        if self.quiet:
            return
        update = params.get("update") or {}
        if self.as_json:
            self.out.write(json.dumps(params, ensure_ascii=False) + "\n")
            self.out.flush()
            return
        kind = update.get("sessionUpdate")
        if kind == "agent_message_chunk":
            self.out.write(update.get("content", {}).get("text", ""))
            self.out.flush()
        elif kind == "agent_thought_chunk":
            self.err.write(update.get("content", {}).get("text", ""))
        elif kind == "tool_call":
            self.titles[update["toolCallId"]] = update.get("title", "")
            self.err.write(f"\n[tool] {update.get('title', '')}\n")
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            self.err.write(f"[tool] {self.titles.get(update['toolCallId'], '')}: {update['status']}\n")
        self.err.flush()
        self.last_kind = kind

    async def request_permission(self, params: dict[str, Any], ctx: Any) -> dict[str, Any]:
        tool = params.get("toolCall") or {}
        options = {o["optionId"] for o in params.get("options", [])}
        if tool.get("kind") in self.allowed_kinds and "allow_once" in options:
            return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        if not (sys.stdin.isatty() and self.err.isatty()):
            raise JsonRpcError(METHOD_NOT_FOUND, "headless run without a terminal: use --allow to permit this kind")
        self.err.write(f"\n[permission] {tool.get('title', 'a tool call')}\n"
                       "  allow [o]nce, [a]lways, [r]eject, reject al[w]ays? ")
        self.err.flush()
        answer = (await asyncio.to_thread(sys.stdin.readline)).strip().lower()
        choice = {"o": "allow_once", "a": "allow_always", "r": "reject_once", "w": "reject_always"}.get(answer[:1])
        if choice is None or choice not in options:
            return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}
        return {"outcome": {"outcome": "selected", "optionId": choice}}


async def run(args: argparse.Namespace, prompt: str) -> int:
    """Serve the in-process ACP server, drive it as a client for one prompt; the exit status."""
    from agent_server.config import ConfigError, load_config
    from agent_server.server.acp import AcpServer
    from agent_server.session import SessionStore, default_state_dir

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write(f"agent-server run: {exc}\n")
        return 2
    server = AcpServer(config, SessionStore(default_state_dir()))
    client = HeadlessClient(as_json=args.json, allow={a for a in args.allow.split(",") if a})
    to_server, to_client = asyncio.StreamReader(), asyncio.StreamReader()
    server_conn = Connection(to_server, _Pipe(to_client), requests=server.request_handlers(),
                             notifications=server.notification_handlers())
    server.bind(server_conn)
    client_conn = Connection(to_client, _Pipe(to_server),
                             requests={"session/request_permission": client.request_permission},
                             notifications={"session/update": client.on_update})
    tasks = [asyncio.ensure_future(server_conn.serve()), asyncio.ensure_future(client_conn.serve())]
    try:
        return await _drive(client_conn, client, args, prompt)
    finally:
        to_server.feed_eof()
        await asyncio.gather(tasks[0], return_exceptions=True)
        await server.aclose()
        to_client.feed_eof()
        await asyncio.gather(tasks[1], return_exceptions=True)


async def _drive(conn: Connection, client: HeadlessClient, args: argparse.Namespace, prompt: str) -> int:
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
        data = exc.data if isinstance(exc.data, dict) else {}
        reason = data.get("message") or exc.message
        code = f"{data['code']}: " if data.get("code") else ""
        sys.stderr.write(f"\nagent-server run: {code}{' '.join(str(reason).split())}\n")
        return 1
    finally:
        try:
            loop.remove_signal_handler(signal.SIGINT)
        except (NotImplementedError, RuntimeError):
            pass
    stop = result.get("stopReason")
    if args.json:
        sys.stdout.write(json.dumps({"stopReason": stop, "sessionId": session_id}) + "\n")
    elif client.last_kind == "agent_message_chunk":
        sys.stdout.write("\n")
    sys.stdout.flush()
    return EXIT.get(stop, 1)


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
