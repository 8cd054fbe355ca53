"""Stored sessions: opening a log for ``load``, recovery, ``list``, and the history as updates.

Role: ``open_log`` opens a stored log (torn tail cut and logged by ``EventLog.open``) or says why
not; ``load_roots`` checks a load's folders against the log's header; ``recover`` closes what a
dead process left open (commands it left running, ``agent.recovery.close_open_turn``: synthetic
results, the interruption notice, ``turn/end {exit: "interrupted"}``, dropped inbox prompts);
``list_sessions`` reads headers without changing any log; ``history_updates`` turns a log into the
``session/update`` payloads that show it. ``SessionHost`` composes these.

Must never: change a log except by appending, start a turn on its own (a prompt that was queued
when the process died is reported, not run).
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from agent_server.agent.recovery import close_open_turn, describe
from agent_server.agent.step import dropped_calls_text, message_id, retry_notice, waiting_notice
from agent_server.host import paging, takeover
from agent_server.host.commands import INIT_PROMPT, reply_id
from agent_server.checkpoints.recorder import changed_files_meta
from agent_server.host.errors import HostError
from agent_server.session.images import ImageMissing
from agent_server.session import (EventLog, LogBusyError, LogCorruptError, LogVersionError, LogWriteError, SessionEvent,
                                  SessionStore)
from agent_server.session.index import TITLE_CHARS, session_title  # noqa: F401 - re-exported
from agent_server.tools import BUILTIN_TOOLS, ToolContext, ToolResult, validate_args
from agent_server.tools.live import terminal_block
from agent_server.tools.procs import reap_orphans

log = logging.getLogger("agent_server.server")



def open_log(store: SessionStore, session_id: str,
             check: Callable[[list[SessionEvent]], object] | None = None) -> EventLog:
    """Open the stored log of ``session_id`` for appending.

    Before anything is changed (``EventLog.open``'s ``check``): the header must name this
    session (a log whose ``session_id`` is another one's — copied or moved — is ``LOG_CORRUPT`` at
    line 1), then ``check(events)`` runs, when given (the load's folder check, its projection: an
    error it raises refuses the load and the log is left as it is).

    Errors (``HostError``): ``invalid`` for a malformed id; ``not_found`` when there is no such
    log; ``internal`` with ``data.code`` ``LOG_CORRUPT`` (``data.line`` is the bad line) or
    ``LOG_VERSION`` when it cannot be read — it is then left as is — and ``SESSION_BUSY`` when
    another agent-server process has the session open, ``STORAGE`` when the repair of a torn tail
    cannot be written (the log is then as it was). What ``check`` raises otherwise (``HostError``)
    goes through.
    """
    try:
        path = store.log_path(session_id)
    except ValueError as exc:
        raise HostError("invalid", str(exc), {"sessionId": session_id}) from None
    if not path.is_file():
        raise HostError("not_found", f"unknown session: {session_id}", {"sessionId": session_id})

    def checked(events: list[SessionEvent]) -> None:
        named = events[0].data.get("session_id")
        if named is not None and named != session_id:
            raise LogCorruptError(path, 1, f"its session/header names session {named!r}, but the log is "
                                           f"in the folder of session {session_id!r} (copied or moved from another session?)")
        if check is not None:
            check(events)

    try:
        return EventLog.open(path, checked)
    except FileNotFoundError:  # deleted meanwhile (``session/delete`` in another process)
        raise HostError("not_found", f"unknown session: {session_id}", {"sessionId": session_id}) from None
    except LogCorruptError as exc:
        raise HostError("internal",
                        f"cannot load session {session_id}: its log is corrupt at line {exc.line} "
                        f"({exc.reason}); the log was left unchanged: {exc.path}",
                        {"code": "LOG_CORRUPT", "path": str(exc.path), "line": exc.line,
                         "reason": exc.reason, "retryable": False}) from None
    except LogVersionError as exc:
        raise HostError("internal", f"cannot load session {session_id}: {exc}",
                        {"code": "LOG_VERSION", "path": str(path), "message": str(exc),
                         "retryable": False}) from None
    except (LogWriteError, OSError) as exc:  # the repair of a torn tail could not be written
        raise storage_error(session_id, exc if isinstance(exc, LogWriteError) else LogWriteError(path, exc)) from None
    except LogBusyError:
        raise busy_error("load", session_id, path) from None


def busy_error(action: str, session_id: str, path: Path, why: str | None = None) -> HostError:
    """``internal`` with ``data.code`` ``SESSION_BUSY``: another agent-server process holds the
    log's one-writer lock, so ``action`` (``"load"``, ``"delete"``) cannot be done now (retryable).
    ``data.lockedBy``: the holder (``takeover.lock_holder``: pid, alive, answersTakeOver) or
    ``None``; ``why``: what a failed take-over adds to the message."""
    holder = takeover.lock_holder(path)
    who = f" (pid {holder['pid']})" if holder else ""
    hint = ("close it there first, or take it over (_meta.agentServer.takeOver) or open a copy (session/fork)"
            if action != "delete" else "close it there first")
    return HostError("internal", f"cannot {action} session {session_id}: it is open in another "
                     f"agent-server process{who} (another editor window?); {why + '; ' if why else ''}{hint}",
                     {"code": "SESSION_BUSY", "path": str(path), "retryable": True, "lockedBy": holder})


def check_cwd(session_id: str, header: dict[str, Any], cwd: str) -> None:
    """Refuse (``HostError`` ``invalid``) a load whose ``cwd`` is not the session's folder."""
    if not same_dir(header.get("cwd"), cwd):
        raise HostError("invalid", f"session {session_id} belongs to {header.get('cwd')}, not {cwd}",
                        {"sessionId": session_id, "cwd": header.get("cwd")})


def load_roots(session_id: str, header: dict[str, Any], cwd: str, additional: Sequence[str]) -> list[str]:
    """The workspace roots of a load: ``[cwd, *additional]`` (the header's extra folders when
    ``additional`` is empty); ``HostError`` ``invalid`` for another folder or a missing one."""
    check_cwd(session_id, header, cwd)
    extra = list(additional) or list(header.get("additional_directories") or [])
    roots = [cwd, *extra]
    missing = [r for r in roots if not Path(r).is_dir()]
    if missing:
        raise HostError("invalid", f"not a directory: {missing[0]}", {"path": missing[0]})
    return roots


def storage_error(session_id: str, exc: LogWriteError) -> HostError:
    """``internal`` with ``data.code`` ``STORAGE``: the log cannot be written now (retryable)."""
    return HostError("internal", f"cannot load session {session_id}: {exc}; free space and load it again",
                     {"code": "STORAGE", "path": str(exc.path), "message": str(exc), "retryable": True})


def recover(session_id: str, event_log: EventLog) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Close what a dead process left open in ``event_log``. Returns the ``_meta`` to report (or
    ``None``) and, for each call the editor was shown and that was closed, the ``tool_call_update``
    (``failed``, with the reason) that tells it so. ``HostError`` ``STORAGE`` (the log is closed
    then) when that cannot be written."""
    reaped = reap_orphans(event_log.path.parent)  # commands a dead server left running
    try:
        if reaped:
            event_log.append("tool/reaped", {"process_groups": reaped})
        recovery = close_open_turn(event_log)
        from agent_server.host.undo import recover_restore

        if recover_restore(event_log):  # an /undo or /redo the dead process was running
            log.info("session %s: closed the /undo or /redo a dead process left open", session_id)
    except LogWriteError as exc:
        event_log.close()
        raise storage_error(session_id, exc) from None
    if not recovery.changed:
        return None, []
    log.info("session %s: closed what a dead process left open: %s", session_id, describe(recovery))
    closed = [{"sessionUpdate": "tool_call_update", "toolCallId": e.data["tool_call_id"], "status": "failed",
               "content": [{"type": "content", "content": {"type": "text", "text": str(e.data["content"])}}]}
              for e in recovery.results if e.data.get("announced")]
    return {"agentServer": {"recovered": describe(recovery)}}, closed


def list_sessions(store: SessionStore, cwd: str | None, cursor: str | None = None,
                  defer_save: bool = False) -> tuple[list[dict[str, Any]], str | None]:
    """One page of the stored sessions that had a prompt, as ACP ``SessionInfo`` objects, newest
    first, and the cursor of the next page (``None`` on the last; see ``paging``). ``HostError``
    ``invalid`` for a cursor this server did not make.

    Each: ``sessionId``, ``cwd``, ``additionalDirectories`` (when any), ``title`` (first line of
    the first prompt, at most ``TITLE_CHARS``; absent for a prompt without text) and ``updatedAt``
    (ISO 8601, the log's last write). ``cwd`` filters by folder (``/w``, ``/w/`` and ``/w/.`` are
    the same folder). Sessions never prompted and unreadable logs are left out. Read from the
    store's index (``session.index``), not from every log; ``defer_save``: its file is written by
    ``store.save_listing()``, later.
    """
    want = os.path.normpath(cwd) if isinstance(cwd, str) else None
    found = [(e.updated, e.session_id, e) for e in store.listing(defer_save)
             if e.prompted and (want is None or e.cwd == want or os.path.normpath(e.cwd) == want)]
    try:
        chosen, next_cursor = paging.page(found, cursor)
    except paging.BadCursor as exc:
        raise HostError("invalid", str(exc), {"cursor": cursor}) from None
    infos = []
    for entry in chosen:  # only the page's entries are shaped
        info: dict[str, Any] = {"sessionId": entry.session_id, "cwd": entry.cwd, "updatedAt": _iso(entry.updated)}
        if entry.additional_directories:
            info["additionalDirectories"] = list(entry.additional_directories)
        if entry.title:
            info["title"] = entry.title
        infos.append(info)
    return infos, next_cursor


def same_dir(a: Any, b: Any) -> bool:
    """Whether two absolute folder paths name the same folder, lexically (``/w/`` is ``/w``)."""
    return isinstance(a, str) and isinstance(b, str) and os.path.normpath(a) == os.path.normpath(b)


def _iso(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- the history as session updates ---------------------------------------------------------------


def history_updates(events: Sequence[SessionEvent], roots: Sequence[str], *,
                    terminal: bool = False, images: Callable[[str], str] | None = None) -> Iterator[dict[str, Any]]:
    """The ``session/update`` payloads that show ``events`` to an editor, in log order, made one at
    a time as they are taken (a long log is streamed, never held as a list of updates).

    ``user`` → one ``user_message_chunk`` per prompt block; ``assistant`` → an
    ``agent_thought_chunk`` (reasoning) and an ``agent_message_chunk`` (text), each only when not
    empty; ``assistant/attempt`` (a failed try) → the same for what it had streamed, then its
    retry notice when a retry followed (``agent.step.retry_notice``: the update sent live); ``tool/call`` → one ``tool_call`` with the final status and content of its
    ``tool/result`` (``pending`` while it still runs; the files it changed, from its ``checkpoint/file``
    events, in ``_meta.agentServer.changedFiles``); a synthetic result whose call was never
    announced → its own ``tool_call``; a ``notice`` (written for the model) → a short note for the
    user in plain words, or nothing (``_notice_for_user``: never the model's instructions);
    ``checkpoint/undo|redo``, ``inbox/dropped``, an MCP server's notice (``mcp/notice``), the policy's
    (``policy/notice``; one about a prompt's left-out attachments after that prompt, where the editor
    showed it live) and a failed turn → an ``agent_message_chunk`` marked ``[agent-server]``; a ``plan`` call → its ``tool_call`` then a
    ``plan`` update with its entries, as it was shown live. With ``terminal`` (the editor takes
    the terminal convention), a ``bash`` call still running gets its terminal as it did live
    (``tools.live``), so the output that follows shows in it. A stored prompt image comes back
    with its data from ``images`` (``ImageStore.base64`` of the session folder; without it, or when
    it is gone, a text block names it). ``events`` must not change while this is consumed (pass a
    snapshot: ``EventLog.events`` is one).
    """
    context = ToolContext.on_disk(*(roots or ["/"]))
    results: dict[str, SessionEvent] = {}
    changed: dict[str, list[SessionEvent]] = {}  # the checkpoint/file events of each call (what /undo takes back)
    announced: set[str] = set()  # the editor ids of the calls announced (``tool/call``)
    for event in events:  # (one walk for the three)
        kind = event.type
        if kind == "tool/result":
            results.setdefault(str(event.data.get("tool_call_id")), event)
        elif kind == "tool/call":
            announced.add(f"tc-{event.seq}")
        elif kind == "checkpoint/file" and event.data.get("call_id"):
            changed.setdefault(str(event.data["call_id"]), []).append(event)
    shown: dict[tuple[str, str], dict[str, Any]] = {}  # a call's display by (tool, arguments): computed once
    restore: SessionEvent | None = None  # the restore of the /undo or /redo whose command comes next
    step_seq: int | None = None  # the step whose answer the next assistant event holds (its messageId)
    calls = 0  # tool calls of the last answer
    compaction: int | None = None  # the compaction/start of the compaction being read, and its summary
    summary = ""
    instructions: list[Any] = []  # the project instructions the model had until this event
    held: list[dict[str, Any]] = []  # an attachment notice, logged before its prompt: shown after it, as live
    for event in events:
        kind, data = event.type, event.data
        if kind == "step/start":
            step_seq = event.seq
        if kind == "project/instructions":  # told as it was live: loaded for the first time, or changed
            now = list(data.get("files") or [])
            told = instructions_text(instructions, now, roots)
            instructions = now
            if told is not None:
                yield _notice(told, "info")
        elif kind == "mcp/tools":  # MCP tools offered from here on: shown with their server, as live
            _mcp_display(data, shown)
        elif kind == "user":
            blocks = data.get("blocks") or [{"type": "text", "text": data.get("content", "")}]
            if data.get("content") == INIT_PROMPT:  # what the user typed, not the instructions it became
                blocks = [{"type": "text", "text": "/init"}]
            for block in blocks:
                if block.get("type") == "image" and "sha256" in block:
                    block = _stored_image(block, images)
                yield {"sessionUpdate": "user_message_chunk", "content": block,
                       "messageId": message_id(event.seq, "user_message_chunk")}
            yield from held
            held.clear()
        elif kind in ("assistant", "assistant/attempt"):  # an attempt: what a failed try had shown
            if kind == "assistant":
                calls = len(data.get("tool_calls") or [])  # the calls it kept (a dropped-calls notice names them)
            if data.get("reasoning"):
                yield _chunk("agent_thought_chunk", data["reasoning"], _step_id(step_seq, "agent_thought_chunk"))
            if data.get("text"):
                yield _chunk("agent_message_chunk", data["text"], _step_id(step_seq, "agent_message_chunk"))
            notice = retry_notice(event) if kind == "assistant/attempt" else None
            if notice is not None:
                yield notice
        elif kind == "assistant/waiting":  # a try still unanswered: told as it was live
            yield waiting_notice(event)
        elif kind == "compaction/start":
            compaction, summary = event.seq, ""
        elif kind in ("compaction/summary", "compaction/fallback"):
            summary = str(data.get("text") or "")
        elif kind == "compaction/end" and isinstance(data.get("message"), str) and compaction is not None:
            from agent_server.agent.compaction import compaction_done

            yield compaction_done(f"compaction-{compaction}", summary, data.get("estimate_before"), None)
        elif kind == "tool/call":
            result = results.get(f"tc-{event.seq}")
            update = _tool_call(f"tc-{event.seq}", data, result, context, shown, terminal=terminal)
            if result is not None and changed.get(f"tc-{event.seq}"):  # as said live (Checkpoints.say_changed)
                files = changed[f"tc-{event.seq}"]
                update["_meta"] = {"agentServer": changed_files_meta(files, [str(e.data.get("path")) for e in files])}
            yield update
            plan = _plan(data, result)
            if plan is not None:
                yield plan
        elif kind == "tool/result" and data.get("tool_call_id") not in announced:
            yield _tool_call(str(data.get("tool_call_id")), {**data, "arguments": ""}, event, context, shown)
        elif kind == "notice" and data.get("reason") == "tool_calls_dropped" and isinstance(data.get("dropped"), int):
            yield _notice(dropped_calls_text(data["dropped"], calls), "warning")  # as it was sent live
        elif kind == "notice":
            note = _notice_for_user(data)
            if note:
                yield _notice(f"\n\n[agent-server] {note}\n\n", "info")
        elif kind in ("checkpoint/undo", "checkpoint/redo") and data.get("call_id"):
            restore = event  # shown with its command, as it was live: the command, the call, the answer
        elif kind == "command" and data.get("name") in SHOWN_COMMANDS:
            yield from _command_turn(event, restore, roots)
            restore = None
        elif kind in ("checkpoint/undo", "checkpoint/redo"):  # a log written before the command was shown
            files = "; ".join(f"{_relative(str(f.get('path', '')), roots)}: {f.get('outcome', '')}"
                              for f in data.get("files") or [] if isinstance(f, dict))
            verb = "Undid" if kind == "checkpoint/undo" else "Redid"
            yield _notice(f"\n\n[agent-server] {verb} the file changes of turn {data.get('turn')}"
                          f"{': ' + files if files else ''}.\n\n", "info")
        elif kind == "checkpoint/off":
            from agent_server.checkpoints.recorder import capture_off_text

            yield _notice(capture_off_text(str(data.get("reason", ""))))
        elif kind == "checkpoint/unwatched":
            from agent_server.checkpoints.recorder import unwatched_text

            yield _notice(unwatched_text(str(data.get("reason", "")), str(data.get("detail") or "")))
        elif kind == "checkpoint/nested":
            from agent_server.checkpoints.recorder import nested_off_text

            yield _notice(nested_off_text([str(n) for n in data.get("names") or []]))
        elif kind == "policy/hook_run":
            yield _notice(hook_run_text(data, roots))
        elif kind == "params/changed":
            from agent_server.host.options import params_change_text

            yield _notice(params_change_text(data), "info")
        elif kind == "mcp/notice":  # as tools.mcp.session.mcp_notice_update sent it live
            yield _notice(f"[agent-server] {data.get('text', '')}\n", str(data.get("severity") or "warning"))
        elif kind == "policy/notice" and isinstance(data.get("text"), str):  # as policy.engine sent it live
            if data.get("rule") == "attachment":  # screened before its prompt was logged: the editor drew
                held.append(_notice(f"\n[agent-server] {data['text']}\n"))  # the prompt first
            elif data.get("rule") == "editor-config-shell":
                yield _notice(f"\n[agent-server] A shell command changed editor configuration: {data['text']}\n")
            else:
                yield _notice(f"\n[agent-server] {data['text']}\n")
        elif kind == "inbox/dropped":
            yield _notice("\n\n[agent-server] A prompt that was waiting for its turn was not run, because "
                          "agent-server stopped first. Send it again to run it:\n\n"
                          f"{data.get('content', '')}\n\n")
        elif kind == "turn/end" and data.get("exit") == "error":
            message = (data.get("error") or {}).get("message", "the turn failed")
            yield _notice(f"\n\n[agent-server] The turn failed: {message}\n\n", "error")
    yield from held  # a prompt screened but never run (the process stopped first)


#: Commands a loaded session shows as they were shown live: what the user typed, then the answer.
SHOWN_COMMANDS = ("undo", "redo", "checkpoints")


def _stored_image(block: dict[str, Any], images: Callable[[str], str] | None) -> dict[str, Any]:
    """An ACP image block of a prompt image the log names by its sha256 (data from ``images``),
    or a text block naming it when its bytes are not to be had."""
    if images is not None:
        try:
            return {"type": "image", "mimeType": block.get("mimeType"), "data": images(str(block["sha256"]))}
        except ImageMissing:  # the load goes on, the image is named
            pass
    return {"type": "text", "text": f"[image {block.get('mimeType')}, {block.get('bytes')} bytes: no longer stored]"}


def _command_turn(command: SessionEvent, restore: SessionEvent | None,
                  roots: Sequence[str]) -> Iterator[dict[str, Any]]:
    """A ``/undo``, ``/redo`` or ``/checkpoints`` as it was shown live: the user's command, the
    restore's tool call (finished, with each file's outcome), the text the user was answered."""
    from agent_server.host.undo import restore_call, restore_content, restore_meta, restore_summary

    data = command.data
    typed = f"/{data.get('name')}" + (f" {data['argument']}" if data.get("argument") else "")
    yield {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": typed}}
    if restore is not None:
        files = [f for f in restore.data.get("files") or [] if isinstance(f, dict)]
        which = "undo" if restore.type == "checkpoint/undo" else "redo"
        turn = int(restore.data.get("turn") or 0)
        call = restore_call(which, turn, str(restore.data["call_id"]), [str(f.get("path", "")) for f in files])
        done = restore.data.get("done") if isinstance(restore.data.get("done"), bool) else None
        yield {**call, "status": "completed", "content": restore_content(restore_summary(files, list(roots))),
               "_meta": restore_meta(which, turn, files, done)}
    yield _chunk("agent_message_chunk", str(data.get("outcome", "")), reply_id(command))


def _notice_for_user(data: dict[str, Any]) -> str | None:
    """What a replayed ``notice`` shows the user: its ``text`` is written for the model ("Do not
    assume they succeeded…") and is never shown; by its ``reason``, a short note in plain words, or
    ``None`` (nothing) for a notice with nothing to tell the user (a checkpoint's: its
    ``checkpoint/undo|redo`` event is shown instead)."""
    reason = data.get("reason")
    partly = (" Some of its tool calls were interrupted and may have had part of their effect."
              if data.get("may_have_run") else "")
    if reason == "cancelled":
        return "The turn was cancelled." + partly
    if reason == "interrupted":
        why = ("the session log could not be written" if "could not be written" in str(data.get("text", ""))
               else "agent-server stopped")
        return f"The turn was interrupted before it was finished: {why}." + partly
    if reason == "max_turn_requests":
        return "Stopped at the turn's limit of model requests (max_steps_per_turn)."
    return None


def instructions_text(before: Sequence[Any], now: Sequence[Any], roots: Sequence[str]) -> str | None:
    """What the user is told when the project instructions put into the model's system prompt
    (``AGENTS.md`` …, ``project/instructions`` records) are loaded for the first time in a session or
    change — a repository's text steers the model, so the user sees which file and how big; ``None``
    when nothing changed. The model's request is not changed by it."""
    def size(record: Any) -> str:
        return f"{len(str(record.get('text', '')).encode()):,} bytes"

    def name(record: Any) -> str:
        path = _relative(str(record.get("path", "")), roots)
        return "".join(f"\\u{ord(c):04x}" if ord(c) < 32 or c in "\u2028\u2029\x7f" else c for c in path)

    old = {str(r.get("path")): r for r in before if isinstance(r, dict)}
    new = {str(r.get("path")): r for r in now if isinstance(r, dict)}
    parts: list[str] = []
    loaded = [name(r) + f" ({size(r)})" for p, r in new.items() if p not in old]
    changed = [name(r) + f" ({size(r)}, was {size(old[p])})" for p, r in new.items()
               if p in old and r.get("sha256") != old[p].get("sha256")]
    gone = [name(r) for p, r in old.items() if p not in new]
    if loaded:
        parts.append(("Project instructions loaded into the model's instructions: " if not old else
                      "More project instructions loaded into the model's instructions: ") + ", ".join(loaded) + ".")
    if changed:
        parts.append("Project instructions changed; the model gets the new text from now on: " + ", ".join(changed) + ".")
    if gone:
        parts.append("No longer in the model's instructions: " + ", ".join(gone) + ".")
    if not parts:
        return None
    return "\n[agent-server] " + " ".join(parts) + " The model follows them like your own words: read them if you did not write them.\n"


def hook_run_text(data: dict[str, Any], roots: Sequence[str]) -> str:
    """The end-of-turn summary of a ``policy/hook_run`` event: which changed files the git hooks run."""
    files = [f for f in data.get("files") or [] if isinstance(f, dict)]

    def plain(path: object) -> str:  # a file name may hold a newline: it never forges a line of ours
        return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in _relative(str(path), roots))

    shown = "; ".join(f"{plain(f.get('path', ''))} (through {plain(f.get('hook', ''))})" for f in files)
    return ("\n\n[agent-server] This turn changed files that your git hooks run or read, outside the sandbox, on "
            f"your next commit or push: {shown}. Review these changes before you commit.\n\n")


def _relative(path: str, roots: Sequence[str]) -> str:
    for root in roots:
        prefix = root.rstrip("/") + "/"
        if path.startswith(prefix):
            return path[len(prefix):]
    return path


def _notice(text: str, severity: str = "warning") -> dict[str, Any]:
    """A server notice in the chat (``[agent-server] …``), marked ``_meta.agentServer.notice`` as it
    was live: the ACP front end sends it as an ACP ``notice`` to a client that takes them."""
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
            "_meta": {"agentServer": {"notice": {"severity": severity}}}}


