"""Two ``/undo``s at once (newcomer 4's finding 3b: a double-click in VS Code sent both before the
first was answered): both planned the same turn under the same call id, and the second said
"Nothing was undone: turn 2 is still the one /undo takes back" although the first had just undone
it — the panel's Changes box then named turn 2 while its button undid turn 1. Restores run one at a
time: the second takes back the turn before. The official ACP Python SDK client, the real server,
scripted model streams."""

from __future__ import annotations

import asyncio
import json

from support.client_impl import ClientConfig
from support.timeouts import HANG, until

from agent_server.offline import text_stream, tool_call_stream


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


async def test_two_undos_at_once_both_planned_turn_2_and_the_second_said_nothing_was_undone(
        acp_harness_factory, endpoint, workspace):
    config = ClientConfig(permission=lambda _p: {"outcome": {"outcome": "selected", "optionId": "allow_once"}})
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    for name in ("dbl1.txt", "dbl2.txt"):
        endpoint.push(call("w", "write", path=name, content=f"{name}\n"))
        endpoint.push(text_stream("done"))
        assert (await h.prompt(sid, f"WRITE {name}")).stop_reason == "end_turn"
    assert (workspace / "dbl1.txt").exists() and (workspace / "dbl2.txt").exists()

    first, second = await asyncio.gather(h.prompt(sid, "/undo"), h.prompt(sid, "/undo"))
    assert first.stop_reason == second.stop_reason == "end_turn"
    starts = [u for u in h.updates(sid, "tool_call") if u.get("title", "").startswith("Undo turn")]
    assert [u["title"] for u in starts] == ["Undo turn 2", "Undo turn 1"], starts
    assert len({u["toolCallId"] for u in starts}) == 2, starts
    said = "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))
    assert "Nothing was undone" not in said, said
    assert not (workspace / "dbl1.txt").exists() and not (workspace / "dbl2.txt").exists(), said


async def test_a_second_undo_waiting_for_the_first_ran_while_a_turn_started_meanwhile_ran(
        acp_harness_factory, endpoint, workspace):
    """The second ``/undo`` of a double-click was checked for a running turn before it waited for
    the first: a prompt sent while the first asked its question started a turn, and the second
    then restored files under that turn. Now that prompt waits behind both (see
    ``test_a_prompt_sent_while_an_undo_question_waited_started_a_turn_beside_it``): the second runs
    first, under no turn, and the turn starts after it."""
    asked, release = asyncio.Event(), asyncio.get_running_loop().create_future()
    questions: list[str] = []

    async def answer(params: dict) -> dict:
        questions.append(params["toolCall"].get("title", ""))
        if len(questions) == 1:
            asked.set()
            await release
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    config = ClientConfig(permission=answer)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    endpoint.push(call("w", "write", path="race.txt", content="agent\n"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "WRITE race.txt")).stop_reason == "end_turn"
    (workspace / "race.txt").write_text("mine\n")  # changed since: /undo asks before touching it

    first = asyncio.create_task(h.prompt(sid, "/undo"))
    await asyncio.wait_for(asked.wait(), HANG)
    second = asyncio.create_task(h.prompt(sid, "/undo"))  # waits for the first's run
    endpoint.push(text_stream("after both"))
    sent = len(endpoint.requests)
    turn = asyncio.create_task(h.prompt(sid, "ANOTHER TURN"))
    await until(lambda: turn.done() or len(endpoint.requests) > sent or any(
        "/undo" in u["content"].get("text", "") for u in h.updates(sid, "agent_message_chunk")
        if (u.get("_meta") or {}).get("agentServer", {}).get("notice")), "the prompt waiting behind the undos")
    assert len(endpoint.requests) == sent and not turn.done()
    release.set_result(None)
    assert (await asyncio.wait_for(first, HANG)).stop_reason == "end_turn"
    assert (await asyncio.wait_for(second, HANG)).stop_reason == "end_turn"
    assert (await asyncio.wait_for(turn, HANG)).stop_reason == "end_turn"
    said = "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))
    assert "A turn is running" not in said, said
    assert (workspace / "race.txt").read_text() == "mine\n"  # kept, as answered both times
    assert len(endpoint.requests) == sent + 1


