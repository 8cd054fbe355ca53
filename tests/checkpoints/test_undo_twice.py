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
    then restored files under that turn. It is refused ("A turn is running") once its turn comes."""
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
    endpoint.push({"kind": "hang", "headers": True})
    sent = len(endpoint.requests)
    turn = asyncio.create_task(h.prompt(sid, "ANOTHER TURN"))
    await until(lambda: len(endpoint.requests) > sent, "the turn's model request")
    release.set_result(None)
    assert (await asyncio.wait_for(first, HANG)).stop_reason == "end_turn"
    assert (await asyncio.wait_for(second, HANG)).stop_reason == "end_turn"
    said = "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))
    assert "A turn is running: /undo once it has ended" in said, said
    assert len(questions) == 1, questions  # the second asked nothing, restored nothing
    assert (workspace / "race.txt").read_text() == "mine\n"
    await h.cancel(sid)
    assert (await asyncio.wait_for(turn, HANG)).stop_reason == "cancelled"
