"""The ACP surface: method handlers that turn JSON-RPC calls into session operations.

Role: ``AcpServer`` implements ``initialize``, ``session/new``, ``session/prompt`` and
``session/cancel`` (PROTOCOL.md), validates params, maps turn outcomes to stop reasons or to the
``-32603`` error with ``data: {code, message, retryable}``, and sends each session's updates as
``session/update`` notifications. ``session/load``, ``session/list`` and ``session/delete`` live
in ``lifecycle.py``, ``session/set_mode`` and ``session/set_config_option`` (and each session's
policy) in ``modes.py``; they are registered here.

Must never: hold conversation state outside the log (sessions are ``AgentSession``\\s over their
``EventLog``), or send a session's notification before the ``session/new`` response.
"""

from __future__ import annotations

import datetime
import logging
import os
import platform
from pathlib import Path
from urllib.parse import urlsplit
from typing import Any

from pydantic import ValidationError

from agent_server import __version__
from agent_server.agent import AgentSession, RequestHeader, TurnFailed
from agent_server.config import Config
from agent_server.prompt import PromptEnvironment, render_system_prompt
from agent_server.prompt.instructions import instruction_paths, read_instructions
from agent_server.server import acp_models as m
from agent_server.server import commands
from agent_server.server.editor_files import EditorCapabilities, EditorFiles
from agent_server.server.initialize import initialize_result
from agent_server.server.lifecycle import SessionLifecycle, session_title
from agent_server.server.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    RESOURCE_NOT_FOUND,
    Connection,
    JsonRpcError,
    RequestContext,
)
from agent_server.server.models_pool import ClientPool
from agent_server.server.modes import SessionPolicies
from agent_server.session import SessionStore
from agent_server.tools import BUILTIN_TOOLS, DiskFiles, ReadLedger, ToolContext, tool_schemas
from agent_server.tools.pipeline import ToolRunner

log = logging.getLogger("agent_server.server")


def _latest(log: Any, kind: str, default: dict[str, Any]) -> dict[str, Any]:
    """Data of the newest ``kind`` event of ``log`` (``default`` when there is none / no log)."""
    if log is None:
        return default
    return next((e.data for e in reversed(log.events) if e.type == kind), default)