async def test_a_prompt_sent_while_an_undo_question_waited_started_a_turn_beside_it(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Last session's report: while ``/undo`` asked about a file the user had changed since, the next
    prompt started a turn at once, beside the undo (the model was asked before the undo had decided
    what the files hold). A prompt sent then waits behind the ``/undo`` (a notice says so) and its
    turn starts once the undo has ended: the model's request carries the undo's notice first."""
    asked, release = asyncio.Event(), asyncio.get_running_loop().create_future()

    async def answer(params: dict) -> dict:
        asked.set()
        await release
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}  # take the checkpoint

    config = ClientConfig(permission=answer)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    endpoint.push(call("w", "write", path="race.txt", content="agent\n"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "WRITE race.txt")).stop_reason == "end_turn"
    (workspace / "race.txt").write_text("mine\n")  # changed since: /undo asks before touching it

    undo = asyncio.create_task(h.prompt(sid, "/undo"))
    await asyncio.wait_for(asked.wait(), HANG)
    sent = len(endpoint.requests)
    endpoint.push(text_stream("after the undo"))
    turn = asyncio.create_task(h.prompt(sid, "WHAT NOW"))

    def notices() -> str:
        return "".join(u["content"].get("text", "") for u in h.updates(sid, "agent_message_chunk")
                       if (u.get("_meta") or {}).get("agentServer", {}).get("notice"))

    await until(lambda: "/undo" in notices() or turn.done() or len(endpoint.requests) > sent,
                "the notice that the prompt waits for /undo")
    assert len(endpoint.requests) == sent, "the prompt's turn asked the model while /undo waited"
    assert not turn.done() and "/undo" in notices(), notices()
    release.set_result(None)
    assert (await asyncio.wait_for(undo, HANG)).stop_reason == "end_turn"
    assert (await asyncio.wait_for(turn, HANG)).stop_reason == "end_turn"
    assert not (workspace / "race.txt").exists()  # the agent's file taken back, as answered
    messages = endpoint.requests[-1].json()["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user" and "WHAT NOW" in str(m["content"]))
    undo_note = [i for i, m in enumerate(messages) if m["role"] == "user" and "The user undid" in str(m["content"])]
    assert undo_note and undo_note[-1] < last_user, messages  # the turn knows what the undo left
    log = (agent_state_dir / "sessions" / sid / "events.jsonl").read_text().splitlines()
    types = [json.loads(line)["type"] for line in log]
    assert types.index("checkpoint/undo") < len(types) - 1 - types[::-1].index("turn/start"), types


async def test_a_prompt_waiting_behind_an_undo_is_cancelled_by_session_cancel_without_a_turn(
        acp_harness_factory, endpoint, workspace):
    """The class: a prompt held behind ``/undo`` is the user's to stop, as one queued behind a turn."""
    asked, release = asyncio.Event(), asyncio.get_running_loop().create_future()

    async def answer(params: dict) -> dict:
        asked.set()
        await release
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    config = ClientConfig(permission=answer)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    endpoint.push(call("w", "write", path="keep.txt", content="agent\n"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "WRITE keep.txt")).stop_reason == "end_turn"
    (workspace / "keep.txt").write_text("mine\n")
    undo = asyncio.create_task(h.prompt(sid, "/undo"))
    await asyncio.wait_for(asked.wait(), HANG)
    sent = len(endpoint.requests)
    turn = asyncio.create_task(h.prompt(sid, "NEVER RUNS"))
    await until(lambda: turn.done() or any("/undo" in u["content"].get("text", "") for u in h.updates(
        sid, "agent_message_chunk") if (u.get("_meta") or {}).get("agentServer", {}).get("notice")), "the waiting notice")
    assert not turn.done()
    await h.cancel(sid)
    assert (await asyncio.wait_for(turn, HANG)).stop_reason == "cancelled"
    release.set_result(None)
    assert (await asyncio.wait_for(undo, HANG)).stop_reason == "end_turn"
    assert len(endpoint.requests) == sent
    assert (workspace / "keep.txt").read_text() == "mine\n"
