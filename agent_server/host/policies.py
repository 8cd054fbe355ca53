"""Each session's policy: its mode, approvals, path policy and shell sandbox.

Role: ``SessionPolicies`` builds each session's ``SessionPolicy`` when the host opens it (the mode
restored from the log when loaded, the start mode logged otherwise), keeps them by session id,
switches modes (logged as ``mode/changed`` by ``ModeState``) and gives the state a front end shows
(``modes`` / ``configOptions``, ACP-shaped).

Must never: accept an unknown session or mode (``HostError`` ``not_found`` / ``invalid``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from agent_server.config.load import PolicySettings
from agent_server.host.errors import HostError, unknown_session
from agent_server.policy.approvals import Approver
from agent_server.policy.engine import SessionPolicy
from agent_server.policy.modes import ModeState, UnknownMode
from agent_server.policy.sandbox.confiner import known_status, probe_status, session_tmpdir, start_probe, stop_probes
from agent_server.session import EventLog
from agent_server.config.views import session_state


class SessionPolicies:
    """The policies of one host's sessions; ``settings`` returns the current ``[policy]`` config."""

    def __init__(self, settings: Callable[[], PolicySettings]) -> None:
        self._settings = settings
        self.policies: dict[str, SessionPolicy] = {}

    async def prepare(self) -> None:
        """Probe the sandbox before a session opens, so its status is logged at its start."""
        await probe_status(self._settings())

    def start_probe(self) -> None:
        """Start the sandbox probe in the background (or join the running one) without waiting: a
        session opened before it ends gets its status from ``ensure_status`` before its first turn."""
        start_probe(self._settings())

    def status_known(self, session_id: str) -> bool:
        """Whether ``ensure_status`` of ``session_id`` has nothing to wait for."""
        policy = self.policies.get(session_id)
        return policy is None or policy.status is not None

    async def ensure_status(self, session_id: str) -> None:
        """Wait for the sandbox status of a live session (probed, never assumed) and log it, if not
        known yet: before a turn renders its first request or runs a tool."""
        policy = self.policies.get(session_id)
        if policy is not None and policy.status is None:
            await policy.ensure_status()

    async def aclose(self) -> None:
        """Stop a probe still running (at shutdown)."""
        await stop_probes()

    def create(self, session_id: str, log: EventLog, roots: Sequence[str], emit: Any,
               approver: Approver) -> SessionPolicy:
        """The policy of a session being opened (its mode restored from the log when loaded)."""
        settings = self._settings()
        modes = ModeState.from_log(log, settings.default_mode)
        if not log.count("mode/changed"):  # the start mode is on record too
            log.append("mode/changed", {"from": None, "to": modes.current, "by": "default_mode"})
        policy = SessionPolicy(log, [Path(r) for r in roots], settings, modes, approver, emit,
                               session_tmpdir(log.path.parent), status=known_status(settings))
        self.policies[session_id] = policy
        return policy

    def get(self, session_id: str) -> SessionPolicy:
        """The policy of a live session; ``HostError`` ``not_found`` otherwise."""
        policy = self.policies.get(session_id)
        if policy is None:
            raise unknown_session(session_id)
        return policy

    def state(self, session_id: str) -> dict[str, Any]:
        """``{"modes", "configOptions"}`` for a ``session/new`` (or ``session/load``) response."""
        return session_state(self.get(session_id).modes.current, None)

    def switch(self, session_id: str, mode: str, by: str) -> bool:
        """Set the mode (``by``: who asked, logged); whether it changed. ``HostError`` ``invalid``
        for an unknown mode."""
        policy = self.get(session_id)
        try:
            return policy.modes.set(mode, by)
        except UnknownMode as exc:
            raise HostError("invalid", str(exc), {"modeId": mode}) from None
