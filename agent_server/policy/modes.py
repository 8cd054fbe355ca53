"""Session modes: ``read-only``, ``workspace-write`` (default), ``danger-full-access``.

Role: ``ModeState`` holds a session's current mode, logs every change as ``mode/changed``
(``{"from", "to", "by"}``) and renders the ACP views of it: the ``modes`` object
(``SessionModeState``) and the ``mode`` config option (``SessionConfigOption``, a select).
``ModeState.from_events`` restores the mode of a stored session from its log.

Must never: change the mode without logging it, or accept a mode id that is not one of the three.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from agent_server.session import EventLog

READ_ONLY, WORKSPACE_WRITE, DANGER_FULL_ACCESS = "read-only", "workspace-write", "danger-full-access"
DEFAULT_MODE = WORKSPACE_WRITE
MODE_CONFIG_ID = "mode"


@dataclass(frozen=True)
class ModeInfo:
    """A mode as shown to the user (``name``, ``description``) and to the model (``model_text``)."""

    id: str
    name: str
    description: str
    model_text: str


MODES: dict[str, ModeInfo] = {
    READ_ONLY: ModeInfo(
        READ_ONLY, "Read-only",
        "Read and search anywhere; nothing is written. The shell runs confined read-only.",
        "read-only: you may read and search, but write and edit are refused and the shell is confined "
        "read-only (it can write only in its temp folder). Explain what you would change instead."),
    WORKSPACE_WRITE: ModeInfo(
        WORKSPACE_WRITE, "Workspace write",
        "Edit files inside the workspace roots; the shell is confined to them by the OS sandbox.",
        "workspace-write: you may write and edit files inside the workspace roots only (writes outside "
        "are refused). The shell can write only inside the roots, its temp folder ($TMPDIR) and "
        "/dev/null; `.git` is read-only."),
    DANGER_FULL_ACCESS: ModeInfo(
        DANGER_FULL_ACCESS, "Full access (danger)",
        "No sandbox: writes anywhere and an unconfined shell. Destructive commands still ask.",
        "danger-full-access: you may write anywhere and the shell is not confined. Be careful: "
        "destructive commands and secret files still need the user's approval."),
}


class UnknownMode(ValueError):
    """A mode id that is not ``read-only``, ``workspace-write`` or ``danger-full-access``."""


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
        return {"currentModeId": self.current,
                "availableModes": [{"id": m.id, "name": m.name, "description": m.description} for m in MODES.values()]}

    def config_options_json(self) -> list[dict[str, Any]]:
        """ACP ``configOptions``: the ``mode`` select."""
        return [{
            "id": MODE_CONFIG_ID, "name": "Mode", "category": "mode", "type": "select",
            "description": "What the agent may change: read-only, the workspace, or everything.",
            "currentValue": self.current,
            "options": [{"value": m.id, "name": m.name, "description": m.description} for m in MODES.values()],
        }]
