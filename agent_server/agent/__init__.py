"""The agent: turns, steps, attempts (DESIGN.md §5).

Role: run a turn as a sequence of steps over the session log, end it by exactly one exit, and
rebuild every request body from the log.

Must never: call a tool except through the tools layer, or keep a second message list.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AgentSession": "session",
    "RequestHeader": "step",
    "RequestRebuildError": "request",
    "RetryPolicy": "step",
    "TurnExit": "exits",
    "TurnFailed": "exits",
    "TurnOutcome": "session",
    "attempt_steps": "request",
    "request_body": "request",
    "step_starts": "request",
}
"""Each name this package offers → the module that defines it, imported on first use (PEP 562)."""

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
