"""The builtin tools, in the order they are offered to the model.

Role: one instance of each builtin (``read``, ``write``, ``edit``, ``bash``, ``glob``, ``grep`` —
DESIGN.md §6 — and ``plan``, the task list of issue 7), lookup by name, and the list of schemas
for a model request.

Must never: offer the model a tool under a name or with arguments other than the contract's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .base import Tool
from .bash import BashTool
from .plan import PlanTool
from .read import ReadTool
from .search import GlobTool, GrepTool
from .write_edit import EditTool, WriteTool

#: The builtins, in contract order: read, write, edit, bash, glob, grep, then plan.
BUILTIN_TOOLS: tuple[Tool, ...] = (ReadTool(), WriteTool(), EditTool(), BashTool(), GlobTool(), GrepTool(),
                                   PlanTool())

_BY_NAME = {tool.name: tool for tool in BUILTIN_TOOLS}


def get_tool(name: str) -> Tool | None:
    """The builtin named ``name``, or ``None`` (an unknown name from the model)."""
    return _BY_NAME.get(name)


def tool_schemas(tools: Iterable[Tool] = BUILTIN_TOOLS) -> list[dict[str, Any]]:
    """The OpenAI ``tools`` list for ``tools`` (default: all builtins, in order)."""
    return [tool.schema() for tool in tools]
