"""No process outlives the server an editor started and closed (issue 27 item 6): no daemon, no
standby, no stray probe or shell launcher. The server runs under a child subreaper
(``support/subreaper.py``), so anything it left — even double-forked into a session of its own,
as the retired warm spare was — is found once it has exited. Sessions without MCP servers (the
MCP process-tree issue extends this)."""

import json
import signal
import sys
from pathlib import Path

from agent_server.offline import OfflineEndpoint, ThreadedEndpoint, text_stream, tool_call_stream
from support.fixtures import agent_server_command
from support.raw_agent import RawAgentProcess
from support.timeouts import HANG

SUBREAPER = Path(__file__).resolve().parents[1] / "support" / "subreaper.py"
INIT = {"protocolVersion": 1, "clientCapabilities": {}}


def serve_one_session(endpoint, tmp_path: Path, run: int, close: str) -> list[dict]:
    """Start the server as an editor would, run one prompt whose ``bash`` call starts the sandbox
    probe and the shell launcher, close the server (``eof``: stdin closed, as an editor quits;
    ``sigterm``: as an editor stops it); what it left running."""
    workspace = tmp_path / f"ws{run}"
    workspace.mkdir()
    endpoint.push(tool_call_stream([(f"call_{run}", "bash", json.dumps({"command": "echo hello"}))]))
    endpoint.push(text_stream("done"))
    report = tmp_path / f"left{run}.json"
    env = {"AGENT_SERVER_STATE_DIR": str(tmp_path / "state"), "AGENT_SERVER_BASE_URL": endpoint.base_url,
           "AGENT_SERVER_API_KEY": "k", "AGENT_SERVER_MODEL": "offline-model",
           "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "SUBREAPER_WITHIN": "10"}
    agent = RawAgentProcess([sys.executable, str(SUBREAPER), str(report), "--", *agent_server_command()], env=env)
    try:
        agent.request("initialize", INIT)
        sid = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        done = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
                             timeout=60)
        assert done["result"]["stopReason"] == "end_turn", done
        if close == "eof":
            agent.close_stdin()
        else:
            agent.process.send_signal(signal.SIGTERM)  # the subreaper passes it on to the server
        assert agent.wait_exit(timeout=HANG) == 0, agent.diagnostics()
    finally:
        agent.close()
    return json.loads(report.read_text())


def test_the_server_leaves_no_process_behind_when_closed_twice(tmp_path):
    with ThreadedEndpoint(OfflineEndpoint()) as endpoint:
        first = serve_one_session(endpoint, tmp_path, 1, "eof")
        second = serve_one_session(endpoint, tmp_path, 2, "sigterm")
    assert (first, second) == ([], [])
