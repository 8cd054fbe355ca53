"""End to end, through the official ACP SDK client and the real server: streamed text is coalesced
(issue 14) without losing, reordering or delaying anything that matters — every recorded provider
stream shows exactly the text and reasoning the log committed, a step's text is all out before its
tool calls, nothing of a turn comes after its answer (also when it is cancelled mid-stream), and a
log that holds per-delta ``assistant/chunk`` events loads and replays as one without them.

No timing goals here (those are in ``bench/``); the e2e ``conftest`` also checks that every model
request is rebuilt byte for byte by ``agent-server replay``.
"""

from __future__ import annotations

import json
import shutil

import pytest
from support.paths import SSE_DIR
from support.replay import replay_cli
from support.sessions import events, log_path

from agent_server.agent.replay import logged_requests
from agent_server.offline import text_stream
from agent_server.session import read_events

RECORDED = sorted(p.name for p in SSE_DIR.glob("*.txt"))
CHUNKS = ("agent_message_chunk", "agent_thought_chunk")


async def harness(factory, endpoint):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    return h


def turn_messages(h, sid):
    """The session's updates after the last ``session/prompt`` request, and whether any came after
    its response."""
    transcript = h.transcript.snapshot()
    request = h.transcript.requests("session/prompt")[-1]
    response = h.transcript.response_to(request)
    updates, late = [], []
    answered = False
    for message in transcript[transcript.index(request) + 1:]:
        if message is response:
            answered = True
        elif message.method == "session/update" and message.message["params"]["sessionId"] == sid:
            update = message.message["params"]["update"]
            if update["sessionUpdate"] != "available_commands_update":  # session/new's, sent after its answer
                (late if answered else updates).append(update)
    return updates, late


def shown(updates, kind):
    return "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == kind)


def test_every_recorded_stream_is_covered():
    assert len(RECORDED) == 8


@pytest.mark.parametrize("delay", [0, 0.002], ids=["at-once", "frame-by-frame"])
@pytest.mark.parametrize("name", RECORDED)
async def test_recorded_stream_shows_the_committed_text_and_its_tool_calls_only_after_it(
        acp_harness_factory, endpoint, workspace, agent_state_dir, name, delay):
    endpoint.push({"kind": "sse_file", "path": str(SSE_DIR / name), "chunk_delay": delay})
    endpoint.push(text_stream("Done — ✓.", chunk_size=1))  # the step after the tool calls, if any
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    response = await h.prompt(sid, "go")
    updates, late = turn_messages(h, sid)
    assert late == []  # held text is flushed before the answer
    assistant = [e.data for e in events(agent_state_dir, sid) if e.type == "assistant"]
    assert shown(updates, "agent_message_chunk") == "".join(a["text"] for a in assistant)
    assert shown(updates, "agent_thought_chunk") == "".join(a["reasoning"] for a in assistant)
    expected = json.loads((SSE_DIR / "expected.json").read_text(encoding="utf-8"))[name]
    assert assistant[0]["text"] == expected["content"] and len(assistant[0]["reasoning"]) == expected["reasoning_chars"]
    first_other = next((i for i, u in enumerate(updates) if u["sessionUpdate"] not in CHUNKS), len(updates))
    before = updates[:first_other]  # a step's text is all out before its tool calls and its usage
    assert shown(before, "agent_message_chunk") == assistant[0]["text"]
    assert shown(before, "agent_thought_chunk") == assistant[0]["reasoning"]
    if expected["tool_calls"]:
        assert response.stop_reason == "end_turn" and assistant[-1]["text"] == "Done — ✓."
        assert [u["sessionUpdate"] for u in updates].count("tool_call") == len(expected["tool_calls"])
    else:
        assert response.stop_reason == ("max_tokens" if expected["finish_reason"] == "length" else "end_turn")


