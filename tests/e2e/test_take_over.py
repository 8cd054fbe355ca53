"""End to end: a session another agent-server process holds — refused with who holds it, then taken
over (``_meta.agentServer.takeOver``) or copied (``session/fork``), two real servers on one state
dir through the official ACP SDK."""

import pytest
from support.acp_client import ClientConfig
from support.acp_schema import load_unstable_schema
from support.client_impl import never_answer
from support.sessions import call, events

from agent_server.offline import text_stream, tool_call_stream

TAKE_OVER = {"agentServer": {"takeOver": True}}
UNSTABLE = {"schema": load_unstable_schema()}  # session/fork is unstable


async def harness(factory, endpoint):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, validate=UNSTABLE)
    await h.initialize()
    return h


async def load(h, sid, cwd, **kw):
    return await h.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": [], **kw})


def last_error(h, method):
    return h.transcript.response_to(h.transcript.requests(method)[-1]).message.get("error")


async def held_session(factory, endpoint, workspace):
    """A server holding a session with one answered prompt, whose client then went away without
    ``session/close`` (a closed code-server tab: its extension host and server live on)."""
    endpoint.push(text_stream("mine"))
    first = await harness(factory, endpoint)
    sid = (await first.new_session(str(workspace))).session_id
    await first.prompt(sid, "hello")
    return first, sid


async def test_a_closed_code_server_tab_kept_its_server_holding_the_session_and_nothing_could_take_it_over(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    first, sid = await held_session(acp_harness_factory, endpoint, workspace)
    second = await harness(acp_harness_factory, endpoint)
    with pytest.raises(Exception):
        await load(second, sid, workspace)
    error = last_error(second, "session/load")
    assert error["code"] == -32603 and error["data"]["code"] == "SESSION_BUSY"
    assert error["data"]["lockedBy"] == {"pid": first.pid, "alive": True, "answersTakeOver": True}
    assert f"open in another agent-server process (pid {first.pid})" in error["message"]
    assert "takeOver" in error["message"] and "session/fork" in error["message"]
    assert not [e for e in events(agent_state_dir, sid) if e.type == "user" and e.data["content"] != "hello"]

    await load(second, sid, workspace, _meta=TAKE_OVER)
    said = await first.wait_for_stderr(f"released session {sid}")
    assert f"releasing session {sid}: agent-server pid {second.pid} takes it over" in said
    assert f"asked pid {first.pid} to release it" in second.stderr_text()
    notice = await first.wait_for_update("agent_message_chunk", session_id=sid,
                                         predicate=lambda u: "taken over by another agent-server process" in u["content"]["text"])
    # said in structure too (newcomer finding F5: a client's status bar says so without reading text)
    update = notice.message["params"]["update"]
    assert update["_meta"]["agentServer"]["notice"] == {"severity": "warning", "takenOver": {"pid": second.pid}}
    endpoint.push(text_stream("here now"))
    assert (await second.prompt(sid, "again")).stop_reason == "end_turn"
    assert [e.data["content"] for e in events(agent_state_dir, sid) if e.type == "user"] == ["hello", "again"]
    # the first server lives on, without the session: its prompt there is refused, nothing written
    assert first.returncode is None
    with pytest.raises(Exception):
        await first.prompt(sid, "am I still here?")
    assert [e.data["content"] for e in events(agent_state_dir, sid) if e.type == "user"] == ["hello", "again"]
    await second.close()
    await first.close()


async def test_a_held_session_can_be_opened_as_a_copy_with_the_same_history(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    first, sid = await held_session(acp_harness_factory, endpoint, workspace)
    second = await harness(acp_harness_factory, endpoint)
    copy = (await second.request("session/fork", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}))
    copy_id = copy["sessionId"]
    assert copy_id != sid
    assert [e.data["content"] for e in events(agent_state_dir, copy_id) if e.type == "user"] == ["hello"]
    endpoint.push(text_stream("mine still"))
    assert (await first.prompt(sid, "more")).stop_reason == "end_turn"  # the holder keeps its session
    await second.close()
    await first.close()


async def test_a_take_over_of_a_holder_that_cannot_be_asked_is_refused_clearly(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    from agent_server.session import EventLog

    first, sid = await held_session(acp_harness_factory, endpoint, workspace)
    await first.request("session/close", {"sessionId": sid})
    held = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl")  # this test process: no SIGUSR1 handler
    try:
        second = await harness(acp_harness_factory, endpoint)
        with pytest.raises(Exception):
            await load(second, sid, workspace, _meta=TAKE_OVER)
        error = last_error(second, "session/load")
        assert error["data"]["code"] == "SESSION_BUSY"
        assert "does not answer take-over requests" in error["message"]
        assert not (agent_state_dir / "sessions" / sid / "release-request").exists()
    finally:
        held.close()
    await load(second, sid, workspace)  # released: it loads
    await second.close()
    await first.close()


async def test_a_tab_closed_while_a_permission_question_was_up_is_taken_over_its_turn_cancelled_and_question_withdrawn(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(tool_call_stream([call("b1", "bash", command="echo asked")]))
    first = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_SANDBOX": "off"},
                                      config=ClientConfig(permission=never_answer), validate=UNSTABLE)
    await first.initialize()
    sid = (await first.new_session(str(workspace))).session_id
    turn = first.start_prompt(sid, "run echo")  # unconfined: it asks, and nobody is left to answer
    asked = await first.wait_for(lambda m: m.method == "session/request_permission" and m.kind == "request")
    second = await harness(acp_harness_factory, endpoint)
    await load(second, sid, workspace, _meta=TAKE_OVER)
    assert (await turn).stop_reason == "cancelled"
    assert any(m.message["params"]["requestId"] == asked.message["id"]
               for m in first.transcript.notifications("$/cancel_request")), "the question was not withdrawn"
    said = await first.wait_for_stderr(f"released session {sid}")
    assert f"releasing session {sid}: agent-server pid {second.pid} takes it over" in said
    log = events(agent_state_dir, sid)
    (result,) = [e.data for e in log if e.type == "tool/result"]
    assert result["status"] == "failed" and "asked" not in result["content"]
    assert [e.data.get("exit") for e in log if e.type == "turn/end"] == ["cancelled"]
    endpoint.push(text_stream("taken over"))
    assert (await second.prompt(sid, "go on here")).stop_reason == "end_turn"
    assert [e.data["content"] for e in events(agent_state_dir, sid) if e.type == "user"] == ["run echo", "go on here"]
    await second.close()
    await first.close()
