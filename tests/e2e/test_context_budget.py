"""End to end through the official ACP SDK: the token budget, compaction, CONTEXT_WINDOW_EXCEEDED,
repeated-call reminders and usage updates (issue 7, items 3–5). A small configured window
(``AGENT_SERVER_CONTEXT_WINDOW``) makes a short scripted session cross 0.8 × window; the e2e
conftest then checks that ``agent-server replay`` rebuilds every request, summaries included."""

import hashlib
import json
import time

import pytest
from acp import RequestError

from agent_server.agent.compaction import CHECKPOINT_MARKER, SUMMARY_SYSTEM
from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import derive_messages, read_events
from support.replay import replay_cli
from support.timeouts import HANG

WINDOW = "4000"  # the system prompt and tool schemas alone are ≈ 1 900 tokens
TASK = "Rename the helper in the three data files. Constraint: never touch the tests folder."
SUMMARY = "Task: rename the helper. Constraints: never touch tests/. Files: a.txt–c.txt read. Open: rename."
OVERFLOW = {"kind": "error", "status": 400, "json": {"error": {"message": "maximum context length exceeded"}}}


async def start(factory, endpoint, workspace, **env):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **env})
    await h.initialize()
    session = await h.new_session(str(workspace))
    return h, session.session_id


def events(state_dir, sid):
    return read_events(state_dir / "sessions" / sid / "events.jsonl")


def read_call(cid, path):
    return tool_call_stream([(cid, "read", json.dumps({"path": path}))])


def assert_no_call_separated_from_its_result(messages):
    open_calls = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, message
            open_calls.discard(message["tool_call_id"])
        else:
            assert not open_calls, f"calls {open_calls} have no result before {message['role']}"
            open_calls = {c["id"] for c in message.get("tool_calls") or []}
    assert not open_calls


async def test_crossing_the_threshold_compacts_into_checkpoint_plus_verbatim_tail_and_replay_holds(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    for name in "abc":
        (workspace / f"{name}.txt").write_text(f"{name} line with the helper\n" * 60)
    for i, name in enumerate("abc"):
        endpoint.push(read_call(f"r{i}", f"{name}.txt"))
    endpoint.push(text_stream(SUMMARY))
    endpoint.push(text_stream("Renamed."))
    h, sid = await start(acp_harness_factory, endpoint, workspace, AGENT_SERVER_CONTEXT_WINDOW=WINDOW)
    assert (await h.prompt(sid, TASK)).stop_reason == "end_turn"
    log = events(agent_state_dir, sid)
    kinds = [e.type for e in log]
    assert kinds.count("compaction/start") == kinds.count("compaction/summary") == kinds.count("compaction/end") == 1
    start_event = next(e for e in log if e.type == "compaction/start")
    assert start_event.data["reason"] == "threshold" and start_event.data["estimate"] > 0.8 * int(WINDOW)
    assert kinds.index("compaction/end") < len(kinds) - 1 - kinds[::-1].index("step/start")
    bodies = [r.json() for r in endpoint.requests]
    assert len(bodies) == 5 and "compaction/attempt" not in kinds
    at = 3  # three reads (≈ 3 × 400 tokens on top of ≈ 1 900) cross 0.8 × 4 000 before the fourth request
    summary_request, after = bodies[at], bodies[at + 1]
    assert summary_request["messages"][0] == {"role": "system", "content": SUMMARY_SYSTEM}
    assert "tools" not in summary_request
    assert "a line with the helper" in summary_request["messages"][1]["content"]
    # the next request: system + one checkpoint (with the task verbatim) + the verbatim tail
    system, checkpoint, *tail = after["messages"]
    assert system == bodies[0]["messages"][0]
    assert checkpoint["role"] == "user" and checkpoint["content"].startswith(CHECKPOINT_MARKER)
    assert TASK in checkpoint["content"] and SUMMARY in checkpoint["content"]
    last_step = max(e.seq for e in log if e.type == "step/start")
    uncompacted = derive_messages([e for e in log if e.type != "compaction/end" and e.seq < last_step])
    assert tail and tail == uncompacted[len(uncompacted) - len(tail):]
    assert len(tail) < len(uncompacted) - 1
    assert_no_call_separated_from_its_result(tail)
    assert len(json.dumps(after)) < len(json.dumps(bodies[at - 1]))
    # the original events stay on disk
    assert [e.data["call_id"] for e in log if e.type == "tool/result"] == ["r0", "r1", "r2"]
    # the summary is not the agent's answer; the user is told in one short line
    text = h.agent_text(sid)
    assert SUMMARY not in text and "compacted" in text and text.endswith("Renamed.")
    # replay lists and rebuilds the summarising request too
    lines = replay_cli(agent_state_dir / "sessions" / sid / "events.jsonl")
    assert [line["kind"] for line in lines] == ["step", "step", "step", "compaction", "step"]
    assert [line["sha256"] for line in lines] == [hashlib.sha256(r.body).hexdigest() for r in endpoint.requests]
    await h.close()


async def test_context_window_exceeded_once_compacts_once_and_the_step_succeeds(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("First answer about the plan."))
    endpoint.push(OVERFLOW)
    endpoint.push(text_stream(SUMMARY))
    endpoint.push(text_stream("Second answer."))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, TASK)
    assert (await h.prompt(sid, "Now do the rename.")).stop_reason == "end_turn"
    log = events(agent_state_dir, sid)
    starts = [e for e in log if e.type == "compaction/start"]
    assert len(starts) == 1 and starts[0].data["reason"] == "context_window_exceeded"
    assert [e.data["error"]["code"] for e in log if e.type == "assistant/attempt"] == ["CONTEXT_WINDOW_EXCEEDED"]
    assert len(endpoint.requests) == 4
    retried = endpoint.requests[3].json()["messages"]
    assert retried[1]["content"].startswith(CHECKPOINT_MARKER) and TASK in retried[1]["content"]
    assert retried[-1] == {"role": "user", "content": "Now do the rename."}
    assert h.agent_text(sid).endswith("Second answer.")
    await h.close()


