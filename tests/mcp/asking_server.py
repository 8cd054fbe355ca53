"""An MCP server whose tools ask the client: ``ask`` (``elicitation/create``) and ``sample``
(``sampling/createMessage``); each answers what the client said, or the error it got.

    python asking_server.py
"""

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("asking")


class Name(BaseModel):
    name: str


@server.tool()
async def ask(ctx: Context) -> str:
    """Ask the user for a name."""
    try:
        result = await ctx.elicit("Your name?", Name)
    except Exception as exc:  # noqa: BLE001 - the client's refusal is the answer
        return f"refused: {exc}"
    return f"answered: {result.action}"


@server.tool()
async def sample(ctx: Context) -> str:
    """Ask the client's model for a sentence."""
    try:
        result = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text="hi"))], max_tokens=5)
    except Exception as exc:  # noqa: BLE001
        return f"refused: {exc}"
    return f"sampled: {result.content}"


if __name__ == "__main__":
    server.run("stdio")
