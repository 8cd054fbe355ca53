"""End to end: ``grep`` over a minified file whose one line is 14.5 MB (800,000 matches) — the real
server through the official ACP SDK, an offline endpoint scripted to call ``grep``. It once froze
the whole server (a quadratic offset computation on the event loop): no result, ``session/cancel``
never answered, SIGTERM ignored. The timeouts below only detect such a hang."""

import asyncio

import pytest
from support.sessions import call, events, one_result_per_call
from support import timeouts

from agent_server.offline import text_stream, tool_call_stream

HANG = 2 * timeouts.HANG  # far above the few seconds the search takes


@pytest.fixture
def bundle(workspace):
    path = workspace / "bundle.min.js"
    path.write_text("".join("function f%d(a){return a+%d};" % (i, i) for i in range(400000)))
    return path


async def start(factory, endpoint, workspace):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    return h, (await h.new_session(str(workspace))).session_id


async def test_grep_over_a_14_mb_one_line_file_froze_the_server_and_gave_no_result(
        acp_harness_factory, endpoint, workspace, bundle, agent_state_dir):
    endpoint.push(tool_call_stream([call("g1", "grep", pattern="a", path="bundle.min.js")]))
    endpoint.push(text_stream("found it"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    response = await asyncio.wait_for(h.prompt(sid, "where is a?", timeout=HANG), HANG)
    assert response.stop_reason == "end_turn"
    (result,) = [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "tool"]
    assert result.startswith("bundle.min.js:1: function f0(a){return a+0};"), result[:200]
    assert "[long line: 14,577,780 characters, showing 1-500; 799,999 more matches in this line]" in result
    assert len(result) < 1000  # a bounded excerpt, not the line
    one_result_per_call(events(agent_state_dir, sid))


async def test_grep_over_a_14_mb_one_line_file_froze_the_server_and_ignored_cancel(
        acp_harness_factory, endpoint, workspace, bundle):
    endpoint.push(tool_call_stream([call("g1", "grep", pattern="a", path="bundle.min.js")]))
    endpoint.push(text_stream("still answering " * 400, chunk_size=8, delay=0.05))  # the turn lasts
    endpoint.push(text_stream("hello again"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    task = h.start_prompt(sid, "where is a?", timeout=HANG)
    await h.wait_for_update("tool_call_update", session_id=sid, predicate=lambda u: u.get("status") == "in_progress")
    await asyncio.sleep(3)  # ripgrep has written the line's record by now: the server is parsing it
    await h.cancel(sid)
    response = await asyncio.wait_for(task, HANG)
    assert response.stop_reason == "cancelled"
    second = await asyncio.wait_for(h.prompt(sid, "hi", timeout=HANG), HANG)  # the server still answers
    assert second.stop_reason == "end_turn"
    assert endpoint.requests[-1].json()["messages"][-1] == {"role": "user", "content": "hi"}