async def test_a_burst_of_one_character_deltas_arrives_whole_in_fewer_notifications(
        acp_harness_factory, endpoint, workspace):
    text = "".join(chr(0x41 + i % 26) if i % 7 else "é" for i in range(4000)) + "\r\n✓"
    endpoint.push(text_stream(text, chunk_size=1, reasoning="think " * 200))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "go")).stop_reason == "end_turn"
    updates, late = turn_messages(h, sid)
    assert late == []
    chunks = [u for u in updates if u["sessionUpdate"] in CHUNKS]
    assert shown(updates, "agent_message_chunk") == text and shown(updates, "agent_thought_chunk") == "think " * 200
    kinds = [u["sessionUpdate"] for u in chunks]
    assert kinds == sorted(kinds, reverse=True)  # every thought before the answer: the order kept
    assert len(chunks) < len(text) // 10  # coalesced: not one notification per delta


async def test_cancel_mid_stream_shows_every_streamed_byte_before_the_answer(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("".join(f"w{i} " for i in range(3000)), chunk_size=2, delay=0.001))
    endpoint.push(text_stream("after"))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    task = h.start_prompt(sid, "go")
    await h.wait_for_update("agent_message_chunk", session_id=sid,
                            predicate=lambda u: len(h.agent_text(sid)) > 200)
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    updates, late = turn_messages(h, sid)
    assert late == []
    interrupted = [e.data for e in events(agent_state_dir, sid) if e.type == "assistant"]
    assert len(interrupted) == 1 and interrupted[0].get("interrupted") is True
    assert shown(updates, "agent_message_chunk") == interrupted[0]["text"]  # what the user saw is what was kept
    assert (await h.prompt(sid, "again")).stop_reason == "end_turn"


def without_ids(update):
    return {k: v for k, v in update.items() if k != "messageId"}


@pytest.mark.replay_exempt("the doctored copy is checked against the original below, not against the endpoint")
async def test_a_log_with_per_delta_chunk_events_loads_and_replays_like_one_without(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("First answer, in pieces.", chunk_size=3, reasoning="Some thought."))
    endpoint.push(text_stream("Second ✓.", chunk_size=1))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "one")
    await h.prompt(sid, "two")
    await h.close()
    original = log_path(agent_state_dir, sid)
    old_id = sid + "-old"
    copy = original.parent.parent / old_id / "events.jsonl"
    shutil.copytree(original.parent, copy.parent)
    lines, seq = [], 0
    for event in read_events(original):  # an older writer's stream detail: one event per delta
        if event.type == "assistant":
            for kind, text in (("reasoning", event.data["reasoning"]), ("text", event.data["text"])):
                for ch in text:
                    seq += 1
                    lines.append({"type": "assistant/chunk", "seq": seq, "time": event.time,
                                  "data": {"turn": event.data["turn"], "step": event.data["step"], kind: ch}})
        seq += 1
        data = {**event.data, "session_id": old_id} if event.type == "session/header" else event.data  # its own id
        lines.append({"type": event.type, "seq": seq, "time": event.time, "data": data})
    copy.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    assert sum(1 for line in lines if line["type"] == "assistant/chunk") > 30

    bodies = [r.body for r in logged_requests(read_events(original))]
    assert bodies and [r.body for r in logged_requests(read_events(copy))] == bodies
    assert [line["sha256"] for line in replay_cli(copy)] == [line["sha256"] for line in replay_cli(original)]

    shown_by = {}
    for session_id in (sid, old_id):
        h = await harness(acp_harness_factory, endpoint)
        await h.request("session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []})
        # the replay (the slash commands follow the answer: read or not by now, they are no part of it)
        shown_by[session_id] = [u for u in h.updates(session_id)
                                if u.get("sessionUpdate") != "available_commands_update"]
        await h.close()
    # the same updates; their messageIds follow each log's own seqs (the old one has more events)
    assert [without_ids(u) for u in shown_by[old_id]] == [without_ids(u) for u in shown_by[sid]]
    assert shown(shown_by[sid], "agent_message_chunk") == "First answer, in pieces.Second ✓."
