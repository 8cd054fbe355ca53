"""What a front end shows of a session's settings: its ``modes`` and ``configOptions`` (ACP-shaped).

Role: the one builder of these views, standard library only, shared by the session host
(``SessionHost.state``, ``ModeState``, ``host.models``, ``host.options``) and the CLI's pre-asyncio
``session/new`` fast path (``server/acp/fast_session.py``), so both answer the same bytes:
``MODES`` and ``modes_json``; the ``mode``, ``model`` and ``thought_level`` options and a model's
on/off switch (``type: "boolean"`` only for a client that takes it); ``session_state(mode, model,
extra)``, a ``session/new`` answer's ``{"modes", "configOptions"}``; ``session_header``, the data a
new session's ``session/header`` records (``SessionStore`` adds the id, ``EventLog`` the version);
``SLASH_COMMANDS``, the slash commands as ACP ``AvailableCommand``\\s (``available_commands_update``,
and ``initialize``'s ``_meta.agentServer.availableCommands`` before any session).

Must never: import anything but the standard library (the fast path runs before pydantic loads).
"""

from __future__ import annotations

from typing import Any, Sequence

from agent_server import __version__

READ_ONLY, WORKSPACE_WRITE, DANGER_FULL_ACCESS = "read-only", "workspace-write", "danger-full-access"
ACCEPT_EDITS = "accept-edits"
"""Workspace-write whose edits inside the roots are applied without review (still shown, undoable)."""
DEFAULT_MODE = WORKSPACE_WRITE
MODE_CONFIG_ID = "mode"
MODEL_CONFIG_ID = "model"
"""The ``configId`` of the model option."""
THOUGHT_LEVEL_CONFIG_ID = "thought_level"
"""The ``configId`` of the reasoning-effort option (category ``thought_level``)."""
DEFAULT_LEVEL = "default"
"""The ``thought_level`` value that sends no reasoning effort (the provider's own default)."""


class ModeInfo:
    """A mode as shown to the user (``name``, ``description``) and to the model (``model_text``).
    (A plain class: ``dataclasses`` is not imported on the fast path; bench/README.md.)"""

    __slots__ = ("id", "name", "description", "model_text")

    def __init__(self, id: str, name: str, description: str, model_text: str) -> None:
        self.id, self.name, self.description, self.model_text = id, name, description, model_text

    def __repr__(self) -> str:
        return f"ModeInfo({self.id!r})"


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
    ACCEPT_EDITS: ModeInfo(
        ACCEPT_EDITS, "Accept edits",
        "As workspace write, but the agent's edits inside the workspace are applied at once, without "
        "review: each is still shown with its diff, and /undo takes it back. Shell commands, MCP tools and "
        "writes outside the workspace are treated as in workspace write.",
        "accept-edits: you may write and edit files inside the workspace roots only (writes outside are "
        "refused); your edits are applied at once, without the user's review (the user can undo them). "
        "The shell is confined as in workspace-write."),
    DANGER_FULL_ACCESS: ModeInfo(
        DANGER_FULL_ACCESS, "Full access (danger)",
        "No sandbox: writes anywhere and an unconfined shell (what a command starts, setsid daemons "
        "included, ends with it). Destructive commands still ask.",
        "danger-full-access: you may write anywhere and the shell is not confined. Be careful: "
        "destructive commands and secret files still need the user's approval."),
}


def modes_json(current: str) -> dict[str, Any]:
    """ACP ``SessionModeState``: ``{"currentModeId", "availableModes": [{"id", "name", "description"}]}``."""
    return {"currentModeId": current,
            "availableModes": [{"id": m.id, "name": m.name, "description": m.description} for m in MODES.values()]}


def mode_option(current: str) -> dict[str, Any]:
    """The ``mode`` ``SessionConfigOption``: a select of the four modes."""
    return {
        "id": MODE_CONFIG_ID, "name": "Mode", "category": "mode", "type": "select",
        "description": "What the agent may change: read-only, the workspace (edits reviewed, or applied at once), or "
                       "everything.",
        "currentValue": current,
        "options": [{"value": m.id, "name": m.name, "description": m.description} for m in MODES.values()],
    }


