"""Issue 31 item 10: MCP tool names are stable within a session, and what is left out is shown.

A server that starts late took over a name the model already used: the names were recomputed in
spec order on every change, so ``x y``/``add`` and ``x_y``/``add`` (both ``mcp__x_y__add``) swapped
names when the first-listed server came up second. Entries that cannot run, and a tool a server
lists twice, were only logged.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from agent_server.tools.mcp import expose_names, specs_from_acp
from agent_server.tools.mcp.session import McpTools

SCRIPTED = Path(__file__).resolve().parent / "scripted_server.py"


class Log:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict]] = []

    def append(self, kind: str, data: dict) -> None:
        self.events.append((kind, data))


async def until(predicate, what: str) -> None:
    for _ in range(1200):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


def test_names_given_earlier_are_kept_and_never_reused():
    first = expose_names({"x_y": ["add"]})
    assert first == {"mcp__x_y__add": ("x_y", "add")}
    both = expose_names({"x y": ["add"], "x_y": ["add"]}, first)
    assert both["mcp__x_y__add"] == ("x_y", "add") and both["mcp__x_y__add_2"] == ("x y", "add")
    gone = expose_names({"x y": ["add"]}, {**first, **both})  # x_y is gone: its name stays reserved
    assert gone == {"mcp__x_y__add_2": ("x y", "add")}
    assert expose_names({"s": ["t", "t"]}) == {"mcp__s__t": ("s", "t")}


async def test_a_server_that_started_late_took_over_a_name_the_model_already_used(tmp_path):
    go = tmp_path / "go"
    late = {"name": "x y", "command": "sh",
            "args": ["-c", f'while [ ! -e "{go}" ]; do sleep 0.05; done; exec "{sys.executable}" "{SCRIPTED}" stdio']}
    early = {"name": "x_y", "command": sys.executable, "args": [str(SCRIPTED), "stdio"]}
    specs, _ = specs_from_acp([late, early])
    table: dict = {}

    async def emit(update: dict) -> None:
        pass

    servers = McpTools(specs, {"PATH": os.environ["PATH"]}, set(), table, Log(), emit)
    servers.start()
    try:
        await until(lambda: "mcp__x_y__add" in table, "x_y up")
        assert table["mcp__x_y__add"].mcp.server == "x_y"  # the model sees and uses this name now
        go.touch()
        await until(lambda: "mcp__x_y__add_2" in table, "x y up")
        assert table["mcp__x_y__add"].mcp.server == "x_y"
        assert table["mcp__x_y__add_2"].mcp.server == "x y"
    finally:
        await servers.close()


async def test_rejected_entries_and_a_tool_listed_twice_were_only_logged(tmp_path):
    twice = tmp_path / "twice.py"
    twice.write_text(
        "from mcp.server.mcpserver import MCPServer\n"
        "class Twice(MCPServer):\n"
        "    async def list_tools(self, *args, **kwargs):\n"
        "        tools = await super().list_tools(*args, **kwargs)\n"
        "        return tools + tools\n"
        "server = Twice('twice')\n"
        "@server.tool()\n"
        "def dup() -> str:\n"
        "    return 'x'\n"
        "server.run('stdio')\n")
    specs, problems = specs_from_acp([{"name": "twice", "command": sys.executable, "args": [str(twice)]},
                                      {"name": "twice", "command": "true"},
                                      {"name": "web", "type": "sse", "url": "http://h/sse"}])
    table: dict = {}
    said: list[str] = []

    async def emit(update: dict) -> None:
        said.append(update["content"]["text"])

    servers = McpTools(specs, {"PATH": os.environ["PATH"]}, set(), table, Log(), emit, problems=problems)
    servers.start()
    try:
        await until(lambda: "mcp__twice__dup" in table, "twice up")
        await until(lambda: len(said) >= 3, "three notices")
        shown = "".join(said)
        assert "'twice' is given twice" in shown and "SSE transport is not supported" in shown
        assert "lists the tool 'dup' twice" in shown
        assert [n for n in table if n.startswith("mcp__")] == ["mcp__twice__dup"]
    finally:
        await servers.close()


async def test_a_server_with_thousands_of_tools_was_offered_whole(tmp_path):
    """Issue 31 item 9: every tool of every server was offered (a 10,000-tool server made each request
    ~10 MB). Now the tools offered in all are capped (``[agent] max_tools``), built-in tools first,
    then MCP tools in order; the user is told which were left out, once."""
    specs, _ = specs_from_acp([{"name": "s", "command": sys.executable, "args": [str(SCRIPTED), "stdio"]}])
    table: dict = {"read": object(), "write": object(), "bash": object()}  # the built-ins, first
    said: list[str] = []
    log = Log()

    async def emit(update: dict) -> None:
        said.append(update["content"]["text"])

    servers = McpTools(specs, {"PATH": os.environ["PATH"]}, set(), table, log, emit, max_tools=5)
    servers.start()
    try:
        await until(lambda: any(n.startswith("mcp__") for n in table), "s up")
        assert list(table) == ["read", "write", "bash", "mcp__s__add", "mcp__s__shout"]
        await until(lambda: said, "the notice")
        (notice,) = said
        assert "3 MCP tools left out" in notice and "mcp__s__crash" in notice and "max_tools" in notice
        await servers._publish()  # published again (a list change): nothing said twice
        assert len(said) == 1 and len(table) == 5
        assert [e for kind, e in log.events if kind == "mcp/failed"][0]["left_out"] == [
            "mcp__s__crash", "mcp__s__sleep", "mcp__s__noise"]
    finally:
        await servers.close()
