"""Tools: the builtin tools and the contracts around them.

Role: the tool definition contract (``Tool``, ``ToolResult``, ``ToolContext``, ``validate_args``),
the workspace-file seam (``WorkspaceFiles``, ``DiskFiles``, ``ReadLedger``), byte-faithful text
helpers, result bounding (``trim_for_model``, ``spill``) and the six builtins (``BUILTIN_TOOLS``).
``pipeline.py`` is the layer's top: it runs calls through prepare → guards (``policy``) →
dispatch → complete, batches them and commits results to the session log.

Must never: let a tool failure escape as an exception. The builtin tool modules import nothing of
``agent_server`` outside this package; only ``pipeline.py`` reaches ``policy`` (its ``Guard``)
and ``session``, and ``repeats.py`` ``session`` (DESIGN.md §2: tools → {batch, policy} → builtin
tools; every layer → session).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BUILTIN_TOOLS": "registry",
    "BashTool": "bash",
    "DiskFiles": "files",
    "EditTool": "write_edit",
    "FileSnapshot": "files",
    "FileTooLargeError": "files",
    "GlobTool": "search",
    "GrepTool": "search",
    "NotTextError": "text",
    "ReadLedger": "files",
    "ReadTool": "read",
    "SPILL_THRESHOLD": "output",
    "TextView": "text",
    "Tool": "base",
    "ToolArgs": "base",
    "ToolContext": "base",
    "ToolResult": "base",
    "WorkspaceFiles": "files",
    "WriteOutcome": "files",
    "WriteTool": "write_edit",
    "clean_schema": "base",
    "decode_text": "text",
    "display_path": "base",
    "encode_text": "text",
    "get_tool": "registry",
    "ledger_key": "files",
    "resolve_path": "base",
    "sha256_hex": "files",
    "spill": "output",
    "tool_schemas": "registry",
    "trim_for_model": "output",
    "validate_args": "base",
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
