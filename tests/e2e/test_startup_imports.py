"""The start-up path stays as the benchmark measures it: a session without MCP servers never
loads the MCP SDK, and a key from the environment never loads ``keyring`` — seen from the real
server process (``PYTHONPROFILEIMPORTTIME``: every module it imports is listed on stderr), across
``session/new``, a prompt and the warm-up after it. No timing is asserted (that is bench/'s job)."""

from __future__ import annotations

import sys
from pathlib import Path

from agent_server.offline import OfflineEndpoint, text_stream
from support.timeouts import HANG

SCRIPTED = Path(__file__).resolve().parents[1] / "mcp" / "scripted_server.py"


def imported(stderr: str) -> set[str]:
    """Module names from ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2}


def sdk(modules: set[str]) -> set[str]:
    return {m for m in modules if m == "mcp" or m.startswith(("mcp.", "mcp_types"))}


def run_session(raw_agent_factory, workspace, mcp_servers: list) -> set[str]:
    with OfflineEndpoint.start_in_thread([text_stream("hello")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url, "PYTHONPROFILEIMPORTTIME": "1",
                                       "AGENT_SERVER_CONFIG": str(workspace.parent / "none.toml")})
        (workspace.parent / "none.toml").write_text("[agent]\nmcp_start_wait = 120\n")
        agent.request("initialize", {"protocolVersion": 1})
        sid = agent.request("session/new", {"cwd": str(workspace), "mcpServers": mcp_servers})["result"]["sessionId"]
        answer = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
                               timeout=120)
        assert answer["result"]["stopReason"] == "end_turn", answer
        agent.close_stdin()
        assert agent.wait_exit(timeout=HANG) == 0
        return imported(agent.stderr_text())


def test_a_session_without_mcp_servers_never_imports_the_mcp_sdk_nor_keyring(raw_agent_factory, workspace):
    modules = run_session(raw_agent_factory, workspace, [])
    assert "agent_server.server.acp.server" in modules  # the listing works: the server's own modules are there
    assert not sdk(modules), sorted(sdk(modules))
    assert not {m for m in modules if m == "keyring" or m.startswith("keyring.")}


def test_the_import_listing_does_see_the_sdk_when_a_session_has_an_mcp_server(raw_agent_factory, workspace):
    """The control: the same listing shows the SDK as soon as a server is given."""
    # the server's own imports only: the MCP server (a Python process too) gets the variable emptied
    server = {"name": "scripted", "command": sys.executable, "args": [str(SCRIPTED), "stdio"],
              "env": [{"name": "PYTHONPROFILEIMPORTTIME", "value": ""}]}
    # the SDK loads in a worker thread (the loop never waits on it): its lines of the listing can
    # interleave with the main thread's, so the package line itself may be unreadable; its modules are there
    assert {m for m in sdk(run_session(raw_agent_factory, workspace, [server])) if m.startswith("mcp.client")}
