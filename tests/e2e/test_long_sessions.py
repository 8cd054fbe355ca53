"""End to end, long sessions (issue 14): requests come from a memo of the projection — every
request the model received must still equal the one rebuilt from the log alone by the pure
projection, across everything that rewrites the view (compaction, a refused turn, undo, fork, a
torn tail repaired on load, a load in a new process) — and ``session/load`` streams the history:
exactly the updates of the whole log, in order, nothing before a loud failure on a corrupt line."""

from __future__ import annotations

import json
import subprocess

import pytest
from support.acp_schema import load_unstable_schema
from support.client_impl import ClientConfig
from support.replay import assert_replay_matches
from support.sessions import log_path

from agent_server.host.lifecycle import history_updates
from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import read_events
from bench._logs import grow_log


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


async def harness(factory, endpoint, **kw):
    config = ClientConfig(permission="allow_once")
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config, **kw)
    await h.initialize(config.capabilities())
    return h


async def load(h, sid, cwd):
    return await h.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": []})


def replayed_before_answer(h, sid: str) -> list[dict]:
    """The ``session/update``\\s of ``sid`` the client got between the last ``session/load`` and its answer."""
    transcript = h.transcript.snapshot()
    request = h.transcript.requests("session/load")[-1]
    start = transcript.index(request)
    answered = transcript.index(h.transcript.response_to(request))
    return [m.message["params"]["update"] for m in transcript[start:answered]
            if m.method == "session/update" and m.message["params"]["sessionId"] == sid]


async def test_every_request_equals_the_full_projection_through_compaction_refusal_undo_fork_and_reload(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "a.txt").write_text("alpha\n")
    h = await harness(acp_harness_factory, endpoint, validate={"schema": load_unstable_schema()})  # fork
    sid = (await h.new_session(str(workspace))).session_id
    script = [
        ("read and shout a.txt", [call("r1", "read", path="a.txt"),
                                  call("e1", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"),
                                  text_stream("Shouted.", reasoning="a.txt has one line")]),
        ("something you will refuse", [text_stream("I can't help with that.", finish_reason="content_filter")]),
        ("after the refusal", [text_stream("Fine.")]),
        ("/undo", []),
        ("/compact", [text_stream("Task: shout a.txt. Done: read it. Open: nothing.")]),
        ("after compacting", [call("r2", "read", path="a.txt"), text_stream("It says alpha again.")]),
    ]
    for prompt, streams in script:
        for stream in streams:
            endpoint.push(stream)
        await h.prompt(sid, prompt)
    kinds = [e.type for e in read_events(log_path(agent_state_dir, sid))]
    assert {"compaction/end", "checkpoint/undo"} <= set(kinds)
    assert [e.data["exit"] for e in read_events(log_path(agent_state_dir, sid)) if e.type == "turn/end"].count("refusal") == 1

    endpoint.push(text_stream("In the fork."))
    fork = (await h.request("session/fork", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}))["sessionId"]
    await h.prompt(fork, "go on in the fork")
    await h.close()

    with open(log_path(agent_state_dir, sid), "ab") as f:  # a crash tore the last line: repaired on load
        f.write(b'{"type":"turn/start","seq":')
    again = await harness(acp_harness_factory, endpoint)
    await load(again, sid, workspace)
    for text in ("after the reload", "once more"):
        endpoint.push(text_stream(f"Answer to {text}."))
        assert (await again.prompt(sid, text)).stop_reason == "end_turn"
    await again.close()
    assert "log/repaired" in [e.type for e in read_events(log_path(agent_state_dir, sid))]
    # every body the model received, rebuilt from the logs by `agent-server replay` (the pure projection)
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == len(
        [r for r in endpoint.requests if r.path.endswith("/chat/completions")])


async def real_session(factory, endpoint, workspace) -> str:
    """A real session with what a replay shows: prompts, reasoning, text, a read, a failing call,
    a plan, a refused turn; its id."""
    (workspace / "notes.txt").write_text("line one\nline two\n")
    h = await harness(factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    plan = {"entries": [{"content": "read notes", "status": "completed"}, {"content": "answer", "status": "pending"}]}
    for stream in (call("r1", "read", path="notes.txt"), call("r2", "read", path="missing.txt"),
                   tool_call_stream([("p1", "plan", json.dumps(plan))]),
                   text_stream("It has two lines.", reasoning="counting lines")):
        endpoint.push(stream)
    await h.prompt(sid, "How long is notes.txt?")
    endpoint.push(text_stream("No.", finish_reason="content_filter"))
    await h.prompt(sid, "Say something rude")
    await h.close()
    return sid


@pytest.mark.replay_exempt("the grown log's requests were copied, never sent; the real one is checked here")
async def test_streamed_load_sends_exactly_the_updates_of_the_whole_log_on_a_real_and_a_grown_log(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    sid = await real_session(acp_harness_factory, endpoint, workspace)
    assert_replay_matches(agent_state_dir, endpoint.requests, logs=[log_path(agent_state_dir, sid)])
    grown, _ = grow_log(log_path(agent_state_dir, sid), agent_state_dir, events=3_000, cwd=str(workspace))
    h = await harness(acp_harness_factory, endpoint)
    for session in (sid, grown):
        expected = list(history_updates(read_events(log_path(agent_state_dir, session)), [str(workspace)]))
        await load(h, session, workspace)
        assert replayed_before_answer(h, session) == json.loads(json.dumps(expected))
        assert {"user_message_chunk", "agent_thought_chunk", "agent_message_chunk", "tool_call", "plan"} <= {
            u["sessionUpdate"] for u in expected}
    assert len(replayed_before_answer(h, grown)) > 500
    await h.close()


@pytest.mark.replay_exempt("the log is corrupted on purpose, and the grown one was never sent")
async def test_load_of_a_long_log_with_a_corrupt_earlier_line_fails_before_sending_any_update(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    sid = await real_session(acp_harness_factory, endpoint, workspace)
    grown, path = grow_log(log_path(agent_state_dir, sid), agent_state_dir, events=3_000, cwd=str(workspace))
    lines = path.read_bytes().split(b"\n")
    lines[2_500] = lines[2_500][:-7] + b"garbage"
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    h = await harness(acp_harness_factory, endpoint)
    with pytest.raises(Exception):
        await load(h, grown, workspace)
    request = h.transcript.requests("session/load")[-1]
    error = h.transcript.response_to(request).message["error"]
    assert error["data"]["code"] == "LOG_CORRUPT" and error["data"]["line"] == 2_501
    assert [m for m in h.transcript.snapshot() if m.method == "session/update"] == []
    assert path.read_bytes() == before
    await h.close()
