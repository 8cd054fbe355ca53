"""An MCP server built with the official SDK that offers other tools after a restart (as one
updated on disk between a crash and the restart), for the restart tests.

    python restarting_server.py RUNS_FILE

Each start counts itself in ``RUNS_FILE``. Tools: ``ping`` (answers the run number), ``crash``
(the process exits mid-call); from the second run on also ``after_restart``.
"""

import os
import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

runs_file = Path(sys.argv[1])
run = int(runs_file.read_text() or "0") + 1 if runs_file.exists() else 1
runs_file.write_text(str(run))
server = MCPServer("restarting")


@server.tool()
def ping() -> str:
    """Answer which run of the server this is."""
    return f"run {run}"


@server.tool()
def crash() -> str:
    """Exit the server process in the middle of the call."""
    os._exit(3)


if run > 1:
    @server.tool()
    def after_restart(text: str) -> str:
        """Say the text back, marked (only offered after a restart)."""
        return f"restarted: {text}"


if __name__ == "__main__":
    server.run("stdio")
