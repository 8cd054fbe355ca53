"""End to end: cancel at every awkward moment, then prompt again — through the official ACP SDK,
the real server, and an offline endpoint that refuses (HTTP 400, as providers do) a request with a
call that has no result or an empty assistant message (tests/e2e/conftest.py makes every endpoint
strict, and checks afterwards that ``agent-server replay`` rebuilds every request it received)."""

import asyncio
import time
import uuid

from support.acp_client import APPLY_WORKSPACE_EDIT, ClientConfig
from support.client_impl import never_answer
from support.procs import processes_naming, wait_gone
from support.sessions import FULL_ACCESS, assert_valid_history, call, config_env, events, notices, one_result_per_call

from agent_server.offline import text_stream, tool_call_stream


async def start(factory, endpoint, workspace, env=None, config=None):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})}, config=config)
    await h.initialize()
    return h, (await h.new_session(str(workspace))).session_id


def in_progress(call_id_suffix=None):
    return lambda u: u.get("status") == "in_progress"


def long_sleep() -> str:
    """A ``sleep`` far longer than any test, named uniquely (found by ``processes_naming``): only a
    working cancel ends it. How fast a cancel is answered is bench/cancel_latency.py's figure."""
    return f"{uuid.uuid4().int % 10**6 + 10**6}.8125"


