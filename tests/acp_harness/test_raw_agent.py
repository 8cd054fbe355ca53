"""The raw NDJSON harness sends bytes verbatim, pairs responses by id and cleans up its process group."""

from __future__ import annotations

import pytest
from support.acp_client import RawAgentProcess
from support.acp_schema import validate_transcript
from support.procs import pid_alive
from support.transcript import AGENT_TO_CLIENT, CLIENT_TO_AGENT

INIT = {"protocolVersion": 1, "clientCapabilities": {}}


def test_request_response_and_notifications(raw_agent, workspace):
    init = raw_agent.request("initialize", INIT)
    assert init["id"] == 1 and init["result"]["protocolVersion"] == 1
    sid = raw_agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
    rid = raw_agent.send_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "yo"}]})
    first = raw_agent.recv()
    assert first["method"] == "session/update"
    response = raw_agent.response(rid)
    assert response["result"] == {"stopReason": "end_turn"}
    # the second update was held back while looking for the response, not lost
    assert raw_agent.recv()["params"]["update"]["content"]["text"] == "yo"
    assert validate_transcript(raw_agent.transcript.snapshot()).ok


def test_agent_requests_can_be_answered_by_hand(raw_agent, workspace):
    raw_agent.request("initialize", INIT)
    sid = raw_agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
    rid = raw_agent.send_request(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/permission"}]}
    )
    ask = raw_agent.recv_until(lambda m: m.get("method") == "session/request_permission")
    raw_agent.respond(ask["id"], {"outcome": {"outcome": "selected", "optionId": "reject_once"}})
    assert raw_agent.response(rid)["result"]["stopReason"] == "end_turn"
    chunks = [m for m in raw_agent.drain() if m.get("method") == "session/update"]
    assert "reject_once" in chunks[-1]["params"]["update"]["content"]["text"]


def test_malformed_lines_are_sent_verbatim_and_recorded(raw_agent):
    raw_agent.send_line("this is not json")
    raw_agent.send_line(b'{"jsonrpc":"2.0",', newline=False)
    raw_agent.send_line(b'"id":7,"method":"initialize","params":{"protocolVersion":1}}')
    assert raw_agent.response(7)["result"]["protocolVersion"] == 1
    sent = [r.raw for r in raw_agent.transcript.sent()]
    assert sent == ["this is not json", '{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}']
    report = validate_transcript(raw_agent.transcript.snapshot(), collect=True)
    assert [(f.direction, f.message) for f in report.failures] == [(CLIENT_TO_AGENT, "line is not JSON")]


def test_request_without_params_omits_the_member(raw_agent):
    rid = raw_agent.send_request("session/list")
    assert raw_agent.transcript.sent()[-1].message == {"jsonrpc": "2.0", "id": rid, "method": "session/list"}
    raw_agent.response(rid)  # the echo agent (SDK) answers -32601; any answer will do


def test_recv_timeout_and_eof(raw_agent):
    with pytest.raises(TimeoutError):
        raw_agent.recv(timeout=0.2)
    raw_agent.close_stdin()
    with pytest.raises(EOFError):
        raw_agent.recv()
    assert raw_agent.wait_exit() == 0


def test_stderr_capture_and_exit_status(raw_agent, workspace):
    raw_agent.request("initialize", INIT)
    sid = raw_agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
    raw_agent.send_request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/exit"}]})
    assert raw_agent.wait_exit() == 3
    assert "echo-agent: exiting on request" in raw_agent.stderr_text()
    assert "exiting on request" in raw_agent.diagnostics()


def test_close_kills_grandchildren(echo_agent_command, workspace):
    with RawAgentProcess(echo_agent_command) as agent:
        agent.request("initialize", INIT)
        sid = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        rid = agent.send_request(
            "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "/spawn-child"}]}
        )
        agent.response(rid)
        updates = [m for m in agent.drain() if m.get("method") == "session/update"]
        child = int(updates[-1]["params"]["update"]["content"]["text"].split()[-1])
        assert pid_alive(child)
    assert not pid_alive(child)
    assert agent.group_members() == []
    assert agent.transcript.received()[0].direction == AGENT_TO_CLIENT
