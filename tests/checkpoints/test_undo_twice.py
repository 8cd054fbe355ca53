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
