"""Issue 31 item 8: a stdio MCP server's whole process tree stops with it and with the agent.

Most servers are started as ``npx -y …``, ``uvx …`` or ``sh -c``: the real server is a child of the
launcher, and some servers double-fork helpers. ``setpriv --pdeathsig`` covered the launcher only,
so the real server survived the agent's exit and ``kill -9``, and a double-forked, ``setsid`` helper
that ignores SIGTERM/SIGHUP and never sees stdin EOF survived even ``close``. Both ways the launcher
(``agent_server/tools/mcp/reaper.py``) runs servers are tested: its own PID namespace, and the
subreaper used where user namespaces do not work.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.procs import processes_naming, wait_gone
from support.timeouts import HANG

from agent_server.tools.mcp import McpServerSpec
from agent_server.tools.mcp import connection as connection_module
from agent_server.tools.mcp.connection import McpConnection

HERE = Path(__file__).resolve().parent
FORKING = HERE / "forking_server.py"
MODES = ["namespace", "subreaper"]


def marked(pidfile: Path) -> list[int]:
    """Processes whose command line names ``pidfile``: the server, its launcher and its helper."""
    return processes_naming(str(pidfile))


async def helper_started(pidfile: Path) -> None:
    for _ in range(400):
        if pidfile.exists():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the server's helper never started")


def spec(pidfile: Path, launcher: str) -> McpServerSpec:
    args = (str(FORKING), str(pidfile)) + (("sh",) if launcher == "sh" else ())
    return McpServerSpec("forking", "stdio", command=sys.executable, args=args)


def env() -> dict[str, str]:
    return {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp")}


@pytest.mark.parametrize("launcher", ["direct", "sh"])
@pytest.mark.parametrize("mode", MODES)
async def test_a_servers_setsid_helper_survived_close(tmp_path, monkeypatch, mode, launcher):
    monkeypatch.setattr(connection_module, "NAMESPACES", mode == "namespace", raising=False)
    pidfile = tmp_path / "helper.pid"
    conn = McpConnection(spec(pidfile, launcher), env())
    try:
        assert {t["name"] for t in await conn.start()} == {"ping"}
        await helper_started(pidfile)
        tree = marked(pidfile)
        assert len(tree) >= 3, tree  # launcher, server, helper (and sh)
    finally:
        await conn.close()
    try:
        assert wait_gone(tree), [p for p in tree if Path(f"/proc/{p}").exists()]
    finally:
        for pid in marked(pidfile):  # a failed test leaves nothing behind
            os.kill(pid, signal.SIGKILL)


HOLDER = """
import asyncio, os, sys
sys.path.insert(0, sys.argv[1])
from agent_server.tools.mcp import McpServerSpec
from agent_server.tools.mcp.connection import McpConnection
async def main():
    args = (sys.argv[2], sys.argv[3]) + tuple(sys.argv[4:])
    c = McpConnection(McpServerSpec('f', 'stdio', command=sys.executable, args=args), dict(os.environ))
    await c.start()
    while not os.path.exists(sys.argv[3]):
        await asyncio.sleep(0.05)
    print('ready', flush=True)
    if sys.stdin.readline().strip() == 'exit':
        os._exit(0)  # the agent's own end, without closing the server
    await asyncio.sleep(3600)
asyncio.run(main())
"""


@pytest.mark.parametrize("how", ["kill -9", "exit"])
@pytest.mark.parametrize("mode", MODES)
def test_the_real_server_behind_sh_survived_the_agents_end(tmp_path, mode, how):
    holder = tmp_path / "holder.py"
    holder.write_text(HOLDER)
    pidfile = tmp_path / "helper.pid"
    proc = subprocess.Popen([sys.executable, str(holder), str(HERE.parents[1]), str(FORKING), str(pidfile), "sh"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "AGENT_SERVER_MCP_NAMESPACES": "1" if mode == "namespace" else "0"})
    try:
        assert proc.stdout.readline().strip() == "ready"
        tree = marked(pidfile)
        assert len(tree) >= 4, tree  # launcher, sh, server, helper
        if how == "kill -9":
            os.kill(proc.pid, signal.SIGKILL)
        else:
            proc.stdin.write("exit\n")
            proc.stdin.flush()
        proc.wait(HANG)
        assert wait_gone(tree), [p for p in tree if Path(f"/proc/{p}").exists()]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in marked(pidfile):  # a failed test leaves nothing behind
            os.kill(pid, signal.SIGKILL)


def test_the_launcher_passes_the_servers_exit_status_and_a_command_that_cannot_run(tmp_path):
    reaper = Path(connection_module.__file__).with_name("reaper.py")
    for extra in ([], ["--subreaper"]):
        base = [sys.executable, "-I", "-S", str(reaper), str(os.getpid()), *extra, "--"]
        assert subprocess.run([*base, "sh", "-c", "exit 7"]).returncode == 7
        gone = subprocess.run([*base, str(tmp_path / "no-such-server")], capture_output=True, text=True)
        assert gone.returncode == 127 and "cannot run" in gone.stderr
        # stdin EOF reaches the server through the launcher
        assert subprocess.run([*base, "cat"], input=b"", capture_output=True, timeout=30).returncode == 0
