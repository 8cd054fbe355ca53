"""End to end: a stable head (issue 33 item 1). Every model request starts with the whole previous
request, byte for byte, as a provider's prefix cache sees it (the tools, then the messages): a mode
switch (also while a tool runs), an ``AGENTS.md`` change and a ``/model`` switch within the profile
are told to the model by a logged note at the point of change, never by rewriting the system message.

The fixture ``tests/fixtures/logs/stable-head-v1`` is a session log written by the code before this
change (the same scenario, recorded with ``AGENT_SERVER_RECORD_FIXTURE=1``): it must still replay
byte-exact and continue.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from support.acp_client import ClientConfig
from support.paths import FIXTURES
from support.replay import replay_cli
from support.sessions import call, config_env, events
from support.timeouts import HANG

from agent_server.agent.prefix import prefix_report
from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import read_events

FIXTURE = FIXTURES / "logs" / "stable-head-v1"
FIXTURE_WORKSPACE = Path("/tmp/agent-server-fixtures/stable-head-v1/workspace")
"""The folder the fixture's session ran in (a load must name the session's own folder)."""
AGENTS_V1 = "Run `make check` before you say a task is done.\n"
AGENTS_V2 = "Indent with tabs, never spaces.\n"
MODELS = '[[models]]\nid = "test-model"\n\n[[models]]\nid = "other-model"\n'
NO_SANDBOX = {"AGENT_SERVER_SANDBOX": "off"}


def bodies(endpoint) -> list[dict]:
    return [r.json() for r in endpoint.requests]


def extends(previous: dict, following: dict) -> bool:
    """``following`` starts with the whole of ``previous`` as a prefix cache sees it: the same
    tools, then ``previous``'s messages as its first messages."""
    n = len(previous["messages"])
    return previous.get("tools") == following.get("tools") and following["messages"][:n] == previous["messages"]


async def run_scenario(factory, endpoint, workspace: Path, tmp_path: Path) -> tuple[object, str]:
    """The session both the fixture and the acceptance test run: a tool call, a mode switch between
    turns, an AGENTS.md edit, a /model switch, a mode switch by session/set_mode, and a mode switch
    while a tool call waits for its permission. Returns the harness and the session id."""
    (workspace / "AGENTS.md").write_text(AGENTS_V1)
    (workspace / "notes.txt").write_text("hello\n")
    endpoint.push(tool_call_stream([call("r1", "read", path="notes.txt")]))
    endpoint.push(text_stream("It says hello."))  # turn 1
    endpoint.push(text_stream("Read-only now."))  # turn 2, after /mode read-only
    endpoint.push(text_stream("Tabs it is."))  # turn 3, after the AGENTS.md edit
    endpoint.push(text_stream("Another model."))  # turn 4, after /model other-model
    endpoint.push(tool_call_stream([call("b1", "bash", command="echo hi")]))  # turn 5
    endpoint.push(text_stream("Ran it."))

    asked = asyncio.Event()
    answer = asyncio.Event()

    async def permission(params):
        asked.set()
        await answer.wait()
        allow = next(o for o in params["options"] if o["kind"] == "allow_once")
        return {"outcome": {"outcome": "selected", "optionId": allow["optionId"]}}

    env = {"AGENT_SERVER_BASE_URL": endpoint.base_url, **NO_SANDBOX, **config_env(tmp_path, MODELS)}
    h = await factory(env=env, config=ClientConfig(permission=permission))
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "What does notes.txt say?")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "/mode read-only")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "Now you may only read.")).stop_reason == "end_turn"
    (workspace / "AGENTS.md").write_text(AGENTS_V2)
    assert (await h.prompt(sid, "The instructions changed.")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "/model other-model")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "Which model are you?")).stop_reason == "end_turn"
    await h.conn.set_session_mode(session_id=sid, mode_id="workspace-write")
    running = h.start_prompt(sid, "Run echo hi.")
    await asyncio.wait_for(asked.wait(), HANG)  # the bash call is logged and waits for its permission
    await h.conn.set_session_mode(session_id=sid, mode_id="danger-full-access")
    answer.set()
    assert (await asyncio.wait_for(running, HANG)).stop_reason == "end_turn"
    return h, sid


def _record_fixture(state_dir: Path, sid: str, endpoint) -> None:
    FIXTURE.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(state_dir / "sessions" / sid / "events.jsonl", FIXTURE / "events.jsonl")
    (FIXTURE / "requests.json").write_text(json.dumps({
        "session_id": sid,
        "sha256": [hashlib.sha256(r.body).hexdigest() for r in endpoint.requests],
    }, indent=1) + "\n")


