"""Stored sessions: ``session/load``, ``session/list``, ``session/delete`` (PROTOCOL.md).

Role: ``SessionLifecycle`` opens a stored log (torn tail cut and logged by ``EventLog.open``),
closes what a dead process left open (``agent.recovery.close_open_turn``: synthetic results, the
interruption notice, ``turn/end {exit: "interrupted"}``, dropped inbox prompts), makes the session
live, replays the whole history as ``session/update`` notifications (``history_updates``) and only
then answers. A session already live in this process is not reopened: its history is replayed
from memory, and a running turn goes on. ``session/list`` reads headers without changing any log;
``session/delete`` closes a live session and removes its folder.

Must never: change a log except by appending, start a turn on its own (a prompt that was queued
when the process died is reported, not run), or answer a load before its replayed updates.
"""

from __future__ import annotations

import datetime
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pydantic import Field, ValidationError, field_validator

from agent_server.agent.recovery import close_open_turn, describe
from agent_server.tools.procs import reap_orphans
from agent_server.server import acp_models as m
from agent_server.server.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, RESOURCE_NOT_FOUND, JsonRpcError, RequestContext
from agent_server.session import EventLog, LogBusyError, LogCorruptError, LogVersionError, SessionEvent, read_head
from agent_server.tools import BUILTIN_TOOLS, ToolContext, ToolResult, validate_args

if TYPE_CHECKING:
    from agent_server.server.acp import AcpServer

log = logging.getLogger("agent_server.server")

TITLE_CHARS = 80
"""Longest ``SessionInfo.title``: the first line of the first prompt, cut with an ellipsis."""


class LoadSessionParams(m._Open):
    """``session/load`` params (schema ``LoadSessionRequest``)."""

    sessionId: str
    cwd: str
    mcpServers: list[dict[str, Any]] = Field(default_factory=list)
    additionalDirectories: list[str] = Field(default_factory=list)

    @field_validator("cwd")
    @classmethod
    def _cwd_absolute(cls, value: str) -> str:
        return m._absolute(value)

    @field_validator("additionalDirectories")
    @classmethod
    def _dirs_absolute(cls, value: list[str]) -> list[str]:
        return [m._absolute(v) for v in value]


class ListSessionsParams(m._Open):
    """``session/list`` params (schema ``ListSessionsRequest``)."""

    cwd: str | None = None
    cursor: str | None = None


class DeleteSessionParams(m._Open):
    """``session/delete`` params (schema ``DeleteSessionRequest``)."""

    sessionId: str


