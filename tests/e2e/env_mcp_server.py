"""An MCP server (the official SDK, stdio) whose one tool ``environ(variable)`` answers the value of an
environment variable in the server's process, or ``<unset>`` — for the environment tests."""

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("envy")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def environ(variable: str) -> str:
    """The value of one environment variable."""
    return os.environ.get(variable, "<unset>")


if __name__ == "__main__":
    server.run("stdio")
