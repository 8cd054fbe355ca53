"""A small MCP server built with the official SDK, for the MCP tests.

    python scripted_server.py stdio
    python scripted_server.py http PORT

Tools: ``add`` (read-only), ``shout`` (returns text and structured content), ``crash`` (the
process exits mid-call), ``sleep`` (never answers within a test's timeout), ``noise`` (writes
megabytes of log lines to stderr, then ``LAST-LINE``; answers its process id).
"""

import os
import sys
import time

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("scripted")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> dict:
    """Upper-case a text."""
    return {"loud": text.upper()}


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


@server.tool()
def sleep(seconds: float) -> str:
    """Sleep, then answer."""
    time.sleep(seconds)
    return "slept"


@server.tool()
def noise(megabytes: int) -> int:
    """Write ``megabytes`` MB of log lines to stderr, then ``LAST-LINE``; return this process's id."""
    line = "log " + "x" * 95 + "\n"
    for _ in range(megabytes * 10_486):
        sys.stderr.write(line)
    sys.stderr.write("LAST-LINE\n")
    sys.stderr.flush()
    return os.getpid()


if __name__ == "__main__":
    if sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run("stdio")
