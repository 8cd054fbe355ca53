"""An MCP server whose tools ask the client: ``ask`` (``elicitation/create`` sent mid-call, the
pre-2026 way), ``ask_name`` (an elicitation as the SDK asks it on every protocol version: a
``Resolve(Elicit)`` parameter — a standalone request before 2026-07-28, an input request after) and
``sample`` (``sampling/createMessage``); each answers what the client said, or the error it got.

    python asking_server.py
"""

from typing import Annotated

from mcp import types
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, MCPServer, Resolve
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


def _name_please() -> Elicit[Name]:
    return Elicit("Your name, please?", Name)


@server.tool()
async def ask_name(answer: Annotated[ElicitationResult[Name], Resolve(_name_please)]) -> str:
    """Ask the user for a name (the SDK's resolver way)."""
    if answer.action == "accept":
        return f"hello {answer.data.name}"
    return f"no name: {answer.action}"


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
