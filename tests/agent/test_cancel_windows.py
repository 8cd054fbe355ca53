"""Cancel in the narrow windows of a turn, in-process over real HTTP to a strict offline endpoint
(one that answers 400 to a call without a result, as providers do): after the assistant message
with calls is committed but before the pipeline runs them, and while the calls are being announced.
Also: a prompt that waits for the turn is logged in the inbox and cancelled alone."""

import asyncio

from support import stalling
from support.stalling import StallingEditor, stall, strict_endpoint  # noqa: F401 - the `endpoint` fixture
from support.timeouts import HANG, until

from agent_server.offline import text_stream, tool_call_stream
from agent_server.offline._validate import history_problem
from agent_server.session import derive_messages

CALLS = [("c1", "read", '{"path": "a.txt"}'), ("c2", "glob", '{"pattern": "*"}'), ("c3", "read", '{"path": "b"}')]


def make_session(tmp_path, endpoint, editor):
    (tmp_path / "a.txt").write_text("a\n")
    return stalling.make_session(tmp_path, endpoint, editor, context_window=1000, reasoning_content="drop")


async def cancel_when_stalled(session, editor, text="go"):
    task = await stall(session, editor, text)
    session.cancel()
    return await asyncio.wait_for(task, HANG)


def results(log):
    return [(e.data["call_id"], e.data.get("reason")) for e in log.events if e.type == "tool/result"]


async def test_cancel_after_the_calls_are_committed_but_before_they_run_leaves_no_dangling_call(tmp_path, endpoint):
    endpoint.push(tool_call_stream(CALLS))
    endpoint.push(text_stream("ok"))
    editor = StallingEditor(stall_on="usage_update")
    session = make_session(tmp_path, endpoint, editor)
    assert (await cancel_when_stalled(session, editor)).exit == "cancelled"
    assert results(session.log) == [("c1", "aborted"), ("c2", "aborted"), ("c3", "aborted")]
    notice = [e for e in session.log.events if e.type == "notice"][-1]
    assert notice.data["not_run"] == ["c1", "c2", "c3"] and session.log.events[-1].type == "turn/end"
    editor.stall_on = None
    assert (await session.prompt([{"type": "text", "text": "again"}])).exit == "end_turn"
    assert history_problem(endpoint.requests[-1].body) is None


async def test_cancel_while_the_calls_are_being_announced_gives_each_call_one_result(tmp_path, endpoint):
    endpoint.push(tool_call_stream(CALLS))
    endpoint.push(text_stream("ok"))
    editor = StallingEditor(stall_on="tool_call", n=2)
    session = make_session(tmp_path, endpoint, editor)
    assert (await cancel_when_stalled(session, editor)).exit == "cancelled"
    assert sorted(results(session.log)) == [("c1", "aborted"), ("c2", "aborted"), ("c3", "aborted")]
    announced = {u["toolCallId"] for u in editor.updates if u["sessionUpdate"] == "tool_call"}
    closed = {u["toolCallId"] for u in editor.updates if u["sessionUpdate"] == "tool_call_update"
              and u.get("status") == "failed"}
    assert announced <= closed  # the editor is not left with a pending call
    editor.stall_on = None
    assert (await session.prompt([{"type": "text", "text": "again"}])).exit == "end_turn"
    messages = derive_messages(session.log.events)
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool", "tool", "user", "user", "assistant"]


async def test_waiting_prompt_is_logged_in_the_inbox_and_its_cancel_does_not_touch_the_running_turn(tmp_path, endpoint):
    endpoint.push(text_stream("slow " * 100, chunk_size=5, delay=0.01))
    endpoint.push(text_stream("third"))
    editor = StallingEditor()
    session = make_session(tmp_path, endpoint, editor)
    running = asyncio.ensure_future(session.prompt([{"type": "text", "text": "one"}]))
    await until(lambda: editor.updates, "the first update")
    ticket = session.new_ticket()
    waiting = asyncio.ensure_future(session.prompt([{"type": "text", "text": "two"}], ticket))
    third = asyncio.ensure_future(session.prompt([{"type": "text", "text": "three"}]))
    await until(lambda: sum(e.type == "inbox/queued" for e in session.log.events) == 2, "both prompts in the inbox")
    ticket.cancel()
    assert (await asyncio.wait_for(waiting, HANG)).exit == "cancelled"
    assert not running.done()
    assert (await running).exit == "end_turn" and (await third).exit == "end_turn"
    inbox = [(e.type, e.data.get("content") or e.data.get("queued_seq")) for e in session.log.events
             if e.type.startswith("inbox/")]
    queued = {e.data["content"]: e.seq for e in session.log.events if e.type == "inbox/queued"}
    assert inbox == [("inbox/queued", "two"), ("inbox/queued", "three"), ("inbox/cancelled", queued["two"]),
                     ("inbox/started", queued["three"])]
    assert [m["content"] for m in derive_messages(session.log.events) if m["role"] == "user"] == ["one", "three"]


async def test_cancel_while_a_tool_call_is_half_streamed_drops_the_call_and_keeps_the_text(tmp_path, endpoint):
    endpoint.push(tool_call_stream([("c9", "write", '{"path": "x.txt", "content": "' + "y" * 400 + '"}')],
                                   text="I will write it.", args_chunk_size=8, delay=0.01))
    endpoint.push(text_stream("ok"))
    editor = StallingEditor()
    session = make_session(tmp_path, endpoint, editor)
    task = asyncio.ensure_future(session.prompt([{"type": "text", "text": "write"}]))
    await until(lambda: editor.updates, "the first update")
    await asyncio.sleep(0.1)  # argument fragments are arriving
    session.cancel()
    assert (await asyncio.wait_for(task, HANG)).exit == "cancelled"
    (assistant,) = [e.data for e in session.log.events if e.type == "assistant"]
    assert assistant["interrupted"] and assistant["tool_calls"] == [] and assistant["text"] == "I will write it."
    assert not [e for e in session.log.events if e.type in ("tool/call", "tool/result")]
    assert not (tmp_path / "x.txt").exists()
    assert (await session.prompt([{"type": "text", "text": "again"}])).exit == "end_turn"
    assert history_problem(endpoint.requests[-1].body) is None
