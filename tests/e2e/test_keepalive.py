"""End to end: the agent keeps its connection to the model endpoint between prompts, and a prompt
whose kept connection a firewall dropped while the person typed reaches the model once, with the
bytes the log replays — no failed attempt logged, nothing twice (``support.replay_check`` rebuilds
every answered request from the log)."""

from __future__ import annotations

import asyncio

from support.sessions import events
from support.timeouts import HANG

from agent_server.offline import OfflineEndpoint, text_stream


async def _until(predicate) -> None:
    async with asyncio.timeout(HANG):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_a_prompt_whose_kept_connection_a_firewall_dropped_failed_and_was_logged_as_a_failed_attempt(
        acp_harness_factory, workspace, agent_state_dir):
    async with OfflineEndpoint([text_stream("one"), text_stream("two")], keep_alive=True) as endpoint:
        h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
        await h.initialize()
        sid = (await h.new_session(str(workspace))).session_id
        assert (await h.prompt(sid, "first")).stop_reason == "end_turn"
        await _until(lambda: endpoint.idle_connections == 1)  # the answered connection waits for the next prompt
        assert endpoint.drop_idle("reset") == 1
        assert (await h.prompt(sid, "second")).stop_reason == "end_turn"
        text = "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))
    assert text == "onetwo"
    (dropped,) = endpoint.dropped
    first, second = endpoint.requests
    assert first.connection == dropped.connection != second.connection
    assert dropped.body == second.body  # what reached the dead connection is what the model got
    log = events(agent_state_dir, sid)
    assert [e.type for e in log if e.type in ("user", "assistant", "assistant/attempt", "notice")] == [
        "user", "assistant", "user", "assistant"]
