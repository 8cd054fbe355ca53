"""Tools: the builtin tools and the contracts around them.

Role: the tool definition contract (``Tool``, ``ToolResult``, ``ToolContext``, ``validate_args``),
the workspace-file seam (``WorkspaceFiles``, ``DiskFiles``, ``ReadLedger``), byte-faithful text
helpers, result bounding (``trim_for_model``, ``spill``) and the six builtins (``BUILTIN_TOOLS``).
``pipeline.py`` is the layer's top: it runs calls through prepare → guards (``policy``) →
dispatch → complete, batches them and commits results to the session log.

Must never: let a tool failure escape as an exception. The builtin tool modules import nothing of
``agent_server`` outside this package; only ``pipeline.py`` reaches ``policy`` and ``session``
(DESIGN.md §2: tools → {batch, policy} → builtin tools; every layer → session).
"""

from .base import (
    Tool,
    ToolArgs,
    ToolContext,
    ToolResult,
    clean_schema,
    display_path,
    resolve_path,
    validate_args,
)
from .bash import BashTool
from .files import (
    DiskFiles,
    FileSnapshot,
    FileTooLargeError,
    ReadLedger,
    WorkspaceFiles,
    WriteOutcome,
    ledger_key,
    sha256_hex,
)
from .output import SPILL_THRESHOLD, spill, trim_for_model
from .read import ReadTool
from .registry import BUILTIN_TOOLS, get_tool, tool_schemas
from .search import GlobTool, GrepTool
from .text import NotTextError, TextView, decode_text, encode_text
from .write_edit import EditTool, WriteTool

__all__ = [
    "BUILTIN_TOOLS",
    "SPILL_THRESHOLD",
    "BashTool",
    "DiskFiles",
    "EditTool",
    "FileSnapshot",
    "FileTooLargeError",
    "GlobTool",
    "GrepTool",
    "NotTextError",
    "ReadLedger",
    "ReadTool",
    "TextView",
    "Tool",
    "ToolArgs",
    "ToolContext",
    "ToolResult",
    "WorkspaceFiles",
    "WriteOutcome",
    "WriteTool",
    "clean_schema",
    "decode_text",
    "display_path",
    "encode_text",
    "get_tool",
    "ledger_key",
    "resolve_path",
    "sha256_hex",
    "spill",
    "tool_schemas",
    "trim_for_model",
    "validate_args",
]