def model_option(choices: Sequence[tuple[str, str, str | None]], current: str | None) -> dict[str, Any] | None:
    """The ``model`` ``SessionConfigOption`` (category ``model``) over ``choices`` — ``(id, name,
    description)`` of each configured model, the default first — with ``current`` selected (the
    first choice when ``None``); ``None`` when no model is configured. A ``current`` that is not
    listed (the configuration no longer has it) is offered too, so the value is always an option."""
    if not choices:
        return None
    current = current or choices[0][0]
    options = [{"value": id, "name": name, **({"description": description} if description else {})}
               for id, name, description in choices]
    if all(id != current for id, _, _ in choices):
        options.append({"value": current, "name": current, "description": "Not in the configuration any more"})
    return {"id": MODEL_CONFIG_ID, "name": "Model", "category": "model", "type": "select",
            "description": "The model this session's requests go to.", "currentValue": current,
            "options": options}


def thought_level_option(levels: Sequence[str], current: str | None) -> dict[str, Any] | None:
    """The ``thought_level`` option (category ``thought_level``) of a model with reasoning-effort
    ``levels``: ``default`` first, then each level; ``None`` when it has none."""
    if not levels:
        return None
    options = [{"value": DEFAULT_LEVEL, "name": "Default",
                "description": "The provider's own default: no reasoning effort is sent."}]
    options += [{"value": level, "name": level[:1].upper() + level[1:]} for level in levels]
    return {"id": THOUGHT_LEVEL_CONFIG_ID, "name": "Thought level", "category": THOUGHT_LEVEL_CONFIG_ID,
            "type": "select", "description": "How much the model reasons before it answers (its reasoning effort).",
            "currentValue": current if current in levels else DEFAULT_LEVEL, "options": options}


def switch_option(option_id: str, name: str | None, description: str | None, value: bool,
                  boolean: bool) -> dict[str, Any]:
    """A model's on/off option (category ``model_config``): ``type: "boolean"`` for a client that
    advertised ``session.configOptions.boolean``, else a select of ``on`` and ``off``."""
    option: dict[str, Any] = {"id": option_id, "name": name or option_id, "category": "model_config"}
    if description:
        option["description"] = description
    if boolean:
        return {**option, "type": "boolean", "currentValue": value}
    return {**option, "type": "select", "currentValue": "on" if value else "off",
            "options": [{"value": "on", "name": "On"}, {"value": "off", "name": "Off"}]}


def session_state(mode: str, model: dict[str, Any] | None, extra: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """``{"modes", "configOptions"}``: the mode views for ``mode``, then the ``model`` option when
    there is one (``model_option``), then the model's own options (``extra``)."""
    return {"modes": modes_json(mode), "configOptions": [mode_option(mode), *([model] if model else []), *extra]}


SLASH_COMMANDS: list[dict[str, Any]] = [
    {"name": "mode", "description": "Switch this session's mode",
     "input": {"hint": "read-only | workspace-write | accept-edits | danger-full-access"}},
    {"name": "model", "description": "Use another model for this session", "input": {"hint": "model id"}},
    {"name": "usage", "description": "Show this session's token usage"},
    {"name": "init", "description": "Write a starter AGENTS.md for this project (as an edit proposal)"},
    {"name": "compact", "description": "Summarise the older history into one checkpoint to free context"},
    {"name": "undo", "description": "Take back the files the last agent turn changed (asks before replacing your edits)"},
    {"name": "redo", "description": "Re-apply what the last /undo took back"},
    {"name": "checkpoints", "description": "List the turns that changed files, newest first"},
]
"""ACP ``AvailableCommand``\\s, in the order they are offered (``host.commands`` runs them)."""


def session_header(cwd: str, additional_directories: Sequence[str], mcp_servers: Sequence[str | None]) -> dict[str, Any]:
    """The ``session/header`` data of a new session (before its id and format version): its roots,
    the names of its MCP servers, and which agent wrote the log."""
    return {"cwd": cwd, "additional_directories": list(additional_directories), "mcp_servers": list(mcp_servers),
            "agent": {"name": "agent-server", "version": __version__}}
