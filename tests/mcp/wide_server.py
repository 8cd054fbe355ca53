"""An MCP server built with the official SDK whose tools are many and wordy, for the tests of tool
schemas that do not fit the model's window.

    python wide_server.py COUNT WORDS   # COUNT tools ``tool_0`` …, each described by WORDS words
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("wide")
COUNT, WORDS = int(sys.argv[1]), int(sys.argv[2])


def _tool(number: int):
    def tool(x: int) -> int:
        return x + number

    return tool


for i in range(COUNT):
    server.add_tool(_tool(i), name=f"tool_{i}", description=f"Tool number {i}. " + "wordy " * WORDS)


if __name__ == "__main__":
    server.run("stdio")
