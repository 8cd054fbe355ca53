"""The CLI's pre-asyncio ``session/new`` (``server/acp/fast_session.py``): the plain case is answered
before the heavy imports, exactly as the full server answers it, with its header durable first;
everything else goes to the full server as before. The real server, as a subprocess, against the
bundled offline endpoint. No timing is asserted (bench/ measures it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.server.acp.fast_session import FAST_NOTE, SLOW_PATH_ENV
from agent_server.session import read_events
from support.timeouts import HANG

INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}}}


@pytest.fixture
def plain_env(tmp_path):
    """An empty config file and a config folder of this test only (no stored sign-in), debug on:
    the fast path says on stderr when it answered."""
    (tmp_path / "empty.toml").write_text("")
    (tmp_path / "xdg").mkdir()
    return {"AGENT_SERVER_CONFIG": str(tmp_path / "empty.toml"), "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
            "AGENT_SERVER_LOG_LEVEL": "DEBUG"}


def start(raw_agent_factory, env, **extra):
    agent = raw_agent_factory(env={**env, **extra})
    assert agent.request("initialize", INIT)["result"]["protocolVersion"] == 1
    return agent


def fast(agent) -> bool:
    """Whether the fast path answered (it says so on stderr before its answer; the process is
    ended first, so its whole stderr has been read)."""
    agent.close_stdin()
    agent.wait_exit()
    agent._threads[1].join(timeout=HANG)  # the stderr reader, at end of input
    return FAST_NOTE in agent.stderr_text()


def header_line(state: Path, session_id: str) -> bytes:
    return (state / "sessions" / session_id / "events.jsonl").read_bytes().split(b"\n")[0] + b"\n"


def test_the_fast_answer_and_header_equal_the_full_servers_apart_from_the_session_id(
        raw_agent_factory, plain_env, workspace, tmp_path, agent_state_dir):
    other = tmp_path / "other"
    other.mkdir()
    params = {"cwd": str(workspace), "additionalDirectories": [str(other)], "mcpServers": []}
    answers, headers = [], []
    for extra in ({}, {SLOW_PATH_ENV: "1"}):
        agent = start(raw_agent_factory, plain_env, **extra)
        result = agent.request("session/new", params)["result"]
        answers.append(dict(result))
        headers.append(header_line(agent_state_dir, result["sessionId"]))
        assert fast(agent) == (not extra), agent.stderr_text()[-2000:]
        assert agent.returncode == 0
    fast_answer, slow_answer = answers
    assert fast_answer.pop("sessionId") != slow_answer.pop("sessionId")
    assert fast_answer == slow_answer
    assert [o["id"] for o in fast_answer["configOptions"]] == ["mode", "model"]

    def neutral(line: bytes) -> bytes:  # the id and the time are the only bytes that may differ
        line = re.sub(rb"sess_[0-9a-f]{32}", b"sess_X", line)
        return re.sub(rb'"time":[0-9.e+-]+,', b'"time":T,', line)

    assert neutral(headers[0]) == neutral(headers[1])
    assert json.loads(headers[0])["data"]["additional_directories"] == [str(other)]


def test_the_header_is_on_disk_when_the_fast_answer_is_read(raw_agent_factory, plain_env, workspace, agent_state_dir):
    agent = start(raw_agent_factory, plain_env)
    session_id = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
    line = header_line(agent_state_dir, session_id)  # read at once: nothing else has happened yet
    event = json.loads(line)
    assert event["type"] == "session/header" and event["seq"] == 1
    assert event["data"]["session_id"] == session_id and event["data"]["cwd"] == str(workspace)
    assert fast(agent)


def test_requests_sent_in_the_same_write_as_session_new_are_served_in_order_after_it(
        raw_agent_factory, plain_env, workspace):
    agent = start(raw_agent_factory, plain_env)
    lines = [{"jsonrpc": "2.0", "id": 50, "method": "session/new", "params": {"cwd": str(workspace), "mcpServers": []}},
             {"jsonrpc": "2.0", "id": 51, "method": "session/list", "params": {}},
             {"jsonrpc": "2.0", "id": 52, "method": "session/prompt",
              "params": {"sessionId": "sess_unknown", "prompt": [{"type": "text", "text": "hi"}]}}]
    agent.send_line(b"".join(json.dumps(m).encode() + b"\n" for m in lines), newline=False)
    session_id = agent.response(50, timeout=HANG)["result"]["sessionId"]
    # the request read with it, in the bytes handed to the full server, is answered after it
    # (the new session had no prompt yet: session/list leaves it out)
    assert agent.response(51, timeout=HANG)["result"]["sessions"] == []
    assert session_id
    assert agent.response(52, timeout=HANG)["error"]["code"] == -32002
    assert fast(agent)


def test_a_prompt_right_behind_the_fast_session_new_is_served_in_order(raw_agent_factory, plain_env, workspace):
    """The prompt is sent as soon as the answer is read (as an editor does): the full server is
    still loading; it is read after the session is adopted and its commands were sent."""
    with OfflineEndpoint.start_in_thread([text_stream("hello there")]) as ep:
        agent = start(raw_agent_factory, plain_env, AGENT_SERVER_BASE_URL=ep.base_url)
        session_id = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        agent.send_request("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]},
                           id=99)
        answer = agent.response(99, timeout=HANG)
        assert answer["result"]["stopReason"] == "end_turn", answer
        seen = [m for m in agent.transcript.snapshot() if m.direction == "agent->client"]
        updates = [m.message["params"]["update"]["sessionUpdate"] for m in seen
                   if m.message.get("method") == "session/update"]
        assert updates[0] == "available_commands_update" and "agent_message_chunk" in updates
        assert fast(agent)


@pytest.mark.parametrize("params, code", [
    ({"cwd": "relative/dir", "mcpServers": []}, -32602),
    ({"cwd": "/no/such/folder/anywhere", "mcpServers": []}, -32602),
    ({"mcpServers": []}, -32602),
])
def test_session_new_the_fast_path_refuses_is_answered_by_the_full_server_as_before(
        raw_agent_factory, plain_env, params, code):
    agent = start(raw_agent_factory, plain_env)
    assert agent.request("session/new", params)["error"]["code"] == code
    assert not fast(agent)


def test_session_new_with_mcp_servers_goes_to_the_full_server_and_records_them(
        raw_agent_factory, plain_env, workspace, agent_state_dir):
    agent = start(raw_agent_factory, plain_env)
    server = {"name": "nothing", "command": "/bin/false", "args": [], "env": []}
    session_id = agent.request("session/new", {"cwd": str(workspace), "mcpServers": [server]})["result"]["sessionId"]
    assert json.loads(header_line(agent_state_dir, session_id))["data"]["mcp_servers"] == ["nothing"]
    assert not fast(agent)


def test_session_new_needing_a_sign_in_is_still_auth_required(raw_agent_factory, plain_env, workspace):
    agent = start(raw_agent_factory, plain_env, AGENT_SERVER_PROFILE="deepseek", AGENT_SERVER_API_KEY="",
                  DEEPSEEK_API_KEY="", AGENT_SERVER_BASE_URL="")
    answer = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    assert answer["error"]["code"] == -32000, answer
    assert not fast(agent)


def test_a_config_file_with_settings_goes_to_the_full_server(raw_agent_factory, plain_env, workspace, tmp_path):
    (tmp_path / "set.toml").write_text('[policy]\ndefault_mode = "read-only"\n')
    agent = start(raw_agent_factory, plain_env, AGENT_SERVER_CONFIG=str(tmp_path / "set.toml"))
    result = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]
    assert result["modes"]["currentModeId"] == "read-only"
    assert not fast(agent)


def test_the_sandbox_probe_result_is_logged_before_the_first_tool_call_of_a_fast_session(
        raw_agent_factory, plain_env, workspace, agent_state_dir):
    script = [tool_call_stream([("c1", "bash", json.dumps({"command": "echo hi"}))]), text_stream("done")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        agent = start(raw_agent_factory, plain_env, AGENT_SERVER_BASE_URL=ep.base_url)
        session_id = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        agent.send_request("session/prompt", {"sessionId": session_id,
                                              "prompt": [{"type": "text", "text": "run it"}]}, id=7)
        while True:  # answer any permission question (an unconfined shell asks) with allow
            message = agent.recv(timeout=HANG)
            if message.get("method") == "session/request_permission":
                agent.respond(message["id"], {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
            elif message.get("id") == 7:
                assert message["result"]["stopReason"] == "end_turn", message
                break
        assert fast(agent)
    kinds = [e.type for e in read_events(agent_state_dir / "sessions" / session_id / "events.jsonl")]
    assert kinds[:2] == ["session/header", "mode/changed"]
    assert kinds.index("sandbox/status") < kinds.index("turn/start") < kinds.index("tool/call")


PROBE = r"""
import json, os, sys
from agent_server.server.acp.fast_session import fast_new_session
rfd, wfd = os.pipe()
line = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                   "params": {"cwd": sys.argv[1], "mcpServers": []}}).encode() + b"\n"
handed = fast_new_session(line, wfd, None)
loaded = [m for m in ("asyncio", "httpx", "httpx_sse", "pydantic", "pydantic_core", "logging",
                      "agent_server.config.load", "agent_server.session.events", "agent_server.server.acp.server")
          if m in sys.modules]
