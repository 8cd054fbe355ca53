"""End to end: the tool loop through the official ACP Python SDK, the real server, real tools in a
real workspace, and scripted model streams from the offline endpoint over HTTP.

Transcripts are schema-validated at teardown; every test checks the log rebuilds the requests.
"""

import json
import shutil
from pathlib import Path


from agent_server.agent import attempt_steps, request_body
from agent_server.llm import encode_body
from agent_server.offline import text_stream, tool_call_stream
from agent_server.offline.demo_task import demo_task_script, write_project
from agent_server.session import EventLog

from support.paths import FILES_DIR as FILES


def load_log(state_dir, sid):
    return EventLog.open(state_dir / "sessions" / sid / "events.jsonl")


def assert_replay(log, endpoint):
    rebuilt = [encode_body(request_body(log.events, seq)) for seq in attempt_steps(log.events)]
    assert rebuilt == [r.body for r in endpoint.requests]


def assert_one_result_per_call(log):
    calls = [e.data["call_id"] for e in log.events if e.type == "tool/call"]
    results = [e.data["call_id"] for e in log.events if e.type == "tool/result"]
    assert sorted(calls) == sorted(results) and len(set(results)) == len(results)


def call(cid, name, **args):
    return (cid, name, json.dumps(args))


async def start(factory, endpoint, workspace, env=None):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})})
    await h.initialize()
    session = await h.new_session(str(workspace))
    return h, session.session_id


