"""Issue 11 §2g: cancelling a running shell command is answered, every time, and the command's
whole process tree is stopped — even a tree that ignores SIGTERM (only SIGKILL ends it: the answer
cannot come from the tree ending by itself, its sleeps outlast any test).

Real server, official ACP SDK, scripted model; 20 runs in one session, each asserted on its own.
How fast the answer comes (goal ≤ 1 s: the SIGTERM grace is short, then the group is killed) is
``bench/cancel_latency.py``'s ``shell`` figure, not asserted here.
"""

from __future__ import annotations

import asyncio
import os

from support.sessions import FULL_ACCESS, assert_valid_history, call, config_env, events, one_result_per_call

from agent_server.offline import text_stream, tool_call_stream

RUNS = 20

# a tree that ignores SIGTERM (the ignore is inherited by the children): only SIGKILL stops it
TREE = ("trap '' TERM; echo $$ > {pids}; "
        "(trap '' TERM; sleep 300 & echo $! >> {pids}; wait) & echo $! >> {pids}; "
        "sleep 300 & echo $! >> {pids}; echo started; wait")


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie waiting to be reaped counts as stopped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


async def test_cancel_of_a_running_shell_command_is_answered_every_time_and_stops_its_tree(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    for i in range(RUNS):
        pids = tmp_path / f"pids-{i}"
        endpoint.push(tool_call_stream([call(f"b{i}", "bash", command=TREE.format(pids=pids))]))
    endpoint.push(text_stream("still here"))
    env = {"AGENT_SERVER_BASE_URL": endpoint.base_url, **config_env(tmp_path, FULL_ACCESS)}
    h = await acp_harness_factory(env=env)
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    for i in range(RUNS):
        pids = tmp_path / f"pids-{i}"
        seen = len(h.transcript.snapshot())
        task = h.start_prompt(sid, f"run {i}")
        await h.wait_for_update("tool_call_update", session_id=sid, after=seen,
                                predicate=lambda u: u.get("status") == "in_progress")
        for _ in range(500):  # the whole tree is up: the shell, the subshell and both sleeps
            if pids.exists() and len(pids.read_text().split()) == 4:
                break
            await asyncio.sleep(0.01)
        tree = [int(p) for p in pids.read_text().split()]
        assert len(tree) == 4 and all(_running(p) for p in tree)
        await h.cancel(sid)
        response = await task
        assert response.stop_reason == "cancelled"
        assert not [p for p in tree if _running(p)], f"run {i}: processes of the command still run"
        (result,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"
                     and e.data["call_id"] == f"b{i}"]
        assert result["reason"] == "interrupted", result  # stopped by the cancel, not ended by itself
        assert not os.listdir(agent_state_dir / "sessions" / sid / "procs")  # the group record is released

    assert (await h.prompt(sid, "hi")).stop_reason == "end_turn"
    assert_valid_history(endpoint.requests[-1].body)
    one_result_per_call(events(agent_state_dir, sid))