print(json.dumps({"loaded": loaded, "answer": os.read(rfd, 65536).decode(), "log": str(handed.path)}))
"""


def test_the_fast_session_new_imports_no_asyncio_pydantic_nor_httpx(plain_env, workspace, agent_state_dir):
    env = {**plain_env, "AGENT_SERVER_STATE_DIR": str(agent_state_dir), "AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1",
           "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", PROBE, str(workspace)], capture_output=True, text=True, check=True,
                         env=env)
    result = json.loads(out.stdout)
    assert result["loaded"] == []
    answer = json.loads(result["answer"])
    assert answer["id"] == 2 and answer["result"]["sessionId"] in result["log"]
    assert read_events(Path(result["log"]))[0].data["cwd"] == str(workspace)


@pytest.mark.parametrize("servers", [[], [{"name": "nothing", "command": "/bin/false", "args": [], "env": []}]])
def test_session_new_after_an_idle_client_is_answered_while_the_server_loads_in_a_thread(
        raw_agent_factory, plain_env, workspace, agent_state_dir, servers):
    """An idle client gets the server's modules loaded in a thread (cli._after_initialize): the
    plain case is still answered by the fast path meanwhile, and anything else by the server."""
    agent = start(raw_agent_factory, plain_env)
    time.sleep(0.3)  # longer than cli._IDLE_BEFORE_LOADING
    session_id = agent.request("session/new", {"cwd": str(workspace), "mcpServers": servers})["result"]["sessionId"]
    assert agent.request("session/set_mode", {"sessionId": session_id, "modeId": "read-only"})["result"] == {}
    assert fast(agent) == (not servers)
    assert agent.returncode == 0
