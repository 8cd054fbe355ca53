"""MCP servers a client passes in ``session/new``: their tools, offered to the model.

Role: ``specs_from_acp`` reads ACP ``mcpServers`` entries (stdio and http); ``expose_names`` maps
each server tool to a model-facing name ``mcp__<server>__<tool>`` (sanitised, collisions resolved);
``McpConnection`` runs one server with the official ``mcp`` SDK (imported only here, only when a
session has servers) and calls its tools with a timeout and cancel; ``render_result`` turns a
``CallToolResult`` into the text the model sees.

Must never: be imported on the ACP start-up path, or trust a server's annotations by itself (the
policy decides with the user's config).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "McpServerSpec": "spec",
    "McpSpecError": "spec",
    "expose_names": "names",
    "render_result": "results",
    "specs_from_acp": "spec",
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
