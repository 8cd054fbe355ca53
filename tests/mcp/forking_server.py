"""An MCP server that leaves a helper behind the way real servers do, for the process-tree tests.

    python forking_server.py PIDFILE [sh]

At start it double-forks: the first child calls ``setsid`` and forks the helper, then exits; the
helper ignores ``SIGTERM`` and ``SIGHUP``, closes its stdin, stdout and stderr (no pipe EOF ever
reaches it), writes its pid to ``PIDFILE`` and sleeps forever. With ``sh`` the server itself runs
under ``sh -c`` (the launcher most servers are started with). Tool: ``ping``.
"""

import os
import signal
import subprocess
import sys
import time

if len(sys.argv) > 2 and sys.argv[2] == "sh":  # the launcher: sh -c runs the real server as its child
    sys.exit(subprocess.call(["sh", "-c", f'"{sys.executable}" "{__file__}" "{sys.argv[1]}"']))

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        with open(sys.argv[1] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.replace(sys.argv[1] + ".tmp", sys.argv[1])
        while True:
            time.sleep(3600)
    os._exit(0)
os.wait()

from mcp.server.mcpserver import MCPServer  # noqa: E402

server = MCPServer("forking")


@server.tool()
def ping() -> str:
    """Answer pong."""
    return "pong"


if __name__ == "__main__":
    server.run("stdio")
