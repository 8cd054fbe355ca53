"""Issue 31 item 16: a model's own config options through the official TypeScript SDK 2.4.0
client — ``thought_level`` (category ``thought_level``) where the model has a reasoning-effort
parameter, and a switch, ``type: "boolean"`` for a client that advertises
``session.configOptions.boolean``, an on/off select for any other. The values reach the request
body, are logged (``config_option/changed``), and the replay check of this folder rebuilds every
request byte for byte."""

import json
import os
import subprocess
import sys

import pytest
from support.ts_harness import NODE, harness_script
from support.acp_schema import validate_transcript

from agent_server.agent.prefix import prefix_report
from agent_server.offline import OfflineEndpoint, text_stream
from agent_server.session import read_events


CONFIG = """
[[models]]
id = "test-model"
reasoning_effort = ["low", "medium", "high"]

[models.switches.thinking]
name = "Thinking"
description = "Think before answering"
on = { thinking = { type = "enabled" } }
off = { thinking = { type = "disabled" } }

[[models]]
id = "plain-model"
"""


@pytest.fixture(scope="module")
def ts_harness():
    return harness_script()


@pytest.fixture
def env(agent_env, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text(CONFIG)
    return {**os.environ, **agent_env, "AGENT_SERVER_CONFIG": str(config)}


def harness(ts_harness, workspace, env, tmp_path, *extra, prompt="hello"):
    transcript = tmp_path / "transcript.json"
    done = subprocess.run(
        [NODE, str(ts_harness), "--prompt", prompt, "--cwd", str(workspace), "--transcript", str(transcript),
         *extra, "--", sys.executable, "-m", "agent_server"],
        capture_output=True, text=True, timeout=120, env=env, cwd=workspace,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads(transcript.read_text())
    report = validate_transcript(record["messages"], collect=True)
    assert not report.failures, report.failures
    return record


def options_of(result):
    return {o["id"]: o for o in result["configOptions"]}


BOOLEAN_CLIENT = json.dumps({"fs": {"readTextFile": False, "writeTextFile": False},
                             "session": {"configOptions": {"boolean": {}}}})


def test_thought_level_and_a_boolean_switch_reach_the_request_body(ts_harness, tmp_path, workspace, env,
                                                                    agent_state_dir):
    changes = [{"configId": "thought_level", "value": "high"}, {"configId": "thinking", "type": "boolean", "value": True}]
    with OfflineEndpoint.start_in_thread([text_stream("ok")]) as ep:
        env["AGENT_SERVER_BASE_URL"] = ep.base_url
        record = harness(ts_harness, workspace, env, tmp_path, "--client-capabilities", BOOLEAN_CLIENT,
                         "--set-config", json.dumps(changes))
        (body,) = [r.json() for r in ep.requests]
    new, level, switched = (r["result"] for r in record["responses"])
    offered = options_of(new)
    assert list(offered) == ["mode", "model", "thought_level", "thinking"]
    assert offered["thought_level"]["category"] == "thought_level" and offered["thought_level"]["currentValue"] == "default"
    assert [o["value"] for o in offered["thought_level"]["options"]] == ["default", "low", "medium", "high"]
    assert offered["thinking"] == {"id": "thinking", "name": "Thinking", "category": "model_config",
                                   "description": "Think before answering", "type": "boolean", "currentValue": False}
    assert options_of(level)["thought_level"]["currentValue"] == "high"
    assert options_of(switched)["thinking"]["currentValue"] is True
    assert body["reasoning_effort"] == "high" and body["thinking"] == {"type": "enabled"}
    log = read_events(agent_state_dir / "sessions" / record["sessionId"] / "events.jsonl")
    assert [(e.data["id"], e.data["from"], e.data["to"]) for e in log if e.type == "config_option/changed"] == [
        ("thought_level", "default", "high"), ("thinking", False, True)]


def test_a_client_without_boolean_options_gets_the_switch_as_an_on_off_select(ts_harness, tmp_path, workspace, env):
    with OfflineEndpoint.start_in_thread([text_stream("ok")]) as ep:
        env["AGENT_SERVER_BASE_URL"] = ep.base_url
        record = harness(ts_harness, workspace, env, tmp_path, "--set-config",
                         json.dumps([{"configId": "thinking", "value": "on"}]))
        (body,) = [r.json() for r in ep.requests]
    new, switched = (r["result"] for r in record["responses"])
    thinking = options_of(new)["thinking"]
    assert thinking["type"] == "select" and thinking["currentValue"] == "off"
    assert [o["value"] for o in thinking["options"]] == ["on", "off"]
    assert options_of(switched)["thinking"]["currentValue"] == "on"
    assert body["thinking"] == {"type": "enabled"} and "reasoning_effort" not in body


def test_a_thought_level_change_between_turns_is_a_named_break_and_a_model_without_levels_has_none(
        ts_harness, tmp_path, workspace, env, agent_state_dir):
    with OfflineEndpoint.start_in_thread([text_stream("one"), text_stream("two"), text_stream("three")]) as ep:
        env["AGENT_SERVER_BASE_URL"] = ep.base_url
        first = harness(ts_harness, workspace, env, tmp_path)
        session = first["sessionId"]
        harness(ts_harness, workspace, env, tmp_path, "--load", session, "--set-config",
                json.dumps([{"configId": "thought_level", "value": "low"}]), prompt="again")
        last = harness(ts_harness, workspace, env, tmp_path, "--load", session, "--set-config",
                       json.dumps([{"configId": "model", "value": "plain-model"}]), prompt="plain")
        bodies = [r.json() for r in ep.requests]
    assert ["reasoning_effort" in b for b in bodies] == [False, True, False]
    assert bodies[1]["reasoning_effort"] == "low"
    assert list(options_of(last["responses"][1]["result"])) == ["mode", "model"]  # plain-model has no options
    events = read_events(agent_state_dir / "sessions" / session / "events.jsonl")
    breaks = prefix_report(events).breaks
    assert breaks.get("config_option") == 1 and "unplanned" not in breaks, breaks
