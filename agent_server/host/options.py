"""A model's own config options: its reasoning effort (``thought_level``) and its on/off switches.

Role: the session's values of these options live in the log — ``config_option/changed {id, from,
to, by, values}``, ``values`` holding every option's value after the change, so the newest event
alone says them all (no walk of a long log). ``options_view`` shows the options the session's
current model has (``config.views``); ``request_params`` turns the values into the request body's
parameters (the level under the model's reasoning-effort field, each switch's ``on``/``off``
parameters), which the ``request/header`` logs, so every request replays byte for byte;
``set_option`` checks and logs a change.

Must never: change a value without an event saying so, or send a parameter for a level or switch
the session's current model does not have.
"""

from __future__ import annotations

from typing import Any

from agent_server.config.load import ProviderSettings, Switch
from agent_server.config.views import DEFAULT_LEVEL, THOUGHT_LEVEL_CONFIG_ID, switch_option, thought_level_option
from agent_server.session import EventLog

EVENT = "config_option/changed"


class OptionError(ValueError):
    """An option the session's model does not have, or a value it does not take (the message says which)."""


def option_values(log: EventLog) -> dict[str, Any]:
    """The values set in the session of ``log`` by option id (none set: ``{}``)."""
    last = log.latest(EVENT)
    values = last.data.get("values") if last is not None else None
    return dict(values) if isinstance(values, dict) else {}


def _switch_on(switch: Switch, value: Any) -> bool:
    return value if isinstance(value, bool) else switch.default


def options_view(provider: ProviderSettings, values: dict[str, Any], boolean: bool) -> list[dict[str, Any]]:
    """The ACP config options of the model ``provider`` serves, at ``values``; ``boolean``: the
    client takes ``type: "boolean"`` options."""
    out = []
    level = thought_level_option(provider.reasoning_effort, values.get(THOUGHT_LEVEL_CONFIG_ID))
    if level is not None:
        out.append(level)
    for option_id, switch in provider.switches.items():
        out.append(switch_option(option_id, switch.name, switch.description,
                                 _switch_on(switch, values.get(option_id)), boolean))
    return out


def request_params(base: dict[str, Any], provider: ProviderSettings, values: dict[str, Any]) -> dict[str, Any]:
    """``base`` (``[agent] params``) with the options' parameters: the level (unless ``default``)
    under ``provider.reasoning_effort_param``, then each switch's ``on`` or ``off`` parameters."""
    params = dict(base)
    level = values.get(THOUGHT_LEVEL_CONFIG_ID)
    if level in provider.reasoning_effort:
        params[provider.reasoning_effort_param] = level
    for option_id, switch in provider.switches.items():
        params.update(switch.on if _switch_on(switch, values.get(option_id)) else switch.off)
    return params


def set_option(log: EventLog, provider: ProviderSettings, option_id: str, value: Any, by: str) -> bool:
    """Set ``option_id`` to ``value`` for the session of ``log`` (its model: ``provider``), logged
    with ``by``; whether it changed. A switch takes ``true``/``false`` or ``"on"``/``"off"``; the
    ``thought_level`` one of its values. Raises ``OptionError``."""
    values = option_values(log)
    if option_id == THOUGHT_LEVEL_CONFIG_ID and provider.reasoning_effort:
        allowed = (DEFAULT_LEVEL, *provider.reasoning_effort)
        if value not in allowed or not isinstance(value, str):
            raise OptionError(f"thought_level takes one of {', '.join(allowed)}; got {value!r}")
        before = values.get(option_id) if values.get(option_id) in allowed else DEFAULT_LEVEL
        new: Any = value
    elif option_id in provider.switches:
        if isinstance(value, bool):
            new = value
        elif value in ("on", "off"):
            new = value == "on"
        else:
            raise OptionError(f"the {option_id} option takes true or false (or \"on\" / \"off\"); got {value!r}")
        before = _switch_on(provider.switches[option_id], values.get(option_id))
    else:
        raise OptionError(f"the model {provider.model} has no {option_id!r} option")
    if new == before:
        return False
    values[option_id] = new
    log.append(EVENT, {"id": option_id, "from": before, "to": new, "by": by, "values": values})
    return True
