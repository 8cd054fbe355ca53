"""The bundled offline OpenAI-compatible endpoint.

Role: a real HTTP/1.1 server on 127.0.0.1 that answers ``POST /v1/chat/completions`` from a script
of recorded or built responses and records every request byte for byte. The test suite drives
agent-server through it, and the user-facing demo runs it (``python -m agent_server.offline``)
so agent-server can be tried without any model.

Must never: be mistaken for a model — it replays what it was given, and the demo says so — and
never import anything else of ``agent_server`` (it is a peer, talked to over HTTP only).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DEMO_SCRIPT": "_script",
    "KINDS": "_script",
    "OfflineEndpoint": "_server",
    "RecordedRequest": "_http",
    "Script": "_script",
    "ThreadedEndpoint": "_server",
    "load_script": "_script",
    "normalize_response": "_script",
    "text_stream": "_streams",
    "tool_call_stream": "_streams",
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
