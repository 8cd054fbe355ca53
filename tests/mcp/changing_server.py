"""An MCP server built with the official SDK whose tool list changes mid-session, for the
``notifications/tools/list_changed`` tests.

    python changing_server.py modern   # 2026-07-28 (subscriptions/listen)
    python changing_server.py legacy   # the initialize handshake only, as pre-2026 servers

Tools: ``add``; ``grow`` adds the tool ``extra``; ``reword`` gives ``add`` a new description (same
name); each then says so (``notifications/tools/list_changed``: through the listen stream, or on
its own for legacy).
"""

import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("changing")
LEGACY = len(sys.argv) > 1 and sys.argv[1] == "legacy"
state = {"add": "Add two integers.", "extra": False}


def add(a: int, b: int) -> int:
    return a + b


def extra(text: str) -> str:
    """Say the text twice."""
    return text + text


async def changed(ctx: Context) -> None:
    """List the tools anew, in a fixed order, then say the list changed."""
    for tool in [t.name for t in await server.list_tools()]:
        server.remove_tool(tool)
    define()
    if LEGACY:
        await ctx.session.send_tool_list_changed()
    else:
        await ctx.notify_tools_changed()


async def grow(ctx: Context) -> str:
    """Add the tool `extra`."""
    state["extra"] = True
    await changed(ctx)
    return "grown"


async def reword(ctx: Context) -> str:
    """Describe `add` anew (same name, same place, same schema)."""
    state["add"] = "Add two integers (now described anew)."
    await changed(ctx)
    return "reworded"


def define() -> None:
    server.add_tool(add, description=state["add"])
    server.add_tool(grow)
    server.add_tool(reword)
    if state["extra"]:
        server.add_tool(extra)


define()


async def serve_legacy() -> None:
    """Serve the initialize handshake only (as servers before 2026 do): the client's
    ``server/discover`` probe is refused and it falls back to ``initialize``."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server

    low = server._lowlevel_server
    async with stdio_server() as (read, write), low.lifespan(low) as state:
        await serve_loop(low, read, write, lifespan_state=state, init_options=low.create_initialization_options())


if __name__ == "__main__":
    if LEGACY:
        import anyio

        anyio.run(serve_legacy)
    else:
        server.run("stdio")