def _parse(model: type[m._Open], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise JsonRpcError(INVALID_PARAMS, f"invalid params: {exc.error_count()} error(s)", m.describe_validation_error(exc)) from None


class AcpServer:
    """The agent side of one ACP connection.

    ``config``: resolved settings (``config_error``: why loading it failed, reported on prompts);
    ``store``: where session logs go. Call ``bind(connection)`` before serving.
    """

    def __init__(self, config: Config, store: SessionStore, *, config_error: str | None = None) -> None:
        self.config = config
        self.config_error = config_error
        self.store = store
        self.sessions: dict[str, AgentSession] = {}
        self.client_capabilities = m.ClientCapabilities()
        self.editor = EditorCapabilities()
        self.pool = ClientPool(config.agent.stream_idle_timeout)
        self.connection: Connection | None = None
        self.lifecycle = SessionLifecycle(self)
        self.policies = SessionPolicies(self)

    # -- wiring -------------------------------------------------------------------------------

    def request_handlers(self) -> dict[str, Any]:
        """Method name → request handler, for ``Connection(requests=...)``."""
        return {
            "initialize": self.initialize,
            "session/new": self.new_session,
            "session/prompt": self.prompt,
            **self.lifecycle.request_handlers(),  # session/load, session/list, session/delete
            **self.policies.request_handlers(),  # session/set_mode, session/set_config_option
        }

    def notification_handlers(self) -> dict[str, Any]:
        """Method name → notification handler."""
        return {"session/cancel": self.cancel}

    def bind(self, connection: Connection) -> None:
        """Attach the connection updates are sent on."""
        self.connection = connection

    def remember_initialize(self, params: dict[str, Any]) -> None:
        """Record the client's capabilities from ``initialize`` params (also used by the CLI's
        fast path, which answered ``initialize`` before this object existed)."""
        try:
            self.client_capabilities = m.InitializeParams.model_validate(params or {}).clientCapabilities
        except ValidationError:
            log.warning("initialize params did not validate; assuming no client capabilities")
            self.client_capabilities = m.ClientCapabilities()
        self.editor = EditorCapabilities.from_client(self.client_capabilities.model_dump(by_alias=True))

    async def aclose(self) -> None:
        """Cancel running and queued turns, close logs and HTTP clients."""
        sessions = list(self.sessions.values())
        for session in sessions:
            session.cancel()
        for session in sessions:
            await session.close()
        await self.pool.aclose()

    # -- methods ------------------------------------------------------------------------------

    async def initialize(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``initialize``: record client capabilities, answer protocol version 1."""
        self.remember_initialize(params)
        return initialize_result(params)

    async def new_session(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/new``: create the log and the session; returns ``{"sessionId", "modes",
        "configOptions"}``."""
        p: m.NewSessionParams = _parse(m.NewSessionParams, params)
        roots = [p.cwd, *p.additionalDirectories]
        missing = [r for r in roots if not Path(r).is_dir()]
        if missing:
            raise JsonRpcError(INVALID_PARAMS, f"not a directory: {missing[0]}", {"path": missing[0]})
        header = {
            "cwd": p.cwd,
            "additional_directories": p.additionalDirectories,
            "mcp_servers": [s.get("name") for s in p.mcpServers],
            "agent": {"name": "agent-server", "version": __version__},
        }
        await self.policies.prepare()
        session_id, event_log = self.store.create(header)
        self.open_session(session_id, event_log, roots)
        emit = self._emitter(session_id)
        ctx.after_response(lambda: emit({"sessionUpdate": "available_commands_update",
                                         "availableCommands": commands.COMMANDS}))
        return {"sessionId": session_id, **self.policies.state(session_id)}

    def open_session(self, session_id: str, event_log: Any, roots: list[str]) -> AgentSession:
        """Make the live ``AgentSession`` over an open log (new or loaded) and register it."""
        emit = self._emitter(session_id)
        files = self._files(session_id, emit)
        policy = self.policies.create(session_id, event_log, roots, emit)
        # plain ACP (fs/write_text_file, no proposals): the permission question is the user's only review
        policy.ask_edits = self.editor.write_text and not self.editor.apply_workspace_edit
        context = ToolContext(tuple(Path(r) for r in roots), files, ReadLedger(),
                              session_dir=event_log.path.parent, shell_launcher=policy.shell_launcher,
                              env=self._tool_env(),
                              is_secret=lambda p: policy.secrets.match(p, p.resolve()) is not None)
        # one result may fill at most a quarter of the model's context window
        budget = int(self.config.provider.context_window * self.config.agent.chars_per_token / 4)
        runner = ToolRunner(event_log, context, emit, {t.name: t for t in BUILTIN_TOOLS},
                            guards=[policy.guard], result_budget=budget)
        session = self.sessions[session_id] = AgentSession(
            session_id,
            event_log,
            self.config,
            header_factory=lambda: self._request_header(roots, policy, event_log),
            client_factory=self._client,
            emit=emit,
            runner=runner,
        )
        session.before_turn = lambda blocks: self._refresh_instructions(event_log, roots, blocks)
        return session

    async def prompt(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/prompt``: run one turn; every update is written before this returns."""
        p: m.PromptParams = _parse(m.PromptParams, params)
        if not p.prompt:
            raise JsonRpcError(INVALID_PARAMS, "invalid params: the prompt is empty",
                               {"errors": [{"path": "prompt", "message": "at least one content block is required"}]})
        session = self._session(p.sessionId)
        blocks = params["prompt"]
        command = commands.parse_command(blocks)
        if command is not None:
            ctx.on_cancel = session.cancel  # $/cancel_request on a command prompt (/compact runs long)
            reply = await self._command(session, *command)
            if reply is not None:
                return reply
            blocks = [{"type": "text", "text": commands.INIT_PROMPT}]
        ticket = session.new_ticket()
        ctx.on_cancel = ticket.cancel
        if ctx.cancel_requested:  # $/cancel_request arrived before the handler ran
            ticket.cancel()
        outcome = await session.prompt(blocks, ticket)
        if outcome.error is not None:
            raise JsonRpcError(INTERNAL_ERROR, outcome.error.get("message", "turn failed"), outcome.error)
        await self._announce_title(session)
        return {"stopReason": outcome.stop_reason}

    async def _command(self, session: AgentSession, name: str, argument: str) -> dict[str, Any] | None:
        """Run a slash command; returns the prompt's answer, or ``None`` when it becomes a turn."""
        emit = self._emitter(session.id)
        if name == "init":
            commands.log_command(session.log, name, argument, "turn")
            return None
        if name == "mode":
            policy = self.policies.policies[session.id]
            try:
                changed = policy.modes.set(argument, "/mode") if argument else False
                text = (f"Mode: {policy.modes.current}." if changed or not argument
                        else f"The mode already is {argument}.")
            except Exception as exc:  # UnknownMode
                text = str(exc)
            if argument and policy.modes.current == argument:
                await emit({"sessionUpdate": "current_mode_update", "currentModeId": policy.modes.current})
                await emit({"sessionUpdate": "config_option_update", "configOptions": policy.modes.config_options_json()})
        elif name == "model":
            text = commands.change_model(session.log, argument, self.config.provider.model)
        elif name == "compact":
            text = await session.compact_now()
            if text is None:
                commands.log_command(session.log, name, argument, "cancelled")
                return {"stopReason": "cancelled"}
        else:
            text = commands.usage_report(session.log.events, self.config.provider.context_window)
        commands.log_command(session.log, name, argument, text)
        await emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
        return {"stopReason": "end_turn"}

    async def _announce_title(self, session: AgentSession) -> None:
        """After the first turn, name the session after its first prompt (``session_info_update``)."""
        events = session.log.events
        if sum(1 for e in events if e.type == "turn/end") != 1:
            return  # the title is derived from the log (as session/list does), announced once
        title = session_title(next((e for e in events if e.type == "user"), None))
        if title is None:
            return
        updated = datetime.datetime.fromtimestamp(events[-1].time, datetime.timezone.utc).isoformat()
        await self._emitter(session.id)({"sessionUpdate": "session_info_update", "title": title, "updatedAt": updated})

    def _refresh_instructions(self, log: Any, roots: list[str], blocks: list[dict[str, Any]]) -> None:
        """Log the AGENTS.md files that apply when they are first seen or have changed."""
        focus = [Path(urlsplit(b["resource"]["uri"]).path) for b in blocks
                 if b.get("type") == "resource" and str(b["resource"].get("uri", "")).startswith("file:")]
        records = read_instructions(instruction_paths([Path(r) for r in roots], focus))
        last = next((e for e in reversed(log.events) if e.type == "project/instructions"), None)
        if (last.data["files"] if last else []) != records:
            log.append("project/instructions", {"files": records})

    async def cancel(self, params: dict[str, Any]) -> None:
        """``session/cancel`` (notification): stop the session's running turn."""
        session_id = params.get("sessionId")
        if isinstance(session_id, str) and session_id in self.sessions:
            self.sessions[session_id].cancel()

    # -- helpers ------------------------------------------------------------------------------

    def _files(self, session_id: str, emit: Any) -> Any:
        """The session's workspace-file seam: through the editor where the client allows it
        (PROTOCOL.md), else the disk."""
        caps = self.editor
        if self.connection is None or not (caps.read_text or caps.write_text or caps.apply_workspace_edit):
            return DiskFiles()
        return EditorFiles(self.connection, session_id, caps, emit=emit)

    def _tool_env(self) -> dict[str, str]:
        """The environment tools (the shell) get: ours minus agent-server's own settings and
        anything holding the model's API key — a command must never be able to print the key."""
        key = self.config.provider.api_key
        drop = {self.config.provider.api_key_env}
        return {k: v for k, v in os.environ.items()
                if not k.startswith("AGENT_SERVER_") and k not in drop and not (key and key in v)}

    def _session(self, session_id: str) -> AgentSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise JsonRpcError(RESOURCE_NOT_FOUND, f"unknown session: {session_id}", {"sessionId": session_id})
        return session

    def _emitter(self, session_id: str):
        async def emit(update: dict[str, Any]) -> None:
            if self.connection is not None and not self.connection.closed.is_set():
                await self.connection.notify("session/update", {"sessionId": session_id, "update": update})

        return emit

    def _request_header(self, roots: list[str], policy: Any = None, log: Any = None) -> RequestHeader:
        env = PromptEnvironment(
            roots=tuple(roots),
            os_name=f"{platform.system()} {platform.release()}",
            shell=os.environ.get("SHELL", "/bin/sh"),
            date=datetime.date.today().isoformat(),
            tool_names=tuple(t.name for t in BUILTIN_TOOLS),
            mode=policy.modes.current if policy is not None else None,
            sandboxed=policy.sandboxed if policy is not None else None,
            instructions=tuple(_latest(log, "project/instructions", {"files": []})["files"]),
        )
        provider = self.config.provider
        model = commands.current_model(log.events, provider.model) if log is not None else provider.model
        return RequestHeader(
            system=render_system_prompt(env),
            model=model or "",
            params=dict(self.config.agent.params),
            tools=tool_schemas(BUILTIN_TOOLS),
            reasoning_content=provider.reasoning_content,
        )

    def _client(self):
        if self.config_error:
            raise TurnFailed({"code": "BAD_REQUEST", "message": f"configuration error: {self.config_error}", "retryable": False})
        provider = self.config.provider
        if not provider.base_url:
            raise TurnFailed({"code": "BAD_REQUEST", "retryable": False, "message":
                              "no model endpoint configured: set AGENT_SERVER_BASE_URL (or a profile with "
                              "AGENT_SERVER_PROFILE / the config file), see the README"})
        if not provider.model:
            raise TurnFailed({"code": "BAD_REQUEST", "retryable": False, "message":
                              f"no model configured for profile {provider.profile!r}: set AGENT_SERVER_MODEL"})
        if provider.key_required and not provider.api_key:
            var = provider.api_key_env
            hint = f"set {var} or AGENT_SERVER_API_KEY" if var else "set AGENT_SERVER_API_KEY"
            raise TurnFailed({"code": "AUTH", "retryable": False,
                              "message": f"no API key for profile {provider.profile!r}: {hint}"})
        return self.pool.get(provider.base_url, provider.api_key)
