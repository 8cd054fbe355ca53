"""A small MCP server built with the official SDK that changes workspace files (for the checkpoint
tests): ``write_note(path, text)`` writes ``text`` to ``path`` (not read-only).

    python writing_server.py stdio
"""

from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("writing")


@server.tool()
def write_note(path: str, text: str) -> str:
    """Write a note to a file."""
    Path(path).write_text(text)
    return f"wrote {len(text)} characters to {path}"


if __name__ == "__main__":
    server.run("stdio")
