"""Session modes on the wire: ``session/set_mode`` and ``session/set_config_option`` (``mode``).

Role: ``SessionPolicies`` builds each session's ``SessionPolicy`` (mode, approvals through the
editor, shell sandbox) for ``AcpServer.open_session``, keeps them by session id, and answers the
two methods: the mode changes (logged as ``mode/changed`` by ``ModeState``), the response is sent,
and then the editor is told with ``current_mode_update`` and ``config_option_update``.

Must never: accept an unknown session, config option or mode (``-32002`` / ``-32602``), or send
the updates before the response.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from pydantic import ValidationError

from agent_server.policy.engine import SessionPolicy
from agent_server.policy.modes import MODE_CONFIG_ID, ModeState, UnknownMode
from agent_server.policy.sandbox import known_status, probe_status, session_tmpdir
from agent_server.server import acp_models as m
from agent_server.server.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND, JsonRpcError, RequestContext
from agent_server.server.permissions import PermissionRequester
from agent_server.session import EventLog

if TYPE_CHECKING:
    from agent_server.server.acp import AcpServer


class SetModeParams(m._Open):
    """``session/set_mode`` params (schema ``SetSessionModeRequest``)."""

    sessionId: str
    modeId: str


class SetConfigOptionParams(m._Open):
    """``session/set_config_option`` params (schema ``SetSessionConfigOptionRequest``)."""

    sessionId: str
    configId: str
    value: Any = None
    type: str | None = None


class SessionPolicies:
    """The policies of one ``AcpServer``'s sessions and the mode methods."""

    def __init__(self, server: "AcpServer") -> None:
        self.server = server
        self.policies: dict[str, SessionPolicy] = {}

    def request_handlers(self) -> dict[str, Any]:
        """Method name → handler, merged into ``AcpServer.request_handlers()``."""
        return {"session/set_mode": self.set_mode, "session/set_config_option": self.set_config_option}

    async def prepare(self) -> None:
        """Probe the sandbox before a session opens, so its status is logged at its start."""
        await probe_status(self.server.config.policy)

    def create(self, session_id: str, log: EventLog, roots: Sequence[str], emit: Any) -> SessionPolicy:
        """The policy of a session being opened (its mode restored from the log when loaded)."""
        settings = self.server.config.policy
        modes = ModeState.from_events(log, log.events, settings.default_mode)
        if not any(e.type == "mode/changed" for e in log.events):  # the start mode is on record too
            log.append("mode/changed", {"from": None, "to": modes.current, "by": "default_mode"})
        requester = PermissionRequester(lambda: self.server.connection, session_id,
                                        lambda: self.server.config.policy.approval_timeout)
        policy = SessionPolicy(log, [Path(r) for r in roots], settings, modes, requester, emit,
                               session_tmpdir(log.path.parent), status=known_status(settings))
        self.policies[session_id] = policy
        return policy

    def state(self, session_id: str) -> dict[str, Any]:
        """``{"modes", "configOptions"}`` for a ``session/new`` (or ``session/load``) response."""
        modes = self._policy(session_id).modes
        return {"modes": modes.modes_json(), "configOptions": modes.config_options_json()}

    def _policy(self, session_id: str) -> SessionPolicy:
        policy = self.policies.get(session_id)
        if policy is None:
            raise JsonRpcError(RESOURCE_NOT_FOUND, f"unknown session: {session_id}", {"sessionId": session_id})
        return policy

    async def set_mode(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/set_mode``: switch the mode; answers ``{}``."""
        p = _parse(SetModeParams, params)
        self._switch(p.sessionId, p.modeId, "session/set_mode", ctx)
        return {}

    async def set_config_option(self, params: dict[str, Any], ctx: RequestContext) -> dict[str, Any]:
        """``session/set_config_option`` for ``mode``; answers ``{"configOptions"}``."""
        p = _parse(SetConfigOptionParams, params)
        policy = self._policy(p.sessionId)
        if p.configId != MODE_CONFIG_ID:
            raise JsonRpcError(INVALID_PARAMS, f"unknown config option {p.configId!r}; known: {MODE_CONFIG_ID}",
                               {"configId": p.configId})
        if not isinstance(p.value, str) or p.type == "boolean":
            raise JsonRpcError(INVALID_PARAMS, "the mode option takes a value id (a string)", {"configId": p.configId})
        self._switch(p.sessionId, p.value, "session/set_config_option", ctx)
        return {"configOptions": policy.modes.config_options_json()}

    def _switch(self, session_id: str, mode: str, by: str, ctx: RequestContext) -> None:
        policy = self._policy(session_id)
        try:
            changed = policy.modes.set(mode, by)
        except UnknownMode as exc:
            raise JsonRpcError(INVALID_PARAMS, str(exc), {"modeId": mode}) from None
        if changed:
            ctx.after_response(lambda: self._announce(session_id, policy))

    async def _announce(self, session_id: str, policy: SessionPolicy) -> None:
        emit = self.server._emitter(session_id)
        await emit({"sessionUpdate": "current_mode_update", "currentModeId": policy.modes.current})
        await emit({"sessionUpdate": "config_option_update", "configOptions": policy.modes.config_options_json()})


def _parse(model: type[m._Open], params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise JsonRpcError(INVALID_PARAMS, f"invalid params: {exc.error_count()} error(s)",
                           m.describe_validation_error(exc)) from None
