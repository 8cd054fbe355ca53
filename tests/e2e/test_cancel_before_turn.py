"""End to end: a Stop pressed while a prompt still waits for what must be known before its turn
starts — MCP servers still starting (up to ``mcp_start_wait``), the sandbox probe — cancels it.
Before, ``session/cancel`` in that window was lost: the prompt waited, then ran its whole turn to
``end_turn`` (tools included), and prompts queued behind it ran too.

The window is held open by an MCP server that never answers ``initialize`` (``sleep``) with a long
``mcp_start_wait``; nothing here depends on timing but the generous timeouts that detect a hang.
"""

from __future__ import annotations

import asyncio

from support.client_impl import ClientConfig
from support.timeouts import HANG

from agent_server.offline import text_stream


async def start(factory, endpoint, workspace):
    config = workspace.parent / "slow-mcp.toml"
    config.write_text("[agent]\nmcp_start_wait = 120\n")
    client = ClientConfig()
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(config)},
                      config=client)
    await h.initialize(client.capabilities())
    never = {"name": "never", "command": "sleep", "args": ["600"], "env": []}
    return h, (await h.new_session(str(workspace), mcp_servers=[never])).session_id


async def test_session_cancel_right_after_the_first_prompt_was_lost_and_the_turn_ran(
        acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("this turn must not run"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    first = h.start_prompt(sid, "first", timeout=HANG)
    second = h.start_prompt(sid, "second, sent before the first started", timeout=HANG)
    await asyncio.sleep(0.3)  # both prompts have reached the agent and wait for the MCP server
    await h.cancel(sid)
    answers = await asyncio.wait_for(asyncio.gather(first, second), HANG)
    assert [a.stop_reason for a in answers] == ["cancelled", "cancelled"]
    assert endpoint.requests == []  # no model request was made for either prompt


async def test_session_cancel_sent_as_a_request_was_method_not_found_and_the_turn_went_on(
        acp_harness_factory, endpoint, workspace):
    """ACP makes ``session/cancel`` a notification; a client that sends it with an id got
    ``-32601 method not found`` and its Stop did nothing. It now cancels and is answered ``null``."""
    endpoint.push({"kind": "hang", "headers": True})
    client = ClientConfig()
    # the request is off the ACP schema on purpose (so is its answer): no schema check at teardown
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=client, validate=False)
    await h.initialize(client.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    task = h.start_prompt(sid, "hello", timeout=HANG)
    for _ in range(600):  # the model request is under way (the endpoint hangs on it)
        if endpoint.requests:
            break
        await asyncio.sleep(0.05)
    assert endpoint.requests, "the prompt never reached the endpoint"
    assert await h.request("session/cancel", {"sessionId": sid}, timeout=HANG) in (None, {})  # no error
    assert (await asyncio.wait_for(task, HANG)).stop_reason == "cancelled"