def _chunk(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        chunk["messageId"] = message_id
    return chunk


def _step_id(step_seq: int | None, kind: str) -> str | None:
    """The ``messageId`` the step's chunks were streamed with (``None``: a log without its step)."""
    return message_id(step_seq, kind) if step_seq is not None else None


def _tool_call(tool_call_id: str, call: dict[str, Any], result: SessionEvent | None,
               context: ToolContext, shown: dict[tuple[str, str], dict[str, Any]], *,
               terminal: bool = False) -> dict[str, Any]:
    name = str(call.get("name", "tool"))
    arguments = str(call.get("arguments") or "")
    display = shown.get((name, arguments)) or shown.get((name, None))  # type: ignore[arg-type]
    if display is None:
        display = shown[(name, arguments)] = _display(name, arguments, context)
    update: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": tool_call_id, "name": name,
                              "title": display["title"],
                              "kind": display["kind"], "status": "pending", "rawInput": _raw_input(arguments)}
    if "locations" in display:
        update["locations"] = [dict(location) for location in display["locations"]]
    if terminal and display["live"] and result is None:  # running: its output goes on
        update["content"] = [terminal_block(tool_call_id)]
        update["_meta"] = {"terminal_info": {"terminal_id": tool_call_id, "cwd": str(context.cwd)}}
    if result is not None:
        update["status"] = "failed" if result.data.get("status") == "failed" else "completed"
        update["content"] = [{"type": "content", "content": {"type": "text", "text": str(result.data.get("content", ""))}}]
    return update


