"""The session's model: the ``model`` config option (ACP category ``model``) and ``/model``.

Role: list the configured models (``Config.models``) as an ACP ``select`` config option, switch a
session to a listed model (logged as ``model/changed {from, to, by}``: the next ``request/header``
carries it, so replay rebuilds every request with the model it went to), and say how to add a
model when the one asked for is not listed. ``session/set_model`` was removed from ACP: the config
option is the only wire for this.

Must never: switch to a model that is not listed, or change the model without an event saying so.
"""

from __future__ import annotations

from typing import Any, Sequence

from agent_server.config import views as session_views
from agent_server.config.load import Config, default_config_path
from agent_server.host.commands import current_model
from agent_server.session import EventLog, SessionEvent
from agent_server.config.views import MODEL_CONFIG_ID  # noqa: F401


class UnknownModel(ValueError):
    """A model that is not listed in the configuration (the message says how to add it)."""


def model_option(config: Config, events: Sequence[SessionEvent]) -> dict[str, Any] | None:
    """The ACP ``SessionConfigOption`` for the session's model, or ``None`` when no model is
    configured. A model the log names but the configuration no longer lists is offered too (so the
    current value is always one of the options). Built by ``session_views.model_option``."""
    return session_views.model_option(model_choices(config), current_model(events, config.provider.model))


def model_choices(config: Config) -> list[tuple[str, str, str | None]]:
    """``(id, name, description)`` of each configured model, the default first."""
    return [(c.id, c.name, c.description) for c in config.models]


def switch_model(log: EventLog, config: Config, model: str, by: str) -> bool:
    """Switch the session of ``log`` to ``model`` (``by``: who asked, logged); whether it changed.
    Raises ``UnknownModel`` for a model that is not listed."""
    if config.model_choice(model) is None:
        raise UnknownModel(unknown_model_text(config, model))
    before = current_model(log.events, config.provider.model)
    if model == before:
        return False
    log.append("model/changed", {"from": before, "to": model, "by": by})
    return True


def unknown_model_text(config: Config, model: str) -> str:
    """Why ``model`` cannot be used and how to add it to the configuration."""
    where = config.source or str(default_config_path())
    listed = ", ".join(c.id for c in config.models)
    head = (f"Unknown model {model!r}. Models you can use: {listed}." if listed
            else f"Unknown model {model!r}: no model is configured.")
    return (f"{head} To add one, list it in the config file ({where}):\n\n"
            f"[[models]]\nid = \"{model}\"\nname = \"{model}\"  # optional: profile, context_window, price")


def model_command(log: EventLog, config: Config, argument: str) -> tuple[str, bool]:
    """``/model [id]``: the text for the user and whether the model changed."""
    current = current_model(log.events, config.provider.model)
    if not argument:
        listed = ", ".join(c.id for c in config.models) or "none"
        return f"The model is {current}. Models you can use: {listed}. Use /model <id> to switch.", False
    try:
        changed = switch_model(log, config, argument, "/model")
    except UnknownModel as exc:
        return str(exc), False
    if not changed:
        return f"The model already is {argument}.", False
    return f"Model switched from {current} to {argument} for this session.", True