def _parse(model: type[m._Open], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise JsonRpcError(INVALID_PARAMS, f"invalid params: {exc.error_count()} error(s)",
                           m.describe_validation_error(exc)) from None


class SessionLifecycle:
    """The stored-session methods of one ``AcpServer`` (its store, sessions and connection)."""

    def __init__(self, server: "AcpServer") -> None:
        self.server = server

    def request_handlers(self) -> dict[str, Any]:
        """Method name → handler, merged into ``AcpServer.request_handlers()``."""
        return {"session/load": self.load, "session/list": self.list, "session/delete": self.delete}

    # -- session/load -------------------------------------------------------------------------

    async def load(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/load``: replay the history as updates, then answer ``{"modes", "configOptions"}``
        (plus ``_meta.agentServer.recovered`` when a dead process's turn or queue was closed).

        Errors: ``-32002`` unknown session; ``-32602`` bad params, a ``cwd`` other than the
        session's, a missing directory; ``-32603`` with ``data.code`` ``LOG_CORRUPT`` (``data.line``
        is the bad line) or ``LOG_VERSION`` when the log cannot be read — it is then left as is —
        and ``SESSION_BUSY`` when another agent-server process has the session open.
        """
        p: LoadSessionParams = _parse(LoadSessionParams, params)
        session = self.server.sessions.get(p.sessionId)
        meta: dict[str, Any] | None = None
        if session is None:
            await self.server.policies.prepare()
            session = self.server.sessions.get(p.sessionId)
        if session is None:
            # no await from here to open_session: two loads of one id cannot both open the log
            event_log = self._open_log(p.sessionId)
            try:
                roots = self._roots(p, event_log.events[0].data)
            except JsonRpcError:
                event_log.close()
                raise
            reaped = reap_orphans(event_log.path.parent)  # commands a dead server left running
            if reaped:
                event_log.append("tool/reaped", {"process_groups": reaped})
            recovery = close_open_turn(event_log)
            if recovery.changed:
                meta = {"agentServer": {"recovered": describe(recovery)}}
                log.warning("session %s: closed what a dead process left open: %s", p.sessionId, describe(recovery))
            session = self.server.open_session(p.sessionId, event_log, roots)
        else:
            header = session.log.events[0].data
            if not _same_dir(header.get("cwd"), p.cwd):
                raise JsonRpcError(INVALID_PARAMS, f"session {p.sessionId} belongs to {header.get('cwd')}, not {p.cwd}",
                                   {"sessionId": p.sessionId, "cwd": header.get("cwd")})
        header = session.log.events[0].data
        roots = [str(header.get("cwd") or p.cwd), *(header.get("additional_directories") or [])]
        for update in history_updates(session.log.events, roots):
            await self._notify(p.sessionId, update)
        result = dict(self.server.policies.state(p.sessionId))
        if meta:
            result["_meta"] = meta
        return result

    def _open_log(self, session_id: str) -> EventLog:
        try:
            path = self.server.store.log_path(session_id)
        except ValueError as exc:
            raise JsonRpcError(INVALID_PARAMS, str(exc), {"sessionId": session_id}) from None
        if not path.is_file():
            raise JsonRpcError(RESOURCE_NOT_FOUND, f"unknown session: {session_id}", {"sessionId": session_id})
        try:
            return EventLog.open(path)
        except LogCorruptError as exc:
            raise JsonRpcError(INTERNAL_ERROR,
                               f"cannot load session {session_id}: its log is corrupt at line {exc.line} "
                               f"({exc.reason}); the log was left unchanged: {exc.path}",
                               {"code": "LOG_CORRUPT", "path": str(exc.path), "line": exc.line,
                                "reason": exc.reason, "retryable": False}) from None
        except LogVersionError as exc:
            raise JsonRpcError(INTERNAL_ERROR, f"cannot load session {session_id}: {exc}",
                               {"code": "LOG_VERSION", "path": str(path), "message": str(exc),
                                "retryable": False}) from None
        except LogBusyError:
            raise JsonRpcError(INTERNAL_ERROR, f"cannot load session {session_id}: it is open in another "
                               "agent-server process (another editor window?); close it there first",
                               {"code": "SESSION_BUSY", "path": str(path), "retryable": True}) from None

    @staticmethod
    def _roots(p: LoadSessionParams, header: dict[str, Any]) -> list[str]:
        if not _same_dir(header.get("cwd"), p.cwd):
            raise JsonRpcError(INVALID_PARAMS, f"session {p.sessionId} belongs to {header.get('cwd')}, not {p.cwd}",
                               {"sessionId": p.sessionId, "cwd": header.get("cwd")})
        extra = p.additionalDirectories or list(header.get("additional_directories") or [])
        roots = [p.cwd, *extra]
        missing = [r for r in roots if not Path(r).is_dir()]
        if missing:
            raise JsonRpcError(INVALID_PARAMS, f"not a directory: {missing[0]}", {"path": missing[0]})
        return roots

    async def _notify(self, session_id: str, update: dict[str, Any]) -> None:
        connection = self.server.connection
        if connection is not None and not connection.closed.is_set():
            await connection.notify("session/update", {"sessionId": session_id, "update": update})

    # -- session/list -------------------------------------------------------------------------

    async def list(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/list``: ``{"sessions": [SessionInfo]}``, newest first, all in one page.

        Each ``SessionInfo``: ``sessionId``, ``cwd``, ``additionalDirectories`` (when any),
        ``title`` (first line of the first prompt, at most ``TITLE_CHARS``; absent before the first
        prompt) and ``updatedAt`` (ISO 8601, the log's last write). ``cwd`` filters by folder
        (``/w``, ``/w/`` and ``/w/.`` are the same folder).
        Unreadable logs are skipped. A ``cursor`` is refused (``-32602``): no page is ever cut.
        """
        p: ListSessionsParams = _parse(ListSessionsParams, params)
        if p.cursor:
            raise JsonRpcError(INVALID_PARAMS, "unknown cursor: session/list returns every session in one page",
                               {"cursor": p.cursor})
        found: list[tuple[float, dict[str, Any]]] = []
        store = self.server.store
        for session_id in store.ids():
            path = store.log_path(session_id)
            try:
                header, first = read_head(path, lambda e: e.type == "user")
                updated = path.stat().st_mtime
            except (LogCorruptError, LogVersionError, OSError) as exc:
                log.warning("session/list: skipping %s: %s", session_id, exc)
                continue
            cwd = header.data.get("cwd")
            if not isinstance(cwd, str) or (p.cwd is not None and not _same_dir(cwd, p.cwd)):
                continue
            info: dict[str, Any] = {"sessionId": session_id, "cwd": cwd, "updatedAt": _iso(updated)}
            extra = header.data.get("additional_directories")
            if extra:
                info["additionalDirectories"] = list(extra)
            title = session_title(first)
            if title:
                info["title"] = title
            found.append((updated, info))
        found.sort(key=lambda item: (item[0], item[1]["sessionId"]), reverse=True)
        return {"sessions": [info for _, info in found]}

    # -- session/delete -----------------------------------------------------------------------

    async def delete(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/delete``: cancel and close it if live, remove its folder; ``{}``.

        Errors: ``-32002`` unknown session, ``-32602`` invalid id.
        """
        p: DeleteSessionParams = _parse(DeleteSessionParams, params)
        try:
            self.server.store.log_path(p.sessionId)
        except ValueError as exc:
            raise JsonRpcError(INVALID_PARAMS, str(exc), {"sessionId": p.sessionId}) from None
        session = self.server.sessions.pop(p.sessionId, None)
        self.server.policies.policies.pop(p.sessionId, None)
        if session is not None:
            session.cancel()
            await session.close()
        try:
            self.server.store.delete(p.sessionId)
        except FileNotFoundError:
            if session is None:
                raise JsonRpcError(RESOURCE_NOT_FOUND, f"unknown session: {p.sessionId}",
                                   {"sessionId": p.sessionId}) from None
        return {}


def _same_dir(a: Any, b: Any) -> bool:
    """Whether two absolute folder paths name the same folder, lexically (``/w/`` is ``/w``)."""
    return isinstance(a, str) and isinstance(b, str) and os.path.normpath(a) == os.path.normpath(b)


def session_title(first_user: SessionEvent | None) -> str | None:
    """The first non-blank line of the first text block of the first prompt, cut to
    ``TITLE_CHARS`` with ``…``; ``None`` when there is no prompt yet."""
    if first_user is None:
        return None
    texts = [b.get("text", "") for b in first_user.data.get("blocks") or [] if b.get("type") == "text"]
    source = "\n".join(texts) if texts else str(first_user.data.get("content", ""))
    line = next((ln.strip() for ln in source.splitlines() if ln.strip()), "")
    if not line:
        return None
    return line if len(line) <= TITLE_CHARS else line[:TITLE_CHARS - 1].rstrip() + "…"


def _iso(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


# -- the history as session updates ---------------------------------------------------------------


def history_updates(events: Sequence[SessionEvent], roots: Sequence[str]) -> list[dict[str, Any]]:
    """The ``session/update`` payloads that show ``events`` to an editor, in log order.

    ``user`` → one ``user_message_chunk`` per prompt block; ``assistant`` → an
    ``agent_thought_chunk`` (reasoning) and an ``agent_message_chunk`` (text), each only when not
    empty; ``tool/call`` → one ``tool_call`` with the final status and content of its
    ``tool/result`` (``pending`` while it still runs); a synthetic result whose call was never
    announced → its own ``tool_call``; ``notice``, ``inbox/dropped`` and a failed turn → an
    ``agent_message_chunk`` marked ``[agent-server]``.
    """
    context = ToolContext.on_disk(*(roots or ["/"]))
    results: dict[str, SessionEvent] = {}
    for event in events:
        if event.type == "tool/result":
            results.setdefault(str(event.data.get("tool_call_id")), event)
    announced = {f"tc-{e.seq}" for e in events if e.type == "tool/call"}
    updates: list[dict[str, Any]] = []
    for event in events:
        kind, data = event.type, event.data
        if kind == "user":
            blocks = data.get("blocks") or [{"type": "text", "text": data.get("content", "")}]
            updates += [{"sessionUpdate": "user_message_chunk", "content": block} for block in blocks]
        elif kind == "assistant":
            if data.get("reasoning"):
                updates.append(_chunk("agent_thought_chunk", data["reasoning"]))
            if data.get("text"):
                updates.append(_chunk("agent_message_chunk", data["text"]))
        elif kind == "tool/call":
            updates.append(_tool_call(f"tc-{event.seq}", data, results.get(f"tc-{event.seq}"), context))
        elif kind == "tool/result" and data.get("tool_call_id") not in announced:
            updates.append(_tool_call(str(data.get("tool_call_id")), {**data, "arguments": ""}, event, context))
        elif kind == "notice":
            updates.append(_chunk("agent_message_chunk", f"\n\n[agent-server notice] {data.get('text', '')}\n\n"))
        elif kind == "inbox/dropped":
            updates.append(_chunk("agent_message_chunk",
                                  "\n\n[agent-server] A prompt that was waiting for its turn was not run, because "
                                  "agent-server stopped first. Send it again to run it:\n\n"
                                  f"{data.get('content', '')}\n\n"))
        elif kind == "turn/end" and data.get("exit") == "error":
            message = (data.get("error") or {}).get("message", "the turn failed")
            updates.append(_chunk("agent_message_chunk", f"\n\n[agent-server] The turn failed: {message}\n\n"))
    return updates


def _chunk(kind: str, text: str) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": {"type": "text", "text": text}}


def _tool_call(tool_call_id: str, call: dict[str, Any], result: SessionEvent | None,
               context: ToolContext) -> dict[str, Any]:
    name = str(call.get("name", "tool"))
    arguments = str(call.get("arguments") or "")
    update: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": tool_call_id, "title": name,
                              "kind": "other", "status": "pending", "rawInput": _raw_input(arguments)}
    tool = next((t for t in BUILTIN_TOOLS if t.name == name), None)
    if tool is not None and arguments:
        args = validate_args(tool, arguments)
        if not isinstance(args, ToolResult):  # a ToolResult: the arguments did not validate
            update["kind"] = tool.kind
            try:
                update["title"] = tool.title(args, context)
                locations = tool.locations(args, context)
                if locations:
                    update["locations"] = locations
            except Exception:  # display only: keep the plain name
                log.debug("title of %s failed on replay", name, exc_info=True)
    if result is not None:
        update["status"] = "failed" if result.data.get("status") == "failed" else "completed"
        update["content"] = [{"type": "content", "content": {"type": "text", "text": str(result.data.get("content", ""))}}]
    return update


def _raw_input(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"arguments": arguments}
