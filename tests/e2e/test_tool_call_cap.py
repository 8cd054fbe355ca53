"""End to end (issue 32 §7): a model answer with 10,000 tool calls took 658 s (every call walked
the turn) while ``session/list`` took 7.8 s. Calls past ``[agent] max_tool_calls_per_step``
(default 64) are dropped at assembly, logged, and one notice tells the model how many; the real
server, the official ACP SDK, the offline endpoint (whose requests the e2e conftest replays from
the log, byte for byte)."""

import json

from support.sessions import config_env, events, one_result_per_call

from agent_server.offline import text_stream, tool_call_stream


def reads(n):
    return [(f"c{i}", "read", json.dumps({"path": "a.txt", "offset": i % 3 + 1})) for i in range(n)]


async def start(factory, endpoint, workspace, env=None):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})})
    await h.initialize()
    return h, (await h.new_session(str(workspace))).session_id


async def test_10000_tool_calls_in_one_answer_run_64_and_tell_the_model_the_rest_were_dropped(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    endpoint.push(tool_call_stream(reads(10_000)))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "read it all", timeout=300)).stop_reason == "end_turn"
    messages = endpoint.requests[-1].json()["messages"]
    assert len(messages[2]["tool_calls"]) == 64
    tool = [m for m in messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool] == [f"c{i}" for i in range(64)]
    notice = messages[-1]["content"]
    assert messages[-1]["role"] == "user" and messages[-2] == tool[-1]
    assert notice.startswith("[agent-server notice] Your last answer made 10,000 tool calls; only the first 64")
    assert "9,936 were dropped and did not run" in notice
    logged = events(agent_state_dir, sid)
    (answer,) = [e for e in logged if e.type == "assistant"][:1]
    assert answer.data["dropped_tool_calls"] == 9_936 and len(answer.data["tool_calls"]) == 64
    assert sum(e.type == "tool/call" for e in logged) == 64
    assert sum(1 for u in h.updates(sid, "tool_call")) == 64  # the editor never saw the dropped ones
    assert "9,936 tool calls of this answer were dropped" in h.agent_text(sid)
    one_result_per_call(logged)


async def test_max_tool_calls_per_step_is_configurable(acp_harness_factory, endpoint, workspace, tmp_path):
    (workspace / "a.txt").write_text("one\ntwo\nthree\n")
    endpoint.push(tool_call_stream(reads(5)))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace,
                         config_env(tmp_path, "[agent]\nmax_tool_calls_per_step = 3\n"))
    assert (await h.prompt(sid, "read")).stop_reason == "end_turn"
    messages = endpoint.requests[-1].json()["messages"]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == ["c0", "c1", "c2"]
    assert "made 5 tool calls; only the first 3 were run" in messages[-1]["content"]