async def test_mode_agents_md_and_model_switches_keep_every_request_a_prefix_of_the_next(
        acp_harness_factory, endpoint, agent_state_dir, workspace, tmp_path):
    recording = os.environ.get("AGENT_SERVER_RECORD_FIXTURE") == "1"
    if recording:
        FIXTURE_WORKSPACE.mkdir(parents=True, exist_ok=True)
        for child in FIXTURE_WORKSPACE.iterdir():
            child.unlink()
        workspace = FIXTURE_WORKSPACE
    h, sid = await run_scenario(acp_harness_factory, endpoint, workspace, tmp_path)
    if recording:
        _record_fixture(agent_state_dir, sid, endpoint)
        return
    sent = bodies(endpoint)
    assert len(sent) == 7
    for i in range(1, len(sent)):
        assert extends(sent[i - 1], sent[i]), f"request {i + 1} does not start with the whole request {i}"
    # each change is told to the model in the request after it, after the results of a running call
    for body, told, prompt in ((sent[2], "Mode: read-only", "Now you may only read."),
                               (sent[3], "Indent with tabs", "The instructions changed."),
                               (sent[4], "now go to other-model", "Which model are you?"),
                               (sent[5], "Mode: workspace-write", "Run echo hi.")):
        note, last = body["messages"][-2:]  # a change between turns is told before the prompt it preceded
        assert note["content"].startswith("[agent-server notice]") and told in note["content"]
        assert last == {"role": "user", "content": prompt}
    assert sent[4]["model"] == "other-model"
    last = sent[6]["messages"]
    assert last[-3]["tool_calls"][0]["id"] == "b1" and last[-2]["role"] == "tool"
    assert last[-1]["role"] == "user" and "danger-full-access" in last[-1]["content"]
    system = sent[0]["messages"][0]["content"]
    assert all(b["messages"][0]["content"] == system for b in sent)
    notes = [e.data["changes"] for e in events(agent_state_dir, sid) if e.type == "header/note"]
    assert notes == [["mode"], ["instructions"], ["model"], ["mode"], ["mode"]]  # no sandbox here
    report = prefix_report(events(agent_state_dir, sid))
    assert report.breaks == {} and len(report.requests) == 6 and report.share > 0.9


@pytest.mark.replay_exempt("its earlier requests were sent when the fixture was recorded: checked against it here")
async def test_a_log_written_before_the_stable_head_replays_byte_exact_and_continues(
        acp_harness_factory, endpoint, agent_state_dir, tmp_path):
    recorded = json.loads((FIXTURE / "requests.json").read_text())
    sid = recorded["session_id"]
    folder = agent_state_dir / "sessions" / sid
    folder.mkdir(parents=True, mode=0o700)
    shutil.copyfile(FIXTURE / "events.jsonl", folder / "events.jsonl")
    os.chmod(folder / "events.jsonl", 0o600)
    assert [line["sha256"] for line in replay_cli(folder / "events.jsonl")] == recorded["sha256"]
    # what the code before wrote: the system message rewritten at each mode or AGENTS.md change
    assert prefix_report(read_events(folder / "events.jsonl")).breaks == {"unplanned": 4}

    FIXTURE_WORKSPACE.mkdir(parents=True, exist_ok=True)
    if not (FIXTURE_WORKSPACE / "AGENTS.md").exists() or (FIXTURE_WORKSPACE / "AGENTS.md").read_text() != AGENTS_V2:
        (FIXTURE_WORKSPACE / "AGENTS.md").write_text(AGENTS_V2)  # as the session last read it
    endpoint.push(text_stream("Still here."))
    env = {"AGENT_SERVER_BASE_URL": endpoint.base_url, **NO_SANDBOX, **config_env(tmp_path, MODELS)}
    h = await acp_harness_factory(env=env)
    await h.initialize()
    await h.request("session/load", {"sessionId": sid, "cwd": str(FIXTURE_WORKSPACE), "mcpServers": []})
    assert (await h.prompt(sid, "Go on.")).stop_reason == "end_turn"
    previous = json.loads(replay_cli(folder / "events.jsonl")[len(recorded["sha256"]) - 1]["body"])
    (following,) = bodies(endpoint)
    assert extends(previous, following)
    lines = replay_cli(folder / "events.jsonl")
    assert [line["sha256"] for line in lines[:-1]] == recorded["sha256"]
    assert lines[-1]["sha256"] == hashlib.sha256(endpoint.requests[0].body).hexdigest()
    assert prefix_report(read_events(folder / "events.jsonl")).breaks == {"unplanned": 4}  # none added


async def test_a_compaction_renders_the_system_text_again_with_what_the_notes_it_replaced_told(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    for answer in ("First.", "Second.", "Third.", "Summary: two questions answered.", "Fourth."):
        endpoint.push(text_stream(answer))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **NO_SANDBOX})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "One?")
    await h.prompt(sid, "Two?")
    await h.prompt(sid, "/mode read-only")
    await h.prompt(sid, "Three?")
    assert (await h.prompt(sid, "/compact")).stop_reason == "end_turn"
    await h.prompt(sid, "Four?")
    sent = bodies(endpoint)
    assert "Mode: workspace-write" in sent[0]["messages"][0]["content"]
    assert sent[2]["messages"][0] == sent[0]["messages"][0] and "Mode: read-only" in sent[2]["messages"][-2]["content"]
    after = sent[4]["messages"]  # a planned break: the checkpoint replaced the history, the note included
    assert "Mode: read-only" in after[0]["content"] and "Mode: workspace-write" not in after[0]["content"]
    assert after[-1] == {"role": "user", "content": "Four?"}
    assert [e.type for e in events(agent_state_dir, sid)].count("header/note") == 1
    assert prefix_report(events(agent_state_dir, sid)).breaks == {"compaction": 1}
