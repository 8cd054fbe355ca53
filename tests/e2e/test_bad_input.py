"""Bad input gets the right JSON-RPC answer, the server keeps serving, stdout stays protocol-only.

Raw NDJSON against the real ``agent-server`` process (no SDK in between, so malformed lines really
reach it); the agent's side of every transcript is schema-checked at teardown.
"""

import socket

import pytest

from agent_server.offline import OfflineEndpoint


def still_serving(agent):
    answer = agent.request("initialize", {"protocolVersion": 1})
    assert answer["result"]["protocolVersion"] == 1


def assert_only_protocol_on_stdout(agent):
    assert agent.transcript.non_json_lines() == []


@pytest.fixture
def agent(raw_agent_factory):
    a = raw_agent_factory()
    assert a.request("initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    return a


def test_non_json_line_is_parse_error_with_null_id(agent):
    agent.send_line("this is not json {")
    error = agent.recv()
    assert error["id"] is None and error["error"]["code"] == -32700
    still_serving(agent)
    assert_only_protocol_on_stdout(agent)


def test_batch_is_invalid_request(agent):
    agent.send_line('[{"jsonrpc":"2.0","id":9,"method":"initialize","params":{}}]')
    error = agent.recv()
    assert error["id"] is None and error["error"]["code"] == -32600
    still_serving(agent)


def test_unknown_method_is_method_not_found_and_unknown_notification_is_ignored(agent):
    agent.notify("made/up_notification", {})
    answer = agent.request("made/up", {})
    assert answer["error"]["code"] == -32601
    still_serving(agent)


def test_request_without_params_is_answered(agent):
    rid = agent.send_request("initialize")
    assert agent.response(rid)["result"]["protocolVersion"] == 1
    rid = agent.send_request("session/new")
    error = agent.response(rid)["error"]
    assert error["code"] == -32602 and error["data"]["errors"][0]["path"] == "cwd"
    still_serving(agent)


def test_invalid_params_name_the_field(agent, workspace):
    error = agent.request("session/new", {"cwd": "relative/path", "mcpServers": []})["error"]
    assert error["code"] == -32602 and "absolute" in error["data"]["errors"][0]["message"]
    error = agent.request("session/prompt", {"sessionId": "x", "prompt": [{"type": "nope"}]})["error"]
    assert error["code"] == -32602
    still_serving(agent)


def test_prompt_for_unknown_session_is_resource_not_found(agent):
    answer = agent.request("session/prompt", {"sessionId": "sess_missing", "prompt": [{"type": "text", "text": "hi"}]})
    assert answer["error"]["code"] == -32002
    still_serving(agent)


def _prompt_once(raw_agent_factory, env, workspace):
    agent = raw_agent_factory(env=env)
    agent.request("initialize", {"protocolVersion": 1})
    sid = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
    answer = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]})
    return agent, answer


def test_401_from_the_endpoint_is_internal_error_with_auth_code(raw_agent_factory, workspace):
    with OfflineEndpoint.start_in_thread([{"kind": "error", "status": 401,
                                           "json": {"error": {"message": "Incorrect API key provided"}}}]) as ep:
        agent, answer = _prompt_once(raw_agent_factory, {"AGENT_SERVER_BASE_URL": ep.base_url}, workspace)
    error = answer["error"]
    assert error["code"] == -32603
    assert error["data"]["code"] == "AUTH" and error["data"]["retryable"] is False
    assert "Incorrect API key" in error["data"]["message"]
    # the wrong-key regression: the provider's text alone said nothing of where the key goes
    assert "agent-server login" in error["message"] and "AGENT_SERVER_API_KEY" in error["data"]["details"]
    still_serving(agent)
    assert_only_protocol_on_stdout(agent)


def test_endpoint_down_is_a_network_error_not_a_crash(raw_agent_factory, workspace):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {"AGENT_SERVER_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    config = "[agent]\nmax_attempts = 2\nretry_base_delay = 0.0\n"
    cfg = workspace.parent / "config.toml"
    cfg.write_text(config)
    env["AGENT_SERVER_CONFIG"] = str(cfg)
    agent, answer = _prompt_once(raw_agent_factory, env, workspace)
    error = answer["error"]
    assert error["code"] == -32603 and error["data"]["code"] == "NETWORK" and error["data"]["retryable"] is True
    still_serving(agent)
    assert_only_protocol_on_stdout(agent)


def test_missing_api_key_is_the_auth_required_error_on_session_new(raw_agent_factory, workspace, agent_state_dir):
    """Before sign-in existed the session was created and only the first prompt failed (AUTH);
    now the client is told at once, with ACP's -32000, so it offers the sign-in."""
    env = {"AGENT_SERVER_API_KEY": "", "AGENT_SERVER_BASE_URL": "", "AGENT_SERVER_PROFILE": "openai",
           "OPENAI_API_KEY": "", "XDG_CONFIG_HOME": str(agent_state_dir)}
    agent = raw_agent_factory(env=env)
    agent.request("initialize", {"protocolVersion": 1})
    error = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["error"]
    assert error["code"] == -32000 and "OPENAI_API_KEY" in error["message"] and "agent-server login" in error["message"]
    still_serving(agent)


def test_toad_showed_failed_to_initialize_agent_and_nothing_after_it_for_the_no_key_error(
        raw_agent_factory, workspace, agent_state_dir):
    """Issue 31 item 3: the no-key -32000 on session/new had no data.details, which Toad shows
    ("Failed to initialize agent —" and nothing after it); and it told a client without a sign-in
    that "the editor's sign-in runs it". Every error carries data.details, wrong requests too."""
    env = {"AGENT_SERVER_API_KEY": "", "AGENT_SERVER_BASE_URL": "", "AGENT_SERVER_PROFILE": "openai",
           "OPENAI_API_KEY": "", "XDG_CONFIG_HOME": str(agent_state_dir)}
    agent = raw_agent_factory(env=env)
    agent.request("initialize", {"protocolVersion": 1, "clientInfo": {"name": "toad", "version": "0.6.20"}})
    error = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["error"]
    assert error["code"] == -32000 and error["data"]["details"] == error["message"]
    assert "OPENAI_API_KEY" in error["data"]["details"] and "editor's sign-in" not in error["message"]
    assert "in a terminal" in error["message"]
    for answer in (agent.request("no/such_method", {}), agent.request("session/load", {"sessionId": 5}),
                   agent.request("session/prompt", {"sessionId": "sess_nope", "prompt": []})):
        assert answer["error"]["data"]["details"], answer
    agent.send_line("this is not json")
    assert agent.response(None)["error"]["data"]["details"]
    still_serving(agent)
    terminal = raw_agent_factory(env=env)  # a client that runs the sign-in itself is told so
    terminal.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}})
    error = terminal.request("session/new", {"cwd": str(workspace), "mcpServers": []})["error"]
    assert "the editor's sign-in runs it" in error["message"] and error["data"]["details"] == error["message"]


def test_stdin_closing_ends_the_server_cleanly(raw_agent_factory):
    agent = raw_agent_factory()
    agent.request("initialize", {"protocolVersion": 1})
    agent.close_stdin()
    assert agent.wait_exit() == 0
    assert "Traceback" not in agent.stderr_text()
