"""End to end (issue 32 §5, a regression): a log append that failed right after a cold
``session/new`` (the CLI's fast path answered it; the full server then adopts the session and
appends its first events) raised outside any handler and left the server deaf — every later
request unanswered, the process alive. The disk is "full" for the server's process alone:
``RLIMIT_FSIZE`` a little past the size the fast path's ``session/header`` takes."""

from __future__ import annotations

import json
from pathlib import Path

from support.fixtures import agent_server_command
from support.timeouts import HANG  # only detects the deaf server


def cold_start(agent, workspace: Path) -> str:
    """initialize and session/new as the first two lines (the fast path answers both)."""
    agent.send_line(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}))
    agent.send_line(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                                "params": {"cwd": str(workspace), "mcpServers": []}}))
    assert agent.response(1, timeout=HANG)["result"]["protocolVersion"] == 1
    return agent.response(2, timeout=HANG)["result"]["sessionId"]


def test_a_failed_log_append_right_after_a_cold_session_new_left_the_server_deaf(
        raw_agent_factory, workspace, agent_state_dir, tmp_path):
    probe_state = tmp_path / "probe-state"
    probe_state.mkdir()
    probe = raw_agent_factory(env={"AGENT_SERVER_STATE_DIR": str(probe_state)})
    cold_start(probe, workspace)
    probe.close()
    (header_log,) = probe_state.glob("sessions/*/events.jsonl")
    header = header_log.read_text().splitlines()[0]
    limit = len(header.encode()) + 1 + 24  # the header fits (its time may take a digit more), no event after it
    agent = raw_agent_factory(["prlimit", f"--fsize={limit}", "--", *agent_server_command()])
    sid = cold_start(agent, workspace)
    agent.send_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}, id=10)
    answer = agent.response(10, timeout=HANG)
    assert answer["error"]["data"]["code"] == "STORAGE", answer
    assert "session/header" not in json.dumps(answer)  # the reason, not the log's content
    agent.send_request("session/list", {}, id=11)
    listed = agent.response(11, timeout=HANG)  # the server still answers
    assert "sessions" in listed["result"]
    (log,) = agent_state_dir.glob("sessions/*/events.jsonl")
    assert [json.loads(line)["type"] for line in log.read_text().splitlines()] == ["session/header"]


def test_an_exception_out_of_the_serve_loop_ends_the_process_and_says_why():
    """Whatever raises out of the serve loop: the process says so on stderr and ends, even with a
    thread still blocked (the loop's shutdown would wait for it: a live process answering nothing)."""
    import subprocess
    import sys

    code = ("import asyncio, os, threading\n"
            "from agent_server.cli.serve import _never_silent\n"
            "r, w = os.pipe()\n"
            "threading.Thread(target=os.read, args=(r, 1)).start()  # never ends on its own\n"
            "async def serve():\n"
            "    asyncio.get_running_loop().run_in_executor(None, os.read, r, 1)\n"
            "    raise RuntimeError('the loop broke')\n"
            "asyncio.run(_never_silent(serve()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 70
    assert "internal error" in done.stderr and "RuntimeError: the loop broke" in done.stderr
