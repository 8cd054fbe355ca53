"""The ACP front end: method handlers that turn JSON-RPC calls into session-host calls.

Role: ``AcpServer`` implements the ACP methods (PROTOCOL.md) — ``initialize``, ``session/new``,
``session/prompt``, ``session/cancel``, ``session/load``, ``session/resume``, ``session/close``,
``session/fork`` (unstable), ``session/list``, ``session/delete``, ``session/set_mode`` and
``session/set_config_option`` (``mode``, ``model``; never ``session/set_model``) — by validating params, calling the
``SessionHost`` (``agent_server.host``) and mapping its answers and ``HostError``\\s onto the wire:
turn outcomes to stop reasons or to the ``-32603`` error with ``data: {code, message,
retryable}``. As the host's ``Frontend`` it sends each session's updates as ``session/update``
notifications, reads and writes files through the editor where the client allows it, and asks
permission with ``session/request_permission``.

Must never: hold session state (the host does), or send a session's notification before the
``session/new`` (or a mode change's) response.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from typing import Any, Iterator

from pydantic import ValidationError

from agent_server.config.load import Config
from agent_server.host import HostError, SessionHost
from agent_server.host import commands
from agent_server.config.views import MODEL_CONFIG_ID
from agent_server.policy.modes import MODE_CONFIG_ID
from agent_server.server.acp import models as m
from agent_server.server.acp.editor_files import EditorCapabilities, EditorFiles
from agent_server.server.acp.initialize import LOGIN_METHOD_ID, auth_methods, initialize_result
from agent_server.server.rpc.jsonrpc import (
    AUTH_REQUIRED,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    RESOURCE_NOT_FOUND,
    Connection,
    JsonRpcError,
    RequestContext,
)
from agent_server.server.acp.notices import shown_as
from agent_server.server.acp.permissions import PermissionRequester
from agent_server.session import SessionStore
from agent_server.tools import DiskFiles

log = logging.getLogger("agent_server.server")

_CODES = {"invalid": INVALID_PARAMS, "not_found": RESOURCE_NOT_FOUND, "internal": INTERNAL_ERROR,
          "auth_required": AUTH_REQUIRED}


@contextlib.contextmanager
def _wire_errors() -> Iterator[None]:
    """Turn a ``HostError`` into the JSON-RPC error of the same meaning."""
    try:
        yield
    except HostError as exc:
        raise JsonRpcError(_CODES[exc.kind], exc.message, exc.data) from None


def _parse(model: type[m._Open], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise JsonRpcError(INVALID_PARAMS, f"invalid params: {exc.error_count()} error(s)", m.describe_validation_error(exc)) from None


def _plain_prompt(params: dict[str, Any]) -> str | None:
    """The ``sessionId`` of ``session/prompt`` params that ``models.PromptParams`` accepts as they
    are — a string id and one or more text blocks of only ``type`` and ``text`` (and an object or
    null ``_meta``) — without building the model; ``None`` for anything else (the model decides)."""
    session_id, blocks = params.get("sessionId"), params.get("prompt")
    if type(session_id) is not str or type(blocks) is not list or not blocks:
        return None
    for key, value in params.items():
        if key not in ("sessionId", "prompt") and (key != "_meta" or (value is not None and type(value) is not dict)):
            return None
    for block in blocks:
        if type(block) is not dict or len(block) != 2 or block.get("type") != "text" or type(block.get("text")) is not str:
            return None
    return session_id


def _system_prompt(params: dict[str, Any]) -> dict[str, str] | None:
    """The client's system prompt of a session request (``models.client_system_prompt``); ``-32602``
    for one that cannot be applied, before anything is created, loaded or forked."""
    try:
        return m.client_system_prompt(params)
    except m.SystemPromptError as exc:
        raise JsonRpcError(INVALID_PARAMS, f"invalid params: {exc}",
                           {"errors": [{"path": exc.path, "message": str(exc)}]}) from None


def _take_over(params: dict[str, Any]) -> bool:
    """Whether a ``session/load``/``resume`` asks to take the session over from the agent-server
    process holding it (``_meta.agentServer.takeOver``: ``true``); ``-32602`` for another value."""
    meta = params.get("_meta")
    value = (meta.get("agentServer") or {}).get("takeOver", False) if isinstance(meta, dict) else False
    if not isinstance(value, bool):
        raise JsonRpcError(INVALID_PARAMS, "_meta.agentServer.takeOver must be true or false", {"takeOver": value})
    return value


class AcpServer:
    """The agent side of one ACP connection, a front end over its own ``SessionHost``.

    ``config``: resolved settings (``config_error``: why loading it failed, reported on prompts;
    ``config_loader``: reads them again, for a sign-in made after start-up); ``store``: where
    session logs go. Call ``bind(connection)`` before serving.
    """

    def __init__(self, config: Config, store: SessionStore, *, config_error: str | None = None,
                 config_loader: Any = None) -> None:
        self.host = SessionHost(config, store, config_error=config_error, config_loader=config_loader)
        self.host.attach(self)
        self.client_capabilities = m.ClientCapabilities()
        self.editor = EditorCapabilities()
        self.connection: Connection | None = None
        self.initialized = False
        """Whether an ``initialize`` request was received: nothing else is served before it."""
        self.client_runs_login = False
        """Whether the client runs ``agent-server login`` itself (it was offered a terminal auth method)."""
        self.client_notices = False
        """Whether the client takes ``notice`` updates (ACP 1.25 ``clientCapabilities.session.notices``)."""
        self.client_compaction = False
        """Whether the client takes ``compaction_update`` (ACP 1.25 ``clientCapabilities.session.compaction``)."""
        self.client_capabilities_json: dict[str, Any] = {}
        """The client's ``clientCapabilities`` as sent (fields newer than our models: ``elicitation``)."""

    @property
    def sessions(self) -> dict[str, Any]:
        """The host's live sessions by id."""
        return self.host.sessions

    @property
    def config(self) -> Config:
        """The host's settings."""
        return self.host.config

    @property
    def store(self) -> SessionStore:
        """The host's session store."""
        return self.host.store

    # -- wiring -------------------------------------------------------------------------------

    def request_handlers(self) -> dict[str, Any]:
        """Method name → request handler, for ``Connection(requests=...)``. Every method but
        ``initialize`` is refused until an ``initialize`` request was received (``_after_initialize``)."""
        handlers = {
            "initialize": self.initialize,
            "authenticate": self.authenticate,
            "logout": self.logout,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            "session/load": self.load,
            "session/resume": self.resume,
            "session/close": self.close,
            "session/fork": self.fork,
            "session/list": self.list,
            "session/delete": self.delete,
            "session/set_mode": self.set_mode,
            "session/set_config_option": self.set_config_option,
            # a notification in ACP; a client that sends it as a request still stops the turn
            "session/cancel": self.cancel_request,
        }
        return {name: handler if name == "initialize" else self._after_initialize(name, handler)
                for name, handler in handlers.items()}

    def _after_initialize(self, method: str, handler: Any) -> Any:
        """``handler``, refused with ``-32600`` while no ``initialize`` request was received: a
        client that skipped it would be served as one without file access (its edits written to
        disk with no approval step). A request pipelined right behind ``initialize`` is served: the
        ``initialize`` handler runs first and marks it received before any ``await``."""
        async def guarded(params: dict[str, Any], ctx: RequestContext) -> Any:
            if not self.initialized:
                raise JsonRpcError(INVALID_REQUEST, f"{method} before initialize: send the initialize request "
                                   "first (ACP: the client's capabilities decide how files are read and written)",
                                   {"method": method})
            return await handler(params, ctx)
        return guarded

    def notification_handlers(self) -> dict[str, Any]:
        """Method name → notification handler (ignored before ``initialize``)."""
        async def cancel(params: dict[str, Any]) -> None:
            if self.initialized:
                await self.cancel(params)
        return {"session/cancel": cancel}

    def bind(self, connection: Connection) -> None:
        """Attach the connection updates are sent on."""
        self.connection = connection

    def remember_initialize(self, params: dict[str, Any]) -> None:
        """Record the client's capabilities from ``initialize`` params (also used by the CLI's
        fast path, which answered ``initialize`` before this object existed)."""
        try:
            self.client_capabilities = m.InitializeParams.model_validate(params or {}).clientCapabilities
        except ValidationError:
            log.debug("initialize params did not validate; assuming no client capabilities")
            self.client_capabilities = m.ClientCapabilities()
        self.editor = EditorCapabilities.from_client(self.client_capabilities.model_dump(by_alias=True))
        self.initialized = True
        self.client_runs_login = auth_methods(params).pop().get("type") == "terminal"
        caps = (params or {}).get("clientCapabilities")
        session_caps = caps.get("session") if isinstance(caps, dict) else None
        self.client_notices = isinstance(session_caps, dict) and isinstance(session_caps.get("notices"), dict)
        self.client_compaction = isinstance(session_caps, dict) and isinstance(session_caps.get("compaction"), dict)
        self.client_capabilities_json = caps if isinstance(caps, dict) else {}
        config_caps = session_caps.get("configOptions") if isinstance(session_caps, dict) else None
        self.host.boolean_options = isinstance(config_caps, dict) and isinstance(config_caps.get("boolean"), dict)

    async def aclose(self) -> None:
        """Cancel running and queued turns, close logs and HTTP clients."""
        await self.host.aclose()

    # -- the host's Frontend --------------------------------------------------------------------

    def _shown(self, update: dict[str, Any]) -> dict[str, Any] | None:
        """``update`` as this client takes it (``notices.shown_as``: a notice, a compaction's
        progress, or the chat text)."""
        return shown_as(update, notices=self.client_notices, compaction=self.client_compaction)

    def emitter(self, session_id: str):
        """``session/update`` notifications for ``session_id`` (dropped once disconnected)."""
        async def emit(update: dict[str, Any]) -> None:
            update = self._shown(update)
            if update is not None and self.connection is not None and not self.connection.closed.is_set():
                await self.connection.notify("session/update", {"sessionId": session_id, "update": update})

        return emit

    def batch_emitter(self, session_id: str):
        """Several ``session/update`` notifications for ``session_id`` in one write (a replay)."""
        async def emit_many(updates: list[dict[str, Any]]) -> None:
            shown = [u for u in map(self._shown, updates) if u is not None]
            if shown and self.connection is not None and not self.connection.closed.is_set():
                await self.connection.notify_many("session/update",
                                                  [{"sessionId": session_id, "update": u} for u in shown])

        return emit_many

    def files(self, session_id: str, emit: Any) -> Any:
        """The session's workspace-file seam: through the editor where the client allows it
        (PROTOCOL.md), else the disk."""
        caps = self.editor
        if self.connection is None or not (caps.read_text or caps.write_text or caps.apply_workspace_edit):
            return DiskFiles()
        return EditorFiles(self.connection, session_id, caps, emit=emit,
                           approval_timeout=lambda: self.host.config.policy.approval_timeout)

    def approver(self, session_id: str) -> PermissionRequester:
        """``session/request_permission`` on this connection."""
        return PermissionRequester(lambda: self.connection, session_id,
                                   lambda: self.host.config.policy.approval_timeout)

    def elicitor(self, session_id: str) -> Any:
        """An MCP server's elicitation asked through ``elicitation/create`` (ACP 1.29), or ``None``
        when the client advertises no ``clientCapabilities.elicitation`` mode."""
        from agent_server.server.acp.elicitation import elicitor_for

        return elicitor_for(lambda: self.connection, session_id, self.client_capabilities_json,
                            lambda: self.host.config.policy.approval_timeout)

    def edits_need_approval(self) -> bool:
        """Plain ACP (``fs/write_text_file``, no proposals): the permission question is the user's
        only review."""
        return self.editor.write_text and not self.editor.apply_workspace_edit

    def terminal_output(self) -> str | None:
        """The ``_meta`` key shell output is streamed under (the client's terminal convention), or
        ``None``: the client gets the final result only."""
        return self.editor.terminal_output

    # -- methods ------------------------------------------------------------------------------

    async def initialize(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``initialize``: record client capabilities, answer protocol version 1."""
        self.remember_initialize(params)
        return initialize_result(params, image=self.config.accepts_images)

    async def authenticate(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``authenticate {methodId}``: ``{}`` when the configured model has a usable key (or needs
        none) — e.g. after ``agent-server login`` ran in a terminal; ``-32000`` with what to do
        when it has none; ``-32602`` for a method we did not advertise."""
        p: m.AuthenticateParams = _parse(m.AuthenticateParams, params)
        if p.methodId != LOGIN_METHOD_ID:
            raise JsonRpcError(INVALID_PARAMS, f"unknown auth method {p.methodId!r}; the one method is "
                               f"{LOGIN_METHOD_ID!r}", {"methodId": p.methodId})
        with _wire_errors():
            await self.host.check_sign_in(self.client_runs_login)
        return {}

    async def logout(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``logout``: remove the key ``agent-server login`` stored for the configured profile
        (a key from the environment or the config file stays); ``{}``."""
        removed = await self.host.sign_out()
        log.info("logout: removed the stored sign-in of %s", ", ".join(removed) or "nothing")
        return {}

    async def new_session(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/new``: create the log and the session; returns ``{"sessionId", "modes",
        "configOptions"}``; the slash commands follow as ``available_commands_update``.
        ``-32000`` (auth required) when the configured model needs a key and has none; ``-32603``
        with ``data.code`` ``CONFIG_ERROR`` when the configuration cannot be read (file, line, column)."""
        p: m.NewSessionParams = _parse(m.NewSessionParams, params)
        system_prompt = _system_prompt(params)
        with _wire_errors():
            self.host.check_config()
            await self.host.check_sign_in(self.client_runs_login)
            session_id = await self.host.create(p.cwd, p.additionalDirectories,
                                                [s.get("name") for s in p.mcpServers], system_prompt=system_prompt)
        self.host.prepare_mcp(session_id, p.mcpServers)
        ctx.after_response(self._after_new_session(session_id))
        return {"sessionId": session_id, **self.host.state(session_id)}

    def _after_new_session(self, session_id: str) -> Any:
        """What follows a ``session/new`` answer: the slash commands, the MCP servers, the warm-up."""
        emit = self.emitter(session_id)

        async def after() -> None:
            await emit({"sessionUpdate": "available_commands_update", "availableCommands": commands.COMMANDS})
            self.host.start_mcp(session_id)
            await self.host.warm(session_id)
            m.PromptParams.model_rebuild()  # built lazily (defer_build): now, not on the first prompt
        return after

    def adopt_session(self, handed: Any) -> Any:
        """Make live a session the CLI's fast path created and answered (``fast_session.HandedSession``):
        its log over the handed descriptor (which holds the log's ``flock``: reopening the file in
        this process would conflict with it), registered as ``session/new`` registers one, the
        sandbox probe started. Returns what follows the answer (``_after_new_session``), to run
        before the requests read after it. A fast answer that differs from what this server would
        answer is logged as a warning (the configuration changed in between)."""
        from agent_server.session import EventLog, SessionEvent

        try:
            event_log = EventLog(handed.path, [SessionEvent.model_validate_json(handed.line)], handed.fd)
        except BaseException:
            os.close(handed.fd)
            raise
        self.host.adopt(handed.session_id, event_log, handed.roots)
        state = {"sessionId": handed.session_id, **self.host.state(handed.session_id)}
        if state != handed.answer:
            log.warning("session/new %s was answered before the configuration was loaded, and differently: "
                        "%s, not %s", handed.session_id, handed.answer, state)
        return self._after_new_session(handed.session_id)

    async def prompt(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/prompt``: run one turn; every update is written before this returns."""
        session_id = _plain_prompt(params)
        if session_id is None:  # anything but plain text blocks: the schema's models check it
            p: m.PromptParams = _parse(m.PromptParams, params)
            if not p.prompt:
                raise JsonRpcError(INVALID_PARAMS, "invalid params: the prompt is empty", {"errors": [
                    {"path": "prompt", "message": "at least one content block is required"}]})
            session_id = p.sessionId
        with _wire_errors():
            session = self.host.session(session_id)
        ctx.on_cancel = session.cancel  # $/cancel_request on a command prompt (/compact runs long)
        # a slash command runs here (/mode with an unknown mode: -32602); a turn's images are stored beside
        # the log, named in it (-32602 for one that cannot go)
        with _wire_errors():
            dispatched = await self.host.dispatch(session, params["prompt"])
        if dispatched.reply is not None:
            return dispatched.reply
        blocks = dispatched.blocks
        ticket = session.new_ticket()
        ticket.answered = answered = asyncio.get_running_loop().create_future()

        async def written() -> None:  # the next queued turn starts sending only now
            if not answered.done():
                answered.set_result(None)

        ctx.after_response(written)
        ctx.on_cancel = ticket.cancel
        if ctx.cancel_requested:  # $/cancel_request arrived before the handler ran
            ticket.cancel()
        outcome = await self.host.turn(session, blocks, ticket)
        if outcome.error is not None:
            message = _with_auth_hint(outcome.error, outcome.error.get("message", "turn failed"))
            # data.details repeats the human message (the TypeScript SDK's convention; Toad shows only it)
            raise JsonRpcError(INTERNAL_ERROR, message, {**outcome.error, "message": message, "details": message})
        reply: dict[str, Any] = {"stopReason": outcome.stop_reason}
        usage = self.host.prompt_usage(session_id)
        if usage is not None:
            reply["usage"] = usage  # ACP's unstable PromptResponse.usage: the session's totals
        return reply

    async def cancel(self, params: dict[str, Any]) -> None:
        """``session/cancel`` (notification): stop the session's running turn."""
        session_id = params.get("sessionId")
        if isinstance(session_id, str):
            self.host.cancel(session_id)

    async def cancel_request(self, params: dict[str, Any], ctx: RequestContext) -> None:
        """``session/cancel`` sent as a request (with an id): cancels as the notification does and
        answers ``null`` instead of ``-32601``."""
        await self.cancel(params)

    async def load(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/load``: replay the history as updates, then answer ``{"modes", "configOptions"}``
        (plus ``_meta.agentServer.recovered`` when a dead process's turn or queue was closed); the
        slash commands follow (``available_commands_update``).

        Errors: ``-32002`` unknown session; ``-32602`` bad params, a ``cwd`` other than the
        session's, a missing directory; ``-32603`` with ``data.code`` ``LOG_CORRUPT`` (``data.line``
        is the bad line) or ``LOG_VERSION`` when the log cannot be read — it is then left as is —
        and ``SESSION_BUSY`` (``data.lockedBy``: the holder's pid …) when another agent-server process
        has the session open — unless ``_meta.agentServer.takeOver`` is ``true``: the holder is then
        asked to release it and the load waits a few seconds for that (``continuity._take_over``).
        """
        p: m.LoadSessionParams = _parse(m.LoadSessionParams, params)
        system_prompt = _system_prompt(params)
        with _wire_errors():
            self.host.require_known(p.sessionId)  # a missing session is the first thing to report
            await self.host.check_sign_in(self.client_runs_login)
            # built lazily (defer_build): here, before the answer — after it, it held up a prompt sent at
            # once (bench/README.md)
            m.PromptParams.model_rebuild()
            meta = await self.host.load(p.sessionId, p.cwd, p.additionalDirectories, system_prompt=system_prompt,
                                        take_over=_take_over(params))
            result = dict(self.host.state(p.sessionId))
        self.host.prepare_mcp(p.sessionId, p.mcpServers)
        prepared = self.host.prepare_prompt(p.sessionId)  # the first prompt's client, before the answer
        # the slash commands, as after session/new, in the answer's write: a client that prompts as soon as
        # it reads the answer does not find the server still writing (and the client woken again)
        update = self._shown({"sessionUpdate": "available_commands_update", "availableCommands": commands.COMMANDS})
        if update is not None:
            ctx.notify_with_answer("session/update", {"sessionId": p.sessionId, "update": update})

        async def after() -> None:
            self.host.start_mcp(p.sessionId)
            if not prepared:  # as after session/new: the first prompt's client and schemas
                await self.host.warm(p.sessionId)
        ctx.after_response(after)
        if meta:
            result["_meta"] = meta
        return result

    async def resume(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/resume``: make the session live without replaying it; answers ``{"modes",
        "configOptions"}`` (plus ``_meta.agentServer.recovered``), then sends a ``tool_call_update``
        (``failed``) for each call a dead process left running and the slash commands. Errors as
        ``session/load``."""
        p: m.ResumeSessionParams = _parse(m.ResumeSessionParams, params)
        system_prompt = _system_prompt(params)
        with _wire_errors():
            self.host.require_known(p.sessionId)  # a missing session is the first thing to report
            await self.host.check_sign_in(self.client_runs_login)
            meta, closed = await self.host.resume(p.sessionId, p.cwd, p.additionalDirectories,
                                                  system_prompt=system_prompt, take_over=_take_over(params))
            result = dict(self.host.state(p.sessionId))
        if meta:
            result["_meta"] = meta
        self.host.prepare_mcp(p.sessionId, p.mcpServers)
        emit = self.host.emitter(p.sessionId)

        async def after() -> None:
            for update in closed:
                await emit(update)
            await emit({"sessionUpdate": "available_commands_update", "availableCommands": commands.COMMANDS})
            self.host.start_mcp(p.sessionId)

        ctx.after_response(after)
        return result

    async def close(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/close``: cancel its turn, stop its commands, free it (the log stays); ``{}``.
        Errors: ``-32002`` unknown session, ``-32602`` invalid id."""
        p: m.CloseSessionParams = _parse(m.CloseSessionParams, params)
        with _wire_errors():
            await self.host.close(p.sessionId)
        return {}

    async def fork(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/fork`` (ACP unstable): a new session whose history is the parent's up to a
        closed turn (the last, or ``_meta.agentServer.forkAtTurn``); answers ``{"sessionId",
        "modes", "configOptions"}``, then the slash commands. Errors: ``-32002`` unknown parent,
        ``-32602`` bad params, another ``cwd``, a turn that did not end."""
        p: m.ForkSessionParams = _parse(m.ForkSessionParams, params)
        meta = params.get("_meta")
        turn = (meta.get("agentServer") or {}).get("forkAtTurn") if isinstance(meta, dict) else None
        if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool)):
            raise JsonRpcError(INVALID_PARAMS, "_meta.agentServer.forkAtTurn must be a turn number",
                               {"forkAtTurn": turn})
        system_prompt = _system_prompt(params)
        with _wire_errors():
            await self.host.check_sign_in(self.client_runs_login)
            session_id = await self.host.fork(p.sessionId, p.cwd, p.additionalDirectories,
                                              [s.get("name") for s in p.mcpServers], turn, system_prompt=system_prompt)
        self.host.prepare_mcp(session_id, p.mcpServers)
        emit = self.host.emitter(session_id)

        async def after() -> None:
            await emit({"sessionUpdate": "available_commands_update", "availableCommands": commands.COMMANDS})
            self.host.start_mcp(session_id)

        ctx.after_response(after)
        return {"sessionId": session_id, **self.host.state(session_id)}

    async def list(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/list``: ``{"sessions": [SessionInfo], "nextCursor"?}``, newest first, a page
        at a time (``SessionHost.list``). A cursor the server did not make is ``-32602``."""
        p: m.ListSessionsParams = _parse(m.ListSessionsParams, params)
        with _wire_errors():
            sessions, cursor = self.host.list(p.cwd, p.cursor, defer_save=True)
        ctx.after_response(self.host.save_listing)  # the index file is written after the answer left
        return {"sessions": sessions, **({"nextCursor": cursor} if cursor else {})}

    async def delete(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/delete``: cancel and close it if live, remove its folder; ``{}``.

        Errors: ``-32002`` unknown session, ``-32602`` invalid id, ``-32603`` with ``data.code``
        ``SESSION_BUSY`` when another agent-server process has it open (nothing is removed).
        """
        p: m.DeleteSessionParams = _parse(m.DeleteSessionParams, params)
        with _wire_errors():
            await self.host.delete(p.sessionId)
        return {}

    async def set_mode(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/set_mode``: switch the mode; answers ``{}``, then announces the mode."""
        p: m.SetModeParams = _parse(m.SetModeParams, params)
        self._switch(p.sessionId, p.modeId, "session/set_mode", ctx)
        return {}

    async def set_config_option(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/set_config_option`` for ``mode``, ``model`` or one of the model's own options
        (``thought_level``, a switch: ``true``/``false`` with ``type: "boolean"``, or ``on``/``off``);
        answers ``{"configOptions"}``, then announces the change (``config_option_update``)."""
        p: m.SetConfigOptionParams = _parse(m.SetConfigOptionParams, params)
        with _wire_errors():
            options = self.host.state(p.sessionId)["configOptions"]  # unknown session first
        known = [o["id"] for o in options]
        if p.configId not in known:
            raise JsonRpcError(INVALID_PARAMS, f"unknown config option {p.configId!r}; known: {', '.join(known)}",
                               {"configId": p.configId})
        if p.configId in (MODE_CONFIG_ID, MODEL_CONFIG_ID) and (not isinstance(p.value, str) or p.type == "boolean"):
            raise JsonRpcError(INVALID_PARAMS, f"the {p.configId} option takes a value id (a string)",
                               {"configId": p.configId})
        if p.type == "boolean" and not isinstance(p.value, bool):
            raise JsonRpcError(INVALID_PARAMS, f"type boolean takes a boolean value, got {p.value!r}",
                               {"configId": p.configId})
        if p.configId == MODE_CONFIG_ID:
            self._switch(p.sessionId, p.value, "session/set_config_option", ctx)
            return {"configOptions": self.host.state(p.sessionId)["configOptions"]}
        with _wire_errors():
            if p.configId == MODEL_CONFIG_ID:
                changed = self.host.set_model(p.sessionId, p.value, "session/set_config_option")
            else:  # the model's own options: thought_level, its switches
                changed = self.host.set_option(p.sessionId, p.configId, p.value, "session/set_config_option")
        if changed:
            ctx.after_response(lambda: self.host.announce_config(p.sessionId))
        return {"configOptions": self.host.state(p.sessionId)["configOptions"]}

    def _switch(self, session_id: str, mode: str, by: str, ctx: RequestContext) -> None:
        with _wire_errors():
            changed = self.host.set_mode(session_id, mode, by)
        if changed:
            ctx.after_response(lambda: self.host.announce_mode(session_id))


def _with_auth_hint(error: dict[str, Any], message: str) -> str:
    """A provider's own 401/403 text ("Incorrect API key provided") says nothing of where the key
    goes: the message the user reads names it (the log keeps the provider's text as it came)."""
    if error.get("code") != "AUTH" or "agent-server login" in message:
        return message
    return (f"{message} — the model endpoint refused the API key (or none was sent). Set the key with "
            "`agent-server login` or the AGENT_SERVER_API_KEY variable (or the profile's own key "
            "variable), then try again.")