async def test_read_run_edit_run_in_one_turn_and_the_failing_output_reaches_the_model(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    write_project(workspace)
    for response in demo_task_script():
        endpoint.push(response)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    response = await h.prompt(sid, "The tests fail. Fix the bug.")
    assert response.stop_reason == "end_turn"
    assert "    return a + b\n" in (workspace / "calc.py").read_text()
    bodies = [r.json() for r in endpoint.requests]
    assert len(bodies) == 6
    failing = bodies[2]["messages"][-1]
    assert failing["role"] == "tool" and failing["tool_call_id"] == "call_test1"
    assert "FAIL: add(2, 3) == -1, expected 5" in failing["content"] and "exit code: 1" in failing["content"]
    passing = bodies[4]["messages"][-1]
    assert "ok" in passing["content"] and "exit code: 0" in passing["content"]
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == ["read", "write", "edit", "bash", "glob", "grep", "plan"]
    # the editor saw every call: pending → … → completed/failed, ids unique, kinds and diff right
    calls = h.updates(sid, "tool_call")
    assert [c["kind"] for c in calls] == ["read", "execute", "edit", "execute", "search"]
    assert calls[0]["title"] == "Read calc.py" and calls[1]["title"] == "Run the tests"
    assert len({c["toolCallId"] for c in calls}) == 5
    finals = [u for u in h.updates(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["completed", "failed", "completed", "completed", "completed"]
    diff = [c for c in finals[2]["content"] if c["type"] == "diff"][0]
    assert diff["path"] == str(workspace / "calc.py") and "a + b" in diff["newText"] and "a - b" in diff["oldText"]
    await h.close()
    log = load_log(agent_state_dir, sid)
    assert_one_result_per_call(log)
    assert_replay(log, endpoint)


async def test_step_budget_ends_the_turn_max_turn_requests_and_says_so(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    (workspace / "a.txt").write_text("a\n")
    for i in range(3):
        endpoint.push(tool_call_stream([call(f"c{i}", "read", path="a.txt")]))
    endpoint.push(text_stream("ok, stopping"))
    config = tmp_path / "config.toml"
    config.write_text("[agent]\nmax_steps_per_turn = 3\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace, {"AGENT_SERVER_CONFIG": str(config)})
    assert (await h.prompt(sid, "loop forever")).stop_reason == "max_turn_requests"
    assert "Stopped after 3 model requests" in h.agent_text(sid)
    assert len(endpoint.requests) == 3
    assert (await h.prompt(sid, "why did you stop?")).stop_reason == "end_turn"
    last = endpoint.requests[-1].json()["messages"]
    notice = [m for m in last if m["role"] == "user" and "agent-server notice" in m["content"]]
    assert len(notice) == 1 and "limit of 3 model requests" in notice[0]["content"]
    await h.close()
    log = load_log(agent_state_dir, sid)
    assert_one_result_per_call(log)
    assert_replay(log, endpoint)


async def test_huge_file_and_huge_command_output_are_bounded_and_the_model_is_told_where_the_rest_is(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "big.min.js").write_text("x" * 2_000_000)
    endpoint.push(tool_call_stream([call("r", "read", path="big.min.js"),
                                    call("b", "bash", command="python3 -c \"print('y' * 5_000_000)\"")]))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "look")).stop_reason == "end_turn"
    second = endpoint.requests[1]
    assert len(second.body) < 120_000  # the next request fits
    read_msg, bash_msg = [m for m in second.json()["messages"] if m["role"] == "tool"]
    assert "2,000,000" in read_msg["content"] or "2000000" in read_msg["content"]
    assert "x" * 2000 in read_msg["content"] and "x" * 2001 not in read_msg["content"]
    assert "cut" in bash_msg["content"]
    await h.close()
    log = load_log(agent_state_dir, sid)
    result = [e for e in log.events if e.type == "tool/result" and e.data["call_id"] == "b"][0]
    spill = Path(result.data["spill"])
    assert str(spill) in bash_msg["content"]
    assert spill.read_text().count("y") == 5_000_000
    assert_replay(log, endpoint)


async def test_length_finish_after_a_complete_looking_call_never_runs_it(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    stream = tool_call_stream([call("w", "write", path="victim.txt", content="boom")])
    for frame in stream["frames"]:
        for choice in frame.get("choices", []):
            if choice.get("finish_reason") == "tool_calls":
                choice["finish_reason"] = "length"
    endpoint.push(stream)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "write it")).stop_reason == "max_tokens"
    assert not (workspace / "victim.txt").exists()
    assert h.updates(sid, "tool_call") == []


async def test_crlf_file_edited_with_lf_old_string_keeps_crlf_byte_for_byte(
        acp_harness_factory, endpoint, workspace):
    name = "crlf__cpython-3.11.7__Lib_venv_scripts_common_Activate.ps1"
    original = (FILES / name).read_bytes()
    shutil.copy(FILES / name, workspace / "Activate.ps1")
    old = "function global:deactivate ([switch]$NonDestructive) {"
    assert original.count(old.encode()) == 1
    endpoint.push(tool_call_stream([call("r", "read", path="Activate.ps1")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="Activate.ps1", old_string=old + "\n",
                                         new_string=old + "\n    # edited by the agent\n")]))
    endpoint.push(text_stream("edited"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "add a comment")).stop_reason == "end_turn"
    expected = original.replace((old + "\r\n").encode(), (old + "\r\n    # edited by the agent\r\n").encode())
    assert (workspace / "Activate.ps1").read_bytes() == expected


async def test_parallel_safe_calls_commit_in_call_order(acp_harness_factory, endpoint, workspace, agent_state_dir):
    for i in range(30):
        (workspace / f"f{i}.py").write_text(f"value = {i}\n" * 50)
    endpoint.push(tool_call_stream([call("g", "grep", pattern="value"), call("r", "read", path="f1.py"),
                                    call("l", "glob", pattern="*.py")]))
    endpoint.push(text_stream("seen"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "survey")).stop_reason == "end_turn"
    announced = [c["toolCallId"] for c in h.updates(sid, "tool_call")]
    finished = [u["toolCallId"] for u in h.updates(sid, "tool_call_update") if u["status"] == "completed"]
    assert finished == announced
    tool_ids = [m["tool_call_id"] for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"]
    assert tool_ids == ["g", "r", "l"]


async def test_write_outside_the_workspace_is_refused_and_the_reason_logged(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    outside = tmp_path / "outside.txt"
    (workspace / "link").symlink_to(tmp_path)
    endpoint.push(tool_call_stream([call("a", "write", path=str(outside), content="x"),
                                    call("b", "write", path="link/outside.txt", content="x"),
                                    call("c", "write", path="../outside.txt", content="x")]))
    endpoint.push(text_stream("refused"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "write outside")).stop_reason == "end_turn"
    assert not outside.exists()
    tools = [m for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"]
    assert all(m["content"].startswith("Refused:") and "outside the workspace" in m["content"] for m in tools)
    await h.close()
    decisions = [e.data for e in load_log(agent_state_dir, sid).events if e.type == "policy/decision"]
    assert [d["outcome"] for d in decisions] == ["deny", "deny", "deny"]


async def test_plan_tool_sends_the_whole_list_as_an_acp_plan_update(acp_harness_factory, endpoint, workspace, agent_state_dir):
    entries = [{"content": "Read the code", "status": "completed"},
               {"content": "Fix the bug", "status": "in_progress", "priority": "high"}]
    endpoint.push(tool_call_stream([call("p", "plan", entries=entries)]))
    endpoint.push(text_stream("planned"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "plan it")).stop_reason == "end_turn"
    (plan,) = h.updates(sid, "plan")
    assert plan["entries"] == [{"content": "Read the code", "status": "completed", "priority": "medium"},
                               {"content": "Fix the bug", "status": "in_progress", "priority": "high"}]
    assert "[in_progress] Fix the bug" in endpoint.requests[1].json()["messages"][-1]["content"]
    await h.close()
    assert_replay(load_log(agent_state_dir, sid), endpoint)



async def test_bash_printing_without_end_filled_the_disk_through_its_spill_file(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    # `yes` wrote 623 MB to the spill folder in 15 s; one call now saves at most 16 MiB (the default)
    cap = 16 * 1024 * 1024
    endpoint.push(tool_call_stream([call("y", "bash", command="yes", timeout_ms=5000)]))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "print forever")).stop_reason == "end_turn"
    await h.close()
    spill_dir = agent_state_dir / "sessions" / sid / "spill"
    assert sum(f.stat().st_size for f in spill_dir.iterdir()) == cap
    log = load_log(agent_state_dir, sid)
    result = [e for e in log.events if e.type == "tool/result" and e.data["call_id"] == "y"][0]
    meta = result.data["meta"]
    assert meta["outcome"] == "timeout" and meta["spill_bytes"] == cap
    dropped = meta["output_bytes"] - cap
    assert dropped > 0 and meta["spill_dropped_bytes"] == dropped  # `yes` went on: the pipe was drained
    seen = [m for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"][0]["content"]
    assert f"{dropped:,} bytes were dropped" in seen and f"first {cap:,} bytes" in seen
    assert_replay(log, endpoint)


async def test_max_spill_bytes_of_the_config_caps_what_one_command_saves(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[agent]\nmax_spill_bytes = 3000000\n")
    endpoint.push(tool_call_stream([call("y", "bash", command="yes | head -c 20000000")]))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, {"AGENT_SERVER_CONFIG": str(config)})
    assert (await h.prompt(sid, "print a lot")).stop_reason == "end_turn"
    await h.close()
    (spilled,) = (agent_state_dir / "sessions" / sid / "spill").iterdir()
    assert spilled.read_bytes() == b"y\n" * 1_500_000  # the output's first 3,000,000 bytes
    seen = [m for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"][0]["content"]
    assert "17,000,000 bytes were dropped" in seen and "exit code: 0" in seen
    assert_replay(load_log(agent_state_dir, sid), endpoint)


async def test_a_sessions_spill_files_stop_at_max_session_spill_bytes_and_the_model_is_told(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("[agent]\nmax_spill_bytes = 3000000\nmax_session_spill_bytes = 5000000\n")
    endpoint.push(tool_call_stream([call(f"y{i}", "bash", command="yes | head -c 20000000") for i in range(3)]))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, {"AGENT_SERVER_CONFIG": str(config)})
    assert (await h.prompt(sid, "print a lot, three times")).stop_reason == "end_turn"
    await h.close()
    sizes = sorted(f.stat().st_size for f in (agent_state_dir / "sessions" / sid / "spill").iterdir())
    assert sizes == [2_000_000, 3_000_000]  # the second call got what was left of the budget
    seen = [m["content"] for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"]
    assert "17,000,000 bytes were dropped" in seen[0] and "18,000,000 bytes were dropped" in seen[1]
    assert "none of it was saved to a spill file" in seen[2] and "20,000,000 bytes were dropped" in seen[2]
    assert "5,000,000 bytes per session" in seen[2]
    assert_replay(load_log(agent_state_dir, sid), endpoint)
