"""End to end (issue 32 §3): one ``glob`` froze every session — ``*a*a*…*b`` against a
100-character name held Python's backtracking ``re`` (and the GIL) for minutes: no result, no
cancel, no other session answered. The real server through the official ACP SDK; the timeouts
below only detect such a hang (the matching takes milliseconds)."""

import asyncio

from support.sessions import call, events, one_result_per_call
from support.timeouts import HANG  # far above what the searches take

from agent_server.offline import text_stream, tool_call_stream


async def test_one_glob_froze_every_session(acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / ("a" * 100)).write_text("x\n")
    (workspace / "victim.txt").write_text("a" * 40 + "b\n")
    freezing = "*a" * 12 + "*b"
    endpoint.push(tool_call_stream([call("g1", "glob", pattern=freezing),
                                    call("g2", "glob", pattern="**/a/" * 12 + "b"),
                                    call("r1", "grep", pattern="(a+)+$")]))
    endpoint.push(text_stream("searched"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    task = h.start_prompt(sid, "find it", timeout=HANG)
    await h.wait_for_update("tool_call", session_id=sid, timeout=HANG)
    # another session is served meanwhile, and the turn ends with every result
    other = await h.new_session(str(workspace), timeout=HANG)
    listed = await h.request("session/list", {}, timeout=HANG)
    assert other.session_id and sid in {s["sessionId"] for s in listed["sessions"]}  # (only sessions with a prompt are listed)
    assert (await asyncio.wait_for(task, HANG)).stop_reason == "end_turn"
    results = [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "tool"]
    assert results[0] == f"No files match `{freezing}` in .."
    assert results[1].startswith("No files match")
    assert results[2] == "No matches for `(a+)+$` in .."  # ripgrep: linear, no match (the b)
    one_result_per_call(events(agent_state_dir, sid))
