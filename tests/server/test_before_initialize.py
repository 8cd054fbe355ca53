"""Issue 31 item 4: nothing is served before ``initialize``.

``session/new`` and ``session/prompt`` were answered before it, and such a client was silently
treated as one without file access: its edits then went to disk with no approval step (seen in
CodeCompanion's start-up race). A request pipelined right behind the ``initialize`` request (before
its answer) is still served, on the fast path and on the full server's. The real server, as a
subprocess.
"""

from __future__ import annotations

import json

import pytest

from agent_server.server.acp.fast_session import SLOW_PATH_ENV
from support.timeouts import HANG

INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}}}


def line(message: dict) -> bytes:
    return json.dumps(message).encode() + b"\n"


@pytest.fixture
def plain_env(tmp_path):
    (tmp_path / "empty.toml").write_text("")
    (tmp_path / "xdg").mkdir()
    return {"AGENT_SERVER_CONFIG": str(tmp_path / "empty.toml"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}


@pytest.mark.parametrize("path", ["fast", "full"])
def test_session_new_and_prompt_before_initialize_were_served_as_a_client_without_file_access(
        raw_agent_factory, plain_env, workspace, path):
    agent = raw_agent_factory(env={**plain_env, **({SLOW_PATH_ENV: "1"} if path == "full" else {})})
    early = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    assert "result" not in early
    error = early["error"]
    assert error["code"] == -32600 and "before initialize" in error["message"]
    assert error["data"]["details"] == error["message"]
    prompt = agent.request("session/prompt", {"sessionId": "sess_x", "prompt": [{"type": "text", "text": "hi"}]})
    assert prompt["error"]["code"] == -32600 and "before initialize" in prompt["error"]["message"]
    assert agent.request("initialize", INIT)["result"]["protocolVersion"] == 1
    assert agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
    assert agent.stderr_text().count("\n") <= 2  # no traceback for a client's mistake


@pytest.mark.parametrize("path", ["fast", "full", "mcp"])
def test_a_session_new_pipelined_behind_initialize_before_its_answer_is_served(
        raw_agent_factory, plain_env, workspace, path):
    agent = raw_agent_factory(env={**plain_env, **({SLOW_PATH_ENV: "1"} if path == "full" else {})})
    servers = [{"name": "none", "command": "/bin/false", "args": [], "env": []}] if path == "mcp" else []
    agent.send_line(line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
                    + line({"jsonrpc": "2.0", "id": 2, "method": "session/new",
                            "params": {"cwd": str(workspace), "mcpServers": servers}}), newline=False)
    assert agent.response(1, timeout=HANG)["result"]["protocolVersion"] == 1
    assert agent.response(2, timeout=HANG)["result"]["sessionId"]