async def test_a_second_overflow_after_compacting_ends_the_turn_with_a_clear_error(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("First answer."))
    endpoint.push(OVERFLOW)
    endpoint.push(text_stream(SUMMARY))
    endpoint.push(OVERFLOW)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, TASK)
    with pytest.raises(RequestError) as failed:
        await h.prompt(sid, "Now do the rename.")
    assert failed.value.data["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert "after compacting" in failed.value.data["message"]
    assert len(endpoint.requests) == 4  # overflow, summary, overflow: no loop
    log = events(agent_state_dir, sid)
    assert [e.type for e in log].count("compaction/start") == 1
    assert log[-1].type == "turn/end" and log[-1].data["exit"] == "error"
    await h.close()


async def test_a_tail_that_alone_overflows_ends_the_turn_with_a_clear_error_and_sends_nothing(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    # tool results are bounded by the window (a quarter of it each), so the tail that cannot fit is
    # the user's own request: pasted text larger than the whole window
    endpoint.push(text_stream("never sent"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, AGENT_SERVER_CONTEXT_WINDOW=WINDOW)
    with pytest.raises(RequestError) as failed:
        await h.prompt(sid, "Summarise this:\n" + "0123456789 abcdefghij\n" * 1000)
    assert failed.value.data["code"] == "CONTEXT_WINDOW_EXCEEDED"
    assert "the prompt alone" in failed.value.data["message"] and "(4,000 tokens)" in failed.value.data["message"]
    assert len(endpoint.requests) == 0  # neither the step nor a summary that cannot help was sent
    log = events(agent_state_dir, sid)
    assert not any(e.type.startswith("compaction/") for e in log)
    assert log[-1].type == "turn/end" and log[-1].data["error"]["code"] == "CONTEXT_WINDOW_EXCEEDED"
    # regression: the refused prompt stayed in the history, so every later prompt failed too
    assert not any(e.type == "user" for e in log)
    assert (await h.prompt(sid, "a short question")).stop_reason == "end_turn"
    users = [m["content"] for m in endpoint.requests[0].json()["messages"] if m["role"] == "user"]
    assert users == ["a short question"]
    await h.close()


async def test_compact_command_compacts_on_demand_and_the_next_request_carries_the_checkpoint(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("First answer about the plan."))
    endpoint.push(text_stream("Second answer."))
    endpoint.push(text_stream(SUMMARY))
    endpoint.push(text_stream("Third answer."))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, TASK)
    await h.prompt(sid, "Go on.")
    assert (await h.prompt(sid, "/compact")).stop_reason == "end_turn"
    assert "history was compacted" in h.agent_text(sid) and SUMMARY not in h.agent_text(sid)
    assert endpoint.requests[2].json()["messages"][0]["content"] == SUMMARY_SYSTEM
    await h.prompt(sid, "And now?")
    messages = endpoint.requests[3].json()["messages"]
    assert messages[1]["content"].startswith(CHECKPOINT_MARKER) and TASK in messages[1]["content"]
    assert all("/compact" not in str(m["content"]) for m in messages)
    log = events(agent_state_dir, sid)
    assert [e.data["reason"] for e in log if e.type == "compaction/start"] == ["command"]
    assert [e.data["name"] for e in log if e.type == "command"] == ["compact"]
    await h.close()


async def test_third_identical_read_in_a_turn_gets_the_reminder_in_its_result(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "a.txt").write_text("alpha\n")
    for i in range(3):
        endpoint.push(read_call(f"r{i}", "a.txt"))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "read a.txt")).stop_reason == "end_turn"
    results = [e.data["content"] for e in events(agent_state_dir, sid) if e.type == "tool/result"]
    assert ["reminder" in r for r in results] == [False, False, True]
    assert "call number 3 of read" in results[2]
    last = endpoint.requests[3].json()["messages"][-1]
    assert last["role"] == "tool" and "[agent-server reminder]" in last["content"]
    await h.close()


