"""Issue 31 item 15: a client's system prompt (ACP unstable ``systemPrompt``, and the older
``_meta.systemPrompt``) through the official TypeScript SDK 2.4.0 client, validated against the
vendored 1.29.x unstable schema. What the model saw is in the log (``client/system_prompt``, the
``request/header`` and ``header/note`` events): the replay check of this folder rebuilds every
request byte for byte."""

import json
import os
import subprocess
import sys

import pytest
from support.ts_harness import NODE, harness_script
from support.acp_schema import load_unstable_schema, validate_transcript

from agent_server.agent.prefix import prefix_report
from agent_server.offline import OfflineEndpoint, text_stream
from agent_server.prompt import PERSONA, TOOL_GUIDANCE
from agent_server.session import read_events



@pytest.fixture(scope="module")
def ts_harness():
    return harness_script()


def harness(ts_harness, workspace, env, tmp_path, *extra, prompt="hello", ok=True):
    transcript = tmp_path / "transcript.json"
    done = subprocess.run(
        [NODE, str(ts_harness), "--unstable", "--prompt", prompt, "--cwd", str(workspace), "--transcript",
         str(transcript), *extra, "--", sys.executable, "-m", "agent_server"],
        capture_output=True, text=True, timeout=120, env=env, cwd=workspace,
    )
    assert (done.returncode == 0) is ok, done.stdout + done.stderr
    record = json.loads(transcript.read_text())
    report = validate_transcript(record["messages"], collect=True, schema=load_unstable_schema())
    assert not report.failures, report.failures
    return record


def system_prompt(mode, text):
    return json.dumps({"systemPrompt": {"mode": mode, "content": [{"type": "text", "text": text}]}})


def systems(endpoint):
    return [r.json()["messages"][0]["content"] for r in endpoint.requests]


def test_append_system_prompt_on_session_new_reaches_the_model_after_ours(ts_harness, tmp_path, workspace,
                                                                        agent_env, agent_state_dir):
    with OfflineEndpoint.start_in_thread([text_stream("Bonjour.")]) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        record = harness(ts_harness, workspace, env, tmp_path, "--session-params",
                         system_prompt("append", "Always answer in French."))
        (system,) = systems(ep)
    advertised = record["initialize"]["agentCapabilities"]["sessionCapabilities"]["systemPrompt"]
    assert advertised == {"mode": {"override": {}}}
    assert system.startswith(PERSONA) and TOOL_GUIDANCE in system
    assert system.endswith("# Instructions from the client\nAlways answer in French.\n")
    log = read_events(agent_state_dir / "sessions" / record["sessionId"] / "events.jsonl")
    assert [(e.data["mode"], e.data["text"], e.data["source"], e.data["by"]) for e in log
            if e.type == "client/system_prompt"] == [("append", "Always answer in French.", "systemPrompt",
                                                      "session/new")]


def test_override_changed_at_load_is_a_named_break_and_an_append_changed_at_resume_is_a_note(
        ts_harness, tmp_path, workspace, agent_env, agent_state_dir):
    script = [text_stream("Arr."), text_stream("Beep."), text_stream("One."), text_stream("Two.")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        first = harness(ts_harness, workspace, env, tmp_path, "--session-params",
                        system_prompt("override", "You are a pirate."))
        pirate = first["sessionId"]
        harness(ts_harness, workspace, env, tmp_path, "--load", pirate, "--session-params",
                system_prompt("override", "You are a robot."), prompt="again")
        second = harness(ts_harness, workspace, env, tmp_path, "--session-params",
                         system_prompt("append", "Be brief."))
        harness(ts_harness, workspace, env, tmp_path, "--resume", second["sessionId"], "--session-params",
                system_prompt("append", "Be very brief."), prompt="again")
        bodies = [r.json() for r in ep.requests]
    pirate_system, robot_system, brief, still_brief = (b["messages"][0]["content"] for b in bodies)
    # override: the client's text in place of our persona and tool guidance; the environment stays
    assert pirate_system.startswith("You are a pirate.\n\n# Environment\n")
    assert PERSONA not in pirate_system and TOOL_GUIDANCE not in pirate_system
    assert robot_system == pirate_system.replace("You are a pirate.", "You are a robot.")
    events = read_events(agent_state_dir / "sessions" / pirate / "events.jsonl")
    assert prefix_report(events).breaks == {"system_prompt": 1}
    # append changed at resume: the system text is kept (a stable head), the change is a logged note
    assert still_brief == brief and brief.endswith("# Instructions from the client\nBe brief.\n")
    last = bodies[3]["messages"]
    assert last[:len(bodies[2]["messages"])] == bodies[2]["messages"]
    note = last[-2]
    assert note["role"] == "user" and note["content"].startswith("[agent-server notice] ")
    assert note["content"].endswith("# Instructions from the client\nBe very brief.\n")
    assert last[-1] == {"role": "user", "content": "again"}
    events = read_events(agent_state_dir / "sessions" / second["sessionId"] / "events.jsonl")
    assert prefix_report(events).breaks == {}
    assert [e.data["changes"] for e in events if e.type == "header/note"] == [["client"]]


def test_unsupported_system_prompt_mode_is_refused_and_creates_nothing(ts_harness, tmp_path, workspace,
                                                                      agent_env, agent_state_dir):
    env = {**os.environ, **agent_env}
    record = harness(ts_harness, workspace, env, tmp_path, "--session-params",
                     system_prompt("_replace_some", "x"), ok=False)
    (answer,) = [m["message"] for m in record["messages"] if m["message"].get("id") is not None
                 and "error" in m["message"]]
    assert answer["error"]["code"] == -32602
    assert "unsupported systemPrompt mode '_replace_some'" in answer["error"]["message"]
    assert answer["error"]["data"]["errors"] == [{"path": "systemPrompt.mode", "message": (
        "unsupported systemPrompt mode '_replace_some': agent-server supports 'append' and 'override'")}]
    assert not (agent_state_dir / "sessions").exists() or not any((agent_state_dir / "sessions").iterdir())


@pytest.mark.parametrize("meta, mode", [("Talk like a pirate.", "override"),
                                        ({"append": "Talk like a pirate."}, "append")])
def test_meta_system_prompt_of_older_clients_is_applied(ts_harness, tmp_path, workspace, agent_env,
                                                        agent_state_dir, meta, mode):
    """claude-agent-acp's ``_meta.systemPrompt``: a string replaces, ``{append}`` adds."""
    with OfflineEndpoint.start_in_thread([text_stream("Arr.")]) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        harness(ts_harness, workspace, env, tmp_path, "--session-params",
                json.dumps({"_meta": {"systemPrompt": meta}}))
        (system,) = systems(ep)
    if mode == "override":
        assert system.startswith("Talk like a pirate.\n\n# Environment\n") and PERSONA not in system
    else:
        assert system.startswith(PERSONA) and system.endswith("# Instructions from the client\nTalk like a pirate.\n")
