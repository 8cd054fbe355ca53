"""The session host: sessions, their logs, lifecycle and policies, under every front end.

``cli → {server/acp, server/lsp} → host → agent → {llm, tools, prompt}`` (DESIGN.md §2). A front
end translates its protocol into ``SessionHost`` calls and the host's events (``session/update``
payloads through the front end's emitter) into its protocol; it owns nothing else.

Must never: import a front end (``agent_server.server``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Emit": "host",
    "Frontend": "host",
    "HostError": "errors",
    "SessionHost": "host",
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