async def test_usage_update_after_each_step_has_used_at_most_size_and_cost_when_priced(
        acp_harness_factory, endpoint, workspace, tmp_path):
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(tool_call_stream([("r0", "read", json.dumps({"path": "a.txt"}))],
                                   usage={"prompt_tokens": 3000, "completion_tokens": 20, "total_tokens": 3020}))
    endpoint.push(text_stream("done", usage={"prompt_tokens": 9000, "completion_tokens": 1000, "total_tokens": 10000}))
    config = tmp_path / "config.toml"
    config.write_text('context_window = 8000\n[agent]\nprice_per_million = { input = 1.0, output = 2.0, currency = "EUR" }\n')
    h, sid = await start(acp_harness_factory, endpoint, workspace, AGENT_SERVER_CONFIG=str(config))
    assert (await h.prompt(sid, "read a.txt")).stop_reason == "end_turn"
    updates = h.updates(sid, "usage_update")
    assert len(updates) == 2  # one per step
    assert all(u["used"] <= u["size"] == 8000 for u in updates)
    # the first: the provider's 3,000 prompt tokens plus the answer as the next request carries it
    # (its tool call as JSON, about 144 characters ÷ 4), above its 20 completion tokens
    assert [u["used"] for u in updates] == [3036, 8000]
    assert updates[0]["cost"] == {"amount": pytest.approx(0.00304), "currency": "EUR"}
    assert updates[1]["cost"] == {"amount": pytest.approx(0.00304 + 0.011), "currency": "EUR"}
    await h.close()