def _mcp_display(data: dict[str, Any], shown: dict[tuple[str, str], dict[str, Any]]) -> None:
    """Record how the MCP tools of an ``mcp/tools`` event were shown (``McpTool.title``: "TOOL
    (SERVER MCP server)", its kind) under ``(name, None)``; a later map replaces an earlier one."""
    kinds = data.get("kinds") if isinstance(data.get("kinds"), dict) else {}
    for key in [k for k in shown if k[1] is None]:
        del shown[key]
    for name, pair in (data.get("map") or {}).items():
        if isinstance(pair, list) and len(pair) == 2:
            shown[(str(name), None)] = {"title": f"{pair[1]} ({pair[0]} MCP server)",  # type: ignore[index]
                                        "kind": str(kinds.get(name, "other")), "live": False}


def _display(name: str, arguments: str, context: ToolContext) -> dict[str, Any]:
    """A call's ``title``, ``kind`` and ``locations`` (when any), as the tool shows them, and
    ``live``: whether its output streams to a terminal while it runs."""
    display: dict[str, Any] = {"title": name, "kind": "other", "live": False}
    tool = next((t for t in BUILTIN_TOOLS if t.name == name), None)
    if tool is not None and arguments:
        args = validate_args(tool, arguments)
        if not isinstance(args, ToolResult):  # a ToolResult: the arguments did not validate
            display["kind"] = tool.kind
            display["live"] = bool(tool.live_output)
            try:
                display["title"] = tool.title(args, context)
                locations = tool.locations(args, context)
                if locations:
                    display["locations"] = locations
            except Exception:  # display only: keep the plain name
                log.debug("title of %s failed on replay", name, exc_info=True)
    return display


def _plan(call: dict[str, Any], result: SessionEvent | None) -> dict[str, Any] | None:
    """The ``plan`` update a completed ``plan`` call showed (the plan tool's own validation)."""
    if call.get("name") != "plan" or result is None or result.data.get("status") == "failed":
        return None
    tool = next((t for t in BUILTIN_TOOLS if t.name == "plan"), None)
    args = validate_args(tool, str(call.get("arguments") or "")) if tool is not None else None
    if args is None or isinstance(args, ToolResult):
        return None
    return {"sessionUpdate": "plan", "entries": [e.model_dump() for e in args.entries]}


def _raw_input(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"arguments": arguments}
