"""``session/new`` with a configuration that cannot be read fails at once with the clear error (file,
line, column), through the CLI and its fast ``session/new`` path — it succeeded, and the error came
only at the first prompt."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from support.fixtures import agent_server_command

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}


def session_new(tmp_path, config_text: str, fix_before_new: str | None = None, together: bool = False) -> dict:
    config = tmp_path / "config.toml"
    config.write_text(config_text)
    new = {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}}
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SERVER_", "OPENAI_", "DEEPSEEK_"))},
           "AGENT_SERVER_STATE_DIR": str(tmp_path / "state"), "AGENT_SERVER_API_KEY": "k",
           "AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1", "AGENT_SERVER_MODEL": "m",
           "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    proc = subprocess.Popen([*agent_server_command(), "--config", str(config)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
    try:
        if together:  # both in the first read: the CLI's fast initialize / session/new path
            proc.stdin.write(json.dumps(INIT) + "\n" + json.dumps(new) + "\n")
            proc.stdin.flush()
        else:
            proc.stdin.write(json.dumps(INIT) + "\n")
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 1
        if fix_before_new is not None:
            config.write_text(fix_before_new)
        if not together:
            proc.stdin.write(json.dumps(new) + "\n")
            proc.stdin.flush()
        while True:
            msg = json.loads(proc.stdout.readline())
            if msg.get("id") == 2:
                return msg
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("together", [False, True])
@pytest.mark.parametrize("text, needle", [
    ('profile = "x\n', "(at line 1, column 13)"),
    ('profile = "nosuch"\n', "config.toml (profile): unknown profile 'nosuch'"),
])
def test_session_new_with_an_unreadable_config_fails_with_the_configuration_error(tmp_path, text, needle, together):
    answer = session_new(tmp_path, text, together=together)
    assert "error" in answer, answer
    error = answer["error"]
    assert error["code"] == -32603 and error["data"]["code"] == "CONFIG_ERROR"
    assert str(tmp_path / "config.toml") in error["message"] and needle in error["message"], error
    assert not list((tmp_path / "state").rglob("*.jsonl")), "a session was created anyway"


def test_a_config_fixed_after_start_up_is_read_again_by_session_new(tmp_path):
    answer = session_new(tmp_path, 'profile = "x\n', fix_before_new="")
    assert "result" in answer and answer["result"]["sessionId"], answer
