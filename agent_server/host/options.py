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
PARAMS_EVENT = "params/changed"
"""The configured parameters (``[agent] params``, a model's switch parameters) differ from those the
session's last request was sent with: ``{from, to}`` (``params_change``)."""


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


def params_change(log: EventLog, params: dict[str, Any]) -> dict[str, Any] | None:
    """``{"from", "to"}`` when ``params`` — the parameters the configuration gives the session's next
    request (``request_params``) — differ from those its last ``request/header`` logged and nothing the
    session did since explains it (``model/changed``, ``config_option/changed``, an earlier
    ``params/changed``): the configuration was edited since (between runs, or read again after a
    sign-in). ``None`` otherwise, and before the session's first request."""
    header = log.latest("request/header")
    if header is None or header.data.get("params") == params:
        return None
    for kind in ("model/changed", EVENT, PARAMS_EVENT):
        later = log.latest(kind)
        if later is not None and later.seq > header.seq:
            return None
    return {"from": header.data.get("params"), "to": params}


def params_change_text(data: dict[str, Any]) -> str:
    """What the user is told of a ``params/changed`` (live, and again on ``session/load``)."""
    old = data.get("from") if isinstance(data.get("from"), dict) else {}
    new = data.get("to") if isinstance(data.get("to"), dict) else {}

    def shown(value: Any) -> str:
        import json

        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= 60 else text[:59] + "…"
    changes = [f"{k} {shown(old[k])} → {shown(new[k])}" if k in old and k in new else
               f"{k} {shown(new[k])} added" if k in new else f"{k} removed"
               for k in sorted({*old, *new}) if old.get(k, ...) != new.get(k, ...)]
    return ("\n\n[agent-server] The model parameters of the configuration changed since this session's last "
            f"request ({'; '.join(changes[:10])}{'; …' if len(changes) > 10 else ''}): its next request is sent "
            "with them, so a provider's prompt cache starts anew there.\n\n")