async def running(marker: str) -> list[int]:
    """The processes of the command holding ``marker``, once one runs."""
    deadline = time.monotonic() + 60
    while not (found := processes_naming(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert found, "the command never started"
    return found


def turn_exits(agent_state_dir, sid) -> list[str]:
    return [e.data["exit"] for e in events(agent_state_dir, sid) if e.type == "turn/end"]


async def test_cancel_during_a_long_tool_stops_it_and_hi_sees_the_interruption(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    marker = long_sleep()
    endpoint.push(tool_call_stream([call("b1", "bash", command=f"sleep {marker}")]))
    endpoint.push(text_stream("hello again"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, config_env(tmp_path, FULL_ACCESS))
    task = h.start_prompt(sid, "run the slow thing")
    await h.wait_for_update("tool_call_update", session_id=sid, predicate=in_progress())
    command = await running(marker)  # the command is really running
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    assert wait_gone(command), "the cancel did not stop the command"
    assert turn_exits(agent_state_dir, sid) == ["cancelled"]
    assert (await h.prompt(sid, "hi")).stop_reason == "end_turn"
    messages = endpoint.requests[-1].json()["messages"]
    assert_valid_history(endpoint.requests[-1].body)
    tool = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool] == ["b1"] and tool[0]["content"].startswith("Interrupted")
    (notice,) = notices(messages)
    assert "cancelled" in notice and "bash (call b1)" in notice and "may have had part of their effect" in notice
    assert messages[-1] == {"role": "user", "content": "hi"} and messages[-2]["content"] == notice
    final = [u for u in h.updates(sid, "tool_call_update") if u.get("status") == "failed"]
    assert len(final) == 1  # the editor saw the call end too
    one_result_per_call(events(agent_state_dir, sid))


async def test_cancel_mid_stream_keeps_the_text_marks_it_cut_off_and_the_next_prompt_is_accepted(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    # 250 chunks 0.4 s apart: the stream cannot run out before a working cancel ends the turn
    endpoint.push(text_stream("partial answer " * 100, chunk_size=6, delay=0.4))
    endpoint.push(text_stream("ok"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    task = h.start_prompt(sid, "explain")
    await h.wait_for_update("agent_message_chunk", session_id=sid)
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    assert turn_exits(agent_state_dir, sid) == ["cancelled"]
    assert (await h.prompt(sid, "go on")).stop_reason == "end_turn"
    messages = endpoint.requests[-1].json()["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "user"]
    assert messages[2]["content"] and ("partial answer " * 100).startswith(messages[2]["content"])
    assert len(messages[2]["content"]) < len("partial answer " * 100), "the stream ran out before the cancel"
    assert "tool_calls" not in messages[2]
    assert "cut off" in messages[3]["content"]


async def test_cancel_mid_batch_one_committed_one_running_one_not_started_gives_every_call_one_result(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    (workspace / "a.txt").write_text("a\n")
    marker = long_sleep()
    endpoint.push(tool_call_stream([call("r1", "read", path="a.txt"), call("g1", "grep", pattern="a"),
                                    call("b1", "bash", command=f"sleep {marker}"),
                                    call("w1", "write", path="new.txt", content="x")]))
    endpoint.push(text_stream("fine"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, config_env(tmp_path, FULL_ACCESS))
    task = h.start_prompt(sid, "do four things")
    await h.wait_for_update("tool_call_update", session_id=sid, predicate=in_progress())
    await h.wait_for_update("tool_call", session_id=sid, predicate=lambda u: u.get("kind") == "execute")
    bash_id = h.updates(sid, "tool_call")[2]["toolCallId"]
    await h.wait_for_update("tool_call_update", session_id=sid,
                            predicate=lambda u: u["toolCallId"] == bash_id and u.get("status") == "in_progress")
    command = await running(marker)
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    assert wait_gone(command), "the cancel did not stop the command"
    assert not (workspace / "new.txt").exists()
    results = {e.data["call_id"]: e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"}
    assert [results[c]["status"] for c in ("r1", "g1")] == ["completed", "completed"]
    assert results["b1"]["reason"] == "interrupted" and results["w1"]["reason"] == "aborted"
    assert results["w1"]["content"].startswith("ABORTED_BEFORE_DISPATCH")
    assert (await h.prompt(sid, "what happened?")).stop_reason == "end_turn"
    (notice,) = notices(endpoint.requests[-1].json()["messages"])
    assert "did not run: write (call w1)" in notice and "bash (call b1)" in notice
    one_result_per_call(events(agent_state_dir, sid))


async def test_cancel_during_a_pending_permission_request_cancels_it_and_the_next_prompt_is_accepted(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    endpoint.push(tool_call_stream([call("b1", "bash", command="echo asked")]))
    endpoint.push(text_stream("ok"))
    env = {"AGENT_SERVER_SANDBOX": "off"}  # unconfined shell commands ask first
    h, sid = await start(acp_harness_factory, endpoint, workspace, env, ClientConfig(permission=never_answer))
    task = h.start_prompt(sid, "run echo")
    asked = await h.wait_for(lambda m: m.method == "session/request_permission" and m.kind == "request")
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"  # the question is never answered: only the cancel ends it
    cancels = [m for m in h.transcript.notifications("$/cancel_request")
               if m.message["params"]["requestId"] == asked.message["id"]]
    assert cancels, "the pending permission request was not cancelled"
    (result,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"]
    assert result["status"] == "failed" and "asked" not in result["content"]
    assert (await h.prompt(sid, "never mind")).stop_reason == "end_turn"
    assert_valid_history(endpoint.requests[-1].body)
    (notice,) = notices(endpoint.requests[-1].json()["messages"])
    assert "did not run: bash (call b1)" in notice


async def test_cancel_during_a_pending_edit_proposal_waits_for_the_editor_then_ends_cancelled(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "e.txt").write_text("old\n")
    endpoint.push(tool_call_stream([call("r1", "read", path="e.txt")]))
    endpoint.push(tool_call_stream([call("e1", "edit", path="e.txt", old_string="old", new_string="new")]))
    endpoint.push(text_stream("ok"))
    config = ClientConfig(ext_methods={APPLY_WORKSPACE_EDIT: never_answer}, agent_server_extension=True)
    h, sid = await start(acp_harness_factory, endpoint, workspace, config=config)
    task = h.start_prompt(sid, "edit it")
    proposal = await h.wait_for(lambda m: m.method == APPLY_WORKSPACE_EDIT and m.kind == "request")
    await h.cancel(sid)
    response = await task  # the proposal is never answered: only the cancel (after its grace) ends it
    assert response.stop_reason == "cancelled"
    assert any(m.message["params"]["requestId"] == proposal.message["id"]
               for m in h.transcript.notifications("$/cancel_request"))
    assert (workspace / "e.txt").read_text() == "old\n"
    edit = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result" and e.data["call_id"] == "e1"]
    assert len(edit) == 1 and edit[0]["status"] == "failed"
    assert (await h.prompt(sid, "and now?")).stop_reason == "end_turn"
    assert_valid_history(endpoint.requests[-1].body)


async def test_prompt_while_busy_is_queued_logged_and_answered_when_its_own_turn_ends(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("first " * 40, chunk_size=6, delay=0.01))
    endpoint.push(text_stream("second"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    first = h.start_prompt(sid, "one")
    await h.wait_for_update("agent_message_chunk", session_id=sid)
    second = h.start_prompt(sid, "two")
    assert (await first).stop_reason == "end_turn" and (await second).stop_reason == "end_turn"
    transcript = h.transcript.snapshot()
    prompts = h.transcript.requests("session/prompt")
    answers = [transcript.index(h.transcript.response_to(p)) for p in prompts]
    assert answers[0] < answers[1]
    second_chunks = [i for i, m in enumerate(transcript) if m.method == "session/update"
                     and m.message["params"]["update"].get("content", {}).get("text") == "second"]
    assert second_chunks and answers[0] < second_chunks[0] < answers[1]
    evts = events(agent_state_dir, sid)
    queued = [e for e in evts if e.type == "inbox/queued"]
    assert len(queued) == 1 and queued[0].data["content"] == "two"
    started = [e for e in evts if e.type == "inbox/started"]
    assert started[0].data == {"queued_seq": queued[0].seq, "turn": 2}
    assert [e.type for e in evts].index("inbox/started") < [i for i, e in enumerate(evts) if e.type == "turn/start"][1]
    assert [m["content"] for m in endpoint.requests[1].json()["messages"][1:]] == ["one", "first " * 40, "two"]


async def test_cancelled_queued_prompt_is_answered_at_once_and_logged_as_cancelled(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    # 200 chunks 0.5 s apart: the first turn cannot end by itself while the test runs
    endpoint.push(text_stream("slow " * 200, chunk_size=5, delay=0.5))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    first = h.start_prompt(sid, "one")
    await h.wait_for_update("agent_message_chunk", session_id=sid)
    queued = h.start_prompt(sid, "two")
    deadline = time.monotonic() + 60  # the server has queued it (logged)
    while not any(e.type == "inbox/queued" for e in events(agent_state_dir, sid)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await h.cancel_request(h.last_request_id("session/prompt"))
    assert (await queued).stop_reason == "cancelled"
    assert not first.done(), "the queued prompt was answered when its turn came, not at its cancel"
    await h.cancel(sid)
    assert (await first).stop_reason == "cancelled"
    evts = events(agent_state_dir, sid)
    (q,) = [e for e in evts if e.type == "inbox/queued"]
    assert [e.data for e in evts if e.type == "inbox/cancelled"] == [{"queued_seq": q.seq}]
    assert len(endpoint.requests) == 1


async def test_a_question_answered_cancelled_right_after_session_cancel_let_the_turn_go_on_to_the_model(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """ACP: on ``session/cancel`` the client answers its pending permission requests ``cancelled``
    (the Neovim plugin does, at once). The answer arrived with the cancel, and the turn took it as a
    denial, asked the model again and ended ``end_turn`` (Python 3.11's ``wait_for`` returned the
    answer and dropped the cancellation): stopping did not stop."""
    endpoint.push(tool_call_stream([call("b1", "bash", command="echo asked")]))
    endpoint.push(text_stream("went on"))
    cancelled = asyncio.Event()

    async def after_the_cancel(params):  # the client's own answer, written right after its cancel
        await cancelled.wait()
        return {"outcome": {"outcome": "cancelled"}}

    h, sid = await start(acp_harness_factory, endpoint, workspace, {"AGENT_SERVER_SANDBOX": "off"},
                         ClientConfig(permission=after_the_cancel))
    task = h.start_prompt(sid, "run echo")
    await h.wait_for(lambda m: m.method == "session/request_permission" and m.kind == "request")
    await h.cancel(sid)
    cancelled.set()
    assert (await task).stop_reason == "cancelled"
    assert len(endpoint.requests) == 1  # the model was not asked again
    (result,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"]
    assert result["status"] == "failed" and "asked" not in result["content"]