async def test_usage_update_has_no_cost_without_a_price(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("hi"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, "hello")
    (update,) = h.updates(sid, "usage_update")
    assert "cost" not in update and 0 < update["used"] <= update["size"]
    await h.close()


async def test_cancel_during_compact_answers_cancelled_and_replaces_nothing(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    import asyncio

    endpoint.push(text_stream("First answer about the plan."))
    endpoint.push(text_stream("Second answer."))
    endpoint.push(text_stream(SUMMARY * 40, chunk_size=4, delay=0.02))  # a slow summary
    endpoint.push(text_stream("Still here."))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, TASK)
    await h.prompt(sid, "Go on.")
    task = h.start_prompt(sid, "/compact")
    deadline = time.monotonic() + HANG
    while len(endpoint.requests) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    assert (await h.prompt(sid, "And now?")).stop_reason == "end_turn"
    messages = endpoint.requests[3].json()["messages"]
    assert not any(str(m["content"]).startswith(CHECKPOINT_MARKER) for m in messages)
    assert messages[1]["content"] == TASK  # the history is whole
    log = events(agent_state_dir, sid)
    ends = [e.data for e in log if e.type == "compaction/end"]
    assert len(ends) == 1 and ends[0].get("aborted") and "message" not in ends[0]


def long_answer(paragraphs=5000):
    """A markdown answer of ≈ 375 KB (≈ 91k tokens at 4 characters a token): finding 3's ``LONG 5000``."""
    parts = []
    for i in range(paragraphs):
        if i % 50 == 0:
            parts.append(f"\n## Section {i // 50}\n\n")
        parts.append(f"Line {i}: some *markdown* text with `code` and more words ünïcödé.\n\n")
    return "".join(parts)


async def test_the_context_meter_said_6_percent_after_an_answer_that_filled_the_window(
        acp_harness_factory, endpoint, workspace):
    """Finding 3: after a 375 KB answer in a 32,768-token window (a provider that reports no usage)
    the meter read ``used`` 1,952: the request's estimate, without the answer it carried back."""
    endpoint.push(text_stream(long_answer(), chunk_size=4096, include_usage=False))
    h, sid = await start(acp_harness_factory, endpoint, workspace, AGENT_SERVER_CONTEXT_WINDOW="32768")
    assert (await h.prompt(sid, "LONG 5000")).stop_reason == "end_turn"
    (update,) = h.updates(sid, "usage_update")
    assert update["size"] == 32768 and update["used"] == 32768  # the next request carries the answer: full
    await h.close()


async def test_the_context_meter_counts_what_the_answer_added_to_the_providers_prompt_count(
        acp_harness_factory, endpoint, workspace):
    """The same with a provider that counts its prompt but reports no completion: the answer's
    characters are added to its count."""
    endpoint.push(text_stream("x" * 40_000, chunk_size=4096, usage={"prompt_tokens": 2000}))
    h, sid = await start(acp_harness_factory, endpoint, workspace, AGENT_SERVER_CONTEXT_WINDOW="32768")
    assert (await h.prompt(sid, "write a lot")).stop_reason == "end_turn"
    (update,) = h.updates(sid, "usage_update")
    assert 2000 + 40_000 / 4 <= update["used"] < 2000 + 40_000 / 4 + 100
    await h.close()


async def test_one_huge_answer_made_every_later_prompt_fail_because_the_compaction_grew_the_history(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Finding 3: after a 375 KB answer, the next prompt's compaction got a summary as long as the
    answer (a model that ignores the summary's budget; the report's echoed the transcript) and
    logged the compaction done although it made the history larger (about 90,916 → 90,976
    tokens); that prompt and every later one then failed "still too large"."""
    answer = long_answer()
    endpoint.push(text_stream(answer, chunk_size=4096, include_usage=False))
    endpoint.push(text_stream(answer, chunk_size=4096, include_usage=False))  # the "summary"
    endpoint.push(text_stream("Second answer."))
    endpoint.push(text_stream("Third answer."))
    h, sid = await start(acp_harness_factory, endpoint, workspace, AGENT_SERVER_CONTEXT_WINDOW="32768")
    assert (await h.prompt(sid, "LONG 5000")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "SLOW 100 0.1")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "and now?")).stop_reason == "end_turn"
    log = events(agent_state_dir, sid)
    (start_event,) = [e for e in log if e.type == "compaction/start"]
    (end,) = [e for e in log if e.type == "compaction/end"]
    assert len(end.data["message"]) < 0.1 * 32768 * 4 + 1000  # the summary cut to its budget
    announced = [u["_meta"]["agentServer"]["compaction"] for u in h.updates(sid, "agent_message_chunk")
                 if "compaction" in (u.get("_meta") or {}).get("agentServer", {})]
    (change,) = announced
    assert change["tokensAfter"] < change["tokensBefore"] and change["tokensAfter"] < 0.8 * 32768
    sent = endpoint.requests[2].json()["messages"]
    assert sent[1]["content"].startswith(CHECKPOINT_MARKER) and sent[-1] == {"role": "user", "content": "SLOW 100 0.1"}
    assert len(endpoint.requests) == 4
    await h.close()


async def test_an_answer_larger_than_the_window_in_the_middle_of_a_turn_is_compacted_whole(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The class of finding 3 within a turn: the newest answer (≈ 15k tokens, a call at its end)
    alone does not fit an 8,000-token window; the compaction replaces all of it — its transcript
    cuts it, the summary stands for it — instead of ending the turn "the most recent part of the
    conversation alone does not fit"."""
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(tool_call_stream([("r0", "read", json.dumps({"path": "a.txt"}))], text="word " * 12_000))
    endpoint.push(text_stream(SUMMARY))
    endpoint.push(text_stream("Done."))
    h, sid = await start(acp_harness_factory, endpoint, workspace, AGENT_SERVER_CONTEXT_WINDOW="8000")
    assert (await h.prompt(sid, TASK)).stop_reason == "end_turn"
    log = events(agent_state_dir, sid)
    (start_event,) = [e for e in log if e.type == "compaction/start"]
    assert start_event.data["kept_messages"] == 0
    system, checkpoint = endpoint.requests[2].json()["messages"]
    assert checkpoint["role"] == "user" and checkpoint["content"].startswith(CHECKPOINT_MARKER)
    assert TASK in checkpoint["content"] and SUMMARY in checkpoint["content"]
    assert h.agent_text(sid).endswith("Done.")
    await h.close()
