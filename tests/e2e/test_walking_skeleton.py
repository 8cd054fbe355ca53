"""End to end: the official ACP Python SDK spawns the real ``agent-server``, which streams a real
recorded provider stream from the offline endpoint over HTTP on 127.0.0.1.

Every transcript is validated against the official ACP schema at teardown (``acp_harness_factory``).
"""

import json
from pathlib import Path
from types import SimpleNamespace


from agent_server.agent import attempt_steps, request_body
from agent_server.llm import encode_body
from agent_server.offline import text_stream
from agent_server.session import read_events

from support.paths import SSE_DIR as SSE


def session_log(state_dir: Path, session_id: str) -> SimpleNamespace:
    """The session's log read without changing it (the server may still hold it open)."""
    path = state_dir / "sessions" / session_id / "events.jsonl"
    return SimpleNamespace(path=path, events=read_events(path))


def index_of(transcript, predicate):
    return next(i for i, m in enumerate(transcript) if predicate(m))


async def test_prompt_streams_chunk_by_chunk_and_ends_turn(acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push({"kind": "sse_file", "path": str(SSE / "azure-router-empty-first-chunk.txt"), "chunk_delay": 0.01})
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    init = await h.initialize()
    assert init.protocol_version == 1
    session = await h.new_session(str(workspace))
    response = await h.prompt(session.session_id, "What is Copenhagen?")
    assert response.stop_reason == "end_turn"
    chunks = h.updates(session.session_id, "agent_message_chunk")
    assert len(chunks) > 1  # streamed, not delivered whole
    assert h.agent_text(session.session_id) == "Capital of Denmark."
    # what the user saw is what the log committed
    log = session_log(agent_state_dir, session.session_id)
    assistant = [e for e in log.events if e.type == "assistant"]
    assert [a.data["text"] for a in assistant] == ["Capital of Denmark."]
    assert log.events[-1].type == "turn/end" and log.events[-1].data["exit"] == "end_turn"


async def test_reasoning_streams_as_thought_chunks(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("Answer.", reasoning="First I consider the question.", chunk_size=6))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    session = await h.new_session(str(workspace))
    await h.prompt(session.session_id, "q")
    thoughts = h.updates(session.session_id, "agent_thought_chunk")
    assert "".join(u["content"]["text"] for u in thoughts) == "First I consider the question."
    assert len(thoughts) > 1


async def test_no_update_before_session_new_response_or_after_prompt_response(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("one two three four", chunk_size=3))
    endpoint.push(text_stream("five six", chunk_size=3))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    session = await h.new_session(str(workspace))
    await h.prompt(session.session_id, "first")
    await h.prompt(session.session_id, "second")
    transcript = h.transcript.snapshot()
    sid = session.session_id
    new_request = h.transcript.requests("session/new")[0]
    new_response_at = transcript.index(h.transcript.response_to(new_request))
    updates_at = [i for i, m in enumerate(transcript)
                  if m.method == "session/update" and m.message["params"]["sessionId"] == sid]
    assert updates_at and min(updates_at) > new_response_at
    prompts = h.transcript.requests("session/prompt")
    first_answer = transcript.index(h.transcript.response_to(prompts[0]))
    second_request = transcript.index(prompts[1])
    # no update of turn 1 after its response: every update is before it or belongs to turn 2
    assert all(i < first_answer or i > second_request for i in updates_at)
    assert max(updates_at) < transcript.index(h.transcript.response_to(prompts[1]))


async def test_log_on_disk_rebuilds_every_request_body_byte_for_byte(acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push({"kind": "error", "status": 500, "json": {"error": {"message": "boom"}}})
    endpoint.push({"kind": "sse_file", "path": str(SSE / "deepseek-reasoner-tool-call.txt")})
    endpoint.push(text_stream("The weather tool is not available here."))
    endpoint.push(text_stream("Bye ✓ — 😀"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_PROFILE": "deepseek"})
    await h.initialize()
    session = await h.new_session(str(workspace))
    assert (await h.prompt(session.session_id, "weather in SF? ünïcödé")).stop_reason == "end_turn"
    assert (await h.prompt(session.session_id, "thanks")).stop_reason == "end_turn"
    await h.close()
    log = session_log(agent_state_dir, session.session_id)
    rebuilt = [encode_body(request_body(log.events, seq)) for seq in attempt_steps(log.events)]
    received = [r.body for r in endpoint.requests]
    assert len(received) == 4
    assert rebuilt == received
    last = json.loads(received[-1])
    assert last["messages"][2]["reasoning_content"]  # deepseek profile echoes reasoning
    assert "test-key" not in (log.path).read_text()


async def test_session_cancel_and_cancel_request_both_answer_cancelled(acp_harness_factory, endpoint, workspace, agent_state_dir):
    for _ in range(2):
        endpoint.push(text_stream("slow " * 400, chunk_size=5, delay=0.02))
    endpoint.push(text_stream("after"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    session = await h.new_session(str(workspace))
    sid = session.session_id
    task = h.start_prompt(sid, "go")
    await h.wait_for_update("agent_message_chunk", session_id=sid)
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    seen = len(h.transcript.snapshot())
    task = h.start_prompt(sid, "again")
    await h.wait_for_update("agent_message_chunk", session_id=sid, after=seen)
    await h.cancel_request(h.last_request_id("session/prompt"))
    assert (await task).stop_reason == "cancelled"
    assert (await h.prompt(sid, "still there?")).stop_reason == "end_turn"
    exits = [e.data["exit"] for e in session_log(agent_state_dir, sid).events if e.type == "turn/end"]
    assert exits == ["cancelled", "cancelled", "end_turn"]
