"""Session modes: ``read-only``, ``workspace-write`` (default), ``accept-edits``, ``danger-full-access``.

Role: ``ModeState`` holds a session's current mode, logs every change as ``mode/changed``
(``{"from", "to", "by"}``) and renders the ACP views of it: the ``modes`` object
(``SessionModeState``) and the ``mode`` config option (``SessionConfigOption``, a select).
``ModeState.from_log`` (``from_events``) restores the mode of a stored session from its log.

Must never: change the mode without logging it, or accept a mode id that is not one of the four.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

# the modes and their ACP views live in config/views.py (shared with the CLI's fast path)
from agent_server.config.views import (  # noqa: F401
    ACCEPT_EDITS,
    DANGER_FULL_ACCESS,
    DEFAULT_MODE,
    MODE_CONFIG_ID,
    MODES,
    READ_ONLY,
    WORKSPACE_WRITE,
    ModeInfo,
    mode_option,
    modes_json,
)

if TYPE_CHECKING:
    from agent_server.session import EventLog


class UnknownMode(ValueError):
    """A mode id that is not ``read-only``, ``workspace-write``, ``accept-edits`` or ``danger-full-access``."""


def check_mode(mode_id: Any) -> str:
    """``mode_id`` if it is a known mode; raises ``UnknownMode``."""
    if not isinstance(mode_id, str) or mode_id not in MODES:
        raise UnknownMode(f"unknown mode {mode_id!r}; known: {', '.join(MODES)}")
    return mode_id


class ModeState:
    """The current mode of one session. ``log``: where changes are logged; ``mode``: the start mode."""

    def __init__(self, log: EventLog, mode: str = DEFAULT_MODE) -> None:
        self.log = log
        self.current = check_mode(mode)

    @classmethod
    def from_events(cls, log: EventLog, events: Iterable[Any], default: str = DEFAULT_MODE) -> "ModeState":
        """The state after the last ``mode/changed`` in ``events`` (``default`` when none)."""
        mode = default
        for event in events:
            if event.type == "mode/changed" and event.data.get("to") in MODES:
                mode = event.data["to"]
        return cls(log, mode)

    @classmethod
    def from_log(cls, log: EventLog, default: str = DEFAULT_MODE) -> "ModeState":
        """``from_events(log, log.events, default)`` without a walk of the log when its newest
        ``mode/changed`` names a mode (``EventLog.latest``), as it nearly always does."""
        latest = log.latest("mode/changed")
        if latest is None:
            return cls(log, default)
        if latest.data.get("to") in MODES:
            return cls(log, latest.data["to"])
        return cls.from_events(log, log.events, default)

    def set(self, mode_id: Any, by: str) -> bool:
        """Switch to ``mode_id`` (logged as ``mode/changed`` with ``by``); ``False`` if it already
        was the mode. Raises ``UnknownMode``."""
        mode = check_mode(mode_id)
        if mode == self.current:
            return False
        self.log.append("mode/changed", {"from": self.current, "to": mode, "by": by})
        self.current = mode
        return True

    @property
    def info(self) -> ModeInfo:
        """The current mode's description."""
        return MODES[self.current]

    def modes_json(self) -> dict[str, Any]:
        """ACP ``SessionModeState``: ``{"currentModeId", "availableModes": [{"id", "name", "description"}]}``."""
        return modes_json(self.current)

    def config_options_json(self) -> list[dict[str, Any]]:
        """ACP ``configOptions``: the ``mode`` select."""
        return [mode_option(self.current)]
