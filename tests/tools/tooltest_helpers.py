"""Helpers shared by the builtin-tool tests (imported as ``tooltest_helpers``; ``conftest.py``
puts this folder on ``sys.path``)."""

from __future__ import annotations

import json
from typing import Any

from support.paths import FILES_DIR

from agent_server.tools import ToolContext, ToolResult, get_tool, validate_args


FIXTURES = FILES_DIR
CRLF = "crlf__cpython-3.11.7__Lib_venv_scripts_common_Activate.ps1"
KATEX = "minified-single-line__katex-0.16.22__dist_katex.min.js"
NO_NL = "no-trailing-newline__antlr4-python3-runtime-4.13.2__antlr4_error_ErrorStrategy.py"
BOM_PY = "utf8bom__cpython-3.10.13__Lib_test_test_importlib_test_util.py"
FIXTURE_NAMES = [CRLF, KATEX, NO_NL, BOM_PY]


async def call(ctx: ToolContext, name: str, **arguments: Any) -> ToolResult:
    """Validate ``arguments`` (as the model's JSON) for tool ``name`` and run it."""
    tool = get_tool(name)
    assert tool is not None
    args = validate_args(tool, json.dumps(arguments))
    assert not isinstance(args, ToolResult), args.text
    return await tool.run(args, ctx)


def body_lines(text: str) -> list[str]:
    """The file lines of a ``read`` result (numbered rows only, prefix removed)."""
    out = []
    for row in text.split("\n"):
        number, tab, line = row.partition("\t")
        if tab and number.strip().isdigit():
            out.append(line)
    return out
