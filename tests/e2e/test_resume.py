"""End to end: ``session/load``, ``session/list``, ``session/delete`` through the official ACP SDK
and the real server — history replayed as updates before the answer, turns left open by a dead
process closed as ``interrupted``, loud and clear refusals of unreadable logs."""

import asyncio
import json
import os
import signal
import subprocess
import time
import uuid

import pytest
from support.sessions import (
    FULL_ACCESS,
    assert_valid_history,
    call,
    config_env,
    events,
    log_path,
    notices,
    one_result_per_call,
)

from support.fixtures import agent_server_command
from support.procs import processes_naming, wait_gone
from support.replay import assert_replay_matches
from support.timeouts import HANG

from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import FORMAT_VERSION, derive_messages


async def harness(factory, endpoint, env=None, **kw):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})}, **kw)
    await h.initialize()
    return h


async def load(h, sid, cwd, **kw):
    return await h.request("session/load", {"sessionId": sid, "cwd": str(cwd), "mcpServers": [], **kw})


def load_error(h):
    response = h.transcript.response_to(h.transcript.requests("session/load")[-1])
    return response.message.get("error")


async def refused_load(factory, endpoint, sid, cwd):
    """A fresh server's ``session/load`` of ``sid``, which must fail: ``(harness, error)``."""
    again = await harness(factory, endpoint)
    with pytest.raises(Exception):
        await load(again, sid, cwd)
    return again, load_error(again)


async def one_turn_session(factory, endpoint, workspace, state_dir):
    """A session with one answered prompt, closed and replay-checked: ``(sid, its log's path)``."""
    endpoint.push(text_stream("fine"))
    h = await harness(factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "hello")
    await h.close()
    assert_replay_matches(state_dir, endpoint.requests)
    return sid, log_path(state_dir, sid)


async def test_initialize_advertises_load_list_and_delete(acp_harness_factory, endpoint):
    h = await acp_harness_factory()
    caps = (await h.initialize()).agent_capabilities
    assert caps.load_session is True
    assert caps.session_capabilities.list is not None and caps.session_capabilities.delete is not None


async def test_load_in_a_new_process_replays_the_whole_history_before_answering_and_prompting_continues(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "notes.txt").write_text("remember this\n")
    endpoint.push(tool_call_stream([call("r1", "read", path="notes.txt")], text="Let me look."))
    endpoint.push(text_stream("It says: remember this.", reasoning="The file has one line."))
    endpoint.push(text_stream("Still here."))
    first = await harness(acp_harness_factory, endpoint)
    sid = (await first.new_session(str(workspace))).session_id
    assert (await first.prompt(sid, "What is in notes.txt?")).stop_reason == "end_turn"
    await first.close()
    before = [{k: v for k, v in m.items() if k != "reasoning_content"}  # not echoed by this profile
              for m in derive_messages(events(agent_state_dir, sid))]

    second = await harness(acp_harness_factory, endpoint)
    result = await load(second, sid, workspace)
    assert result.get("modes") is not None
    transcript = second.transcript.snapshot()
    answered = transcript.index(second.transcript.response_to(second.transcript.requests("session/load")[0]))
    replayed = [m.message["params"]["update"] for m in transcript[:answered] if m.method == "session/update"]
    kinds = [u["sessionUpdate"] for u in replayed]
    assert kinds == ["user_message_chunk", "agent_message_chunk", "tool_call", "agent_thought_chunk",
                     "agent_message_chunk"]
    assert replayed[0]["content"] == {"type": "text", "text": "What is in notes.txt?"}
    tool = replayed[2]
    assert tool["status"] == "completed" and tool["kind"] == "read" and tool["title"] == "Read notes.txt"
    assert "remember this" in tool["content"][0]["content"]["text"]
    assert replayed[4]["content"]["text"] == "It says: remember this."
    assert (await second.prompt(sid, "And now?")).stop_reason == "end_turn"
    assert endpoint.requests[-1].json()["messages"][1:] == [*before, {"role": "user", "content": "And now?"}]


async def test_load_of_a_session_live_in_this_process_replays_it_and_it_keeps_working(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("one"))
    endpoint.push(text_stream("two"))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "first")
    seen = len(h.updates(sid))
    await load(h, sid, workspace)
    replayed = [u["sessionUpdate"] for u in h.updates(sid)[seen:] if u["sessionUpdate"] != "available_commands_update"]
    assert replayed == ["user_message_chunk", "agent_message_chunk"]
    assert (await h.prompt(sid, "second")).stop_reason == "end_turn"
    assert [e.type for e in events(agent_state_dir, sid)].count("session/header") == 1
    assert [m["content"] for m in endpoint.requests[-1].json()["messages"][1:]] == ["first", "one", "second"]


async def test_new_prompt_slow_tool_then_load_same_id_then_cancel_answers_cancelled(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.9375"  # a sleep only the cancel ends
    endpoint.push(tool_call_stream([call("s1", "bash", command=f"sleep {marker}")]))
    endpoint.push(text_stream("after"))
    h = await harness(acp_harness_factory, endpoint, config_env(tmp_path, FULL_ACCESS))
    sid = (await h.new_session(str(workspace))).session_id
    task = h.start_prompt(sid, "slow")
    await h.wait_for_update("tool_call_update", session_id=sid, predicate=lambda u: u.get("status") == "in_progress")
    await load(h, sid, workspace)
    deadline = time.monotonic() + 60
    while not (command := processes_naming(marker)) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert command, "the command never started"
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    assert wait_gone(command), "the cancel did not stop the command"
    (result,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"]
    assert result["reason"] == "interrupted", result
    assert (await h.prompt(sid, "ok?")).stop_reason == "end_turn"
    one_result_per_call(events(agent_state_dir, sid))


async def test_cancel_and_prompt_work_on_a_session_loaded_in_a_new_process(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("hello"))
    endpoint.push(text_stream("slow " * 300, chunk_size=5, delay=0.4))  # 120 s: only the cancel ends it
    endpoint.push(text_stream("done"))
    first = await harness(acp_harness_factory, endpoint)
    sid = (await first.new_session(str(workspace))).session_id
    await first.prompt(sid, "hi")
    await first.close()
    second = await harness(acp_harness_factory, endpoint)
    await load(second, sid, workspace)
    task = second.start_prompt(sid, "talk slowly")
    await second.wait_for_update("agent_message_chunk", session_id=sid,
                                 predicate=lambda u: u["content"]["text"].startswith("slow"))
    await second.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    assert (await second.prompt(sid, "thanks")).stop_reason == "end_turn"
    cut = endpoint.requests[-1].json()["messages"][-3]
    assert cut["role"] == "assistant" and ("slow " * 300).startswith(cut["content"])
    assert len(cut["content"]) < len("slow " * 300), "the stream ran out before the cancel"
    exits = [e.data["exit"] for e in events(agent_state_dir, sid) if e.type == "turn/end"]
    assert exits == ["end_turn", "cancelled", "end_turn"]


async def test_sigkill_mid_tool_then_load_closes_the_turn_interrupted_without_a_dangling_call(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    endpoint.push(tool_call_stream([call("k1", "bash", command="sleep 30"), call("k2", "read", path="x")]))
    endpoint.push(text_stream("recovered"))
    env = config_env(tmp_path, FULL_ACCESS)
    first = await harness(acp_harness_factory, endpoint, env)
    sid = (await first.new_session(str(workspace))).session_id
    first.start_prompt(sid, "run")
    await first.wait_for_update("tool_call_update", session_id=sid, predicate=lambda u: u.get("status") == "in_progress")
    os.killpg(first.pid, signal.SIGKILL)
    await first.wait_exit()
    size = log_path(agent_state_dir, sid).stat().st_size
    second = await harness(acp_harness_factory, endpoint, env)
    result = await load(second, sid, workspace)
    assert result["_meta"]["agentServer"]["recovered"] == {"closedTurn": 1, "settledCalls": ["k1", "k2"],
                                                           "droppedPrompts": []}
    evts = events(agent_state_dir, sid)
    assert log_path(agent_state_dir, sid).read_bytes()[:size] == open(log_path(agent_state_dir, sid), "rb").read()[:size]
    end = [e for e in evts if e.type == "turn/end"]
    assert [e.data for e in end] == [{"turn": 1, "exit": "interrupted"}]
    replayed = [u for u in second.updates(sid, "tool_call")]
    assert [u["status"] for u in replayed] == ["failed", "failed"]
    assert (await second.prompt(sid, "what happened?")).stop_reason == "end_turn"
    messages = endpoint.requests[-1].json()["messages"]
    assert_valid_history(endpoint.requests[-1].body)
    (notice,) = notices(messages)
    assert "agent-server stopped" in notice and "bash (call k1)" in notice and "read (call k2)" in notice
    one_result_per_call(events(agent_state_dir, sid))


async def test_prompt_queued_when_the_process_was_killed_is_reported_on_load_and_not_run(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("slow " * 400, chunk_size=5, delay=0.02))
    endpoint.push(text_stream("fresh"))
    first = await harness(acp_harness_factory, endpoint)
    sid = (await first.new_session(str(workspace))).session_id
    first.start_prompt(sid, "one")
    await first.wait_for_update("agent_message_chunk", session_id=sid)
    first.start_prompt(sid, "two: please do not lose me")
    deadline = time.monotonic() + HANG
    while not any(e.type == "inbox/queued" for e in events(agent_state_dir, sid)):
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)
    os.killpg(first.pid, signal.SIGKILL)
    await first.wait_exit()
    second = await harness(acp_harness_factory, endpoint)
    result = await load(second, sid, workspace)
    assert result["_meta"]["agentServer"]["recovered"]["droppedPrompts"]
    assert "two: please do not lose me" in second.agent_text(sid)
    dropped = [e.data for e in events(agent_state_dir, sid) if e.type == "inbox/dropped"]
    assert [d["content"] for d in dropped] == ["two: please do not lose me"]
    assert len(endpoint.requests) == 1  # it was not run on load
    assert (await second.prompt(sid, "three")).stop_reason == "end_turn"
    users = [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "user"]
    assert users[0] == "one" and users[-1] == "three" and "two: please do not lose me" not in users


async def test_load_of_a_log_with_a_torn_tail_succeeds_and_logs_the_cut(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("fine"))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "hello")
    await h.close()
    with open(log_path(agent_state_dir, sid), "ab") as f:
        f.write(b'{"type":"turn/start","seq":')
    again = await harness(acp_harness_factory, endpoint)
    await load(again, sid, workspace)
    repaired = [e for e in events(agent_state_dir, sid) if e.type == "log/repaired"]
    assert len(repaired) == 1 and repaired[0].data["cut_text"] == '{"type":"turn/start","seq":'


@pytest.mark.replay_exempt("the log is corrupted on purpose; replay is checked before that")
async def test_load_of_a_log_with_a_corrupt_middle_line_fails_naming_the_line_and_leaves_it(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    sid, path = await one_turn_session(acp_harness_factory, endpoint, workspace, agent_state_dir)
    lines = path.read_bytes().split(b"\n")
    lines[3] = b'{"type": "user", oops'
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    again, error = await refused_load(acp_harness_factory, endpoint, sid, workspace)
    assert error["code"] == -32603 and "corrupt at line 4" in error["message"]
    assert error["data"]["code"] == "LOG_CORRUPT" and error["data"]["line"] == 4
    assert path.read_bytes() == before
    with pytest.raises(Exception):
        await again.prompt(sid, "still?")  # not loaded: unknown session


@pytest.mark.replay_exempt("the log is corrupted on purpose; replay is checked before that")
async def test_load_of_a_middle_line_of_the_wrong_shape_fails_log_corrupt_before_any_update(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "notes.txt").write_text("x\n")
    endpoint.push(tool_call_stream([call("r1", "read", path="notes.txt")]))
    endpoint.push(text_stream("read it"))
    endpoint.push(text_stream("second"))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "read notes")
    await h.prompt(sid, "again")
    await h.close()
    assert_replay_matches(agent_state_dir, endpoint.requests)
    path = log_path(agent_state_dir, sid)
    lines = path.read_bytes().split(b"\n")
    index = next(i for i, line in enumerate(lines) if b'"type":"tool/result"' in line)
    lines[index] = b'{"type":"tool/result","seq":%d,"time":1,"data":{"oops":1}}' % (index + 1)
    path.write_bytes(b"\n".join(lines) + b'{"type":"turn/st')  # and a torn tail: not repaired either
    before = path.read_bytes()
    again, error = await refused_load(acp_harness_factory, endpoint, sid, workspace)
    assert error["code"] == -32603 and error["data"]["code"] == "LOG_CORRUPT"
    assert error["data"]["line"] == index + 1 and error["data"]["path"] == str(path)
    assert f"corrupt at line {index + 1}" in error["message"] and "tool/result event: no call_id" in error["message"]
    assert not again.transcript.notifications("session/update")  # refused before any update
    assert path.read_bytes() == before  # nothing appended: no repair, no recovery, no error turn
    with pytest.raises(Exception):
        await again.prompt(sid, "still?")  # not loaded: unknown session
    assert path.read_bytes() == before
    replayed = subprocess.run([*agent_server_command(), "replay", str(path)], capture_output=True, timeout=60)
    assert replayed.returncode == 1 and b"Traceback" not in replayed.stderr
    assert f"line {index + 1}: tool/result event: no call_id".encode() in replayed.stderr


@pytest.mark.replay_exempt("the log's header is changed on purpose; replay is checked before that")
async def test_load_of_a_log_whose_header_names_another_session_is_refused_corrupt(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    sid, path = await one_turn_session(acp_harness_factory, endpoint, workspace, agent_state_dir)
    lines = path.read_bytes().split(b"\n")
    header = json.loads(lines[0])
    header["data"]["session_id"] = "sess_other"
    lines[0] = json.dumps(header, separators=(",", ":")).encode()
    path.write_bytes(b"\n".join(lines))
    before = path.read_bytes()
    again, error = await refused_load(acp_harness_factory, endpoint, sid, workspace)
    assert error["data"]["code"] == "LOG_CORRUPT" and error["data"]["line"] == 1
    assert "names session 'sess_other'" in error["message"] and f"folder of session {sid!r}" in error["message"]
    assert path.read_bytes() == before


async def test_load_of_a_log_from_a_future_format_is_refused_with_a_clear_message(
        acp_harness_factory, workspace, agent_state_dir):
    path = agent_state_dir / "sessions" / "sess_future" / "events.jsonl"
    path.parent.mkdir(parents=True)
    header = {"type": "session/header", "seq": 1, "time": 1.0,
              "data": {"format_version": FORMAT_VERSION + 1, "cwd": str(workspace)}}
    path.write_text(json.dumps(header) + "\n")
    h = await acp_harness_factory()
    await h.initialize()
    with pytest.raises(Exception):
        await load(h, "sess_future", workspace)
    error = load_error(h)
    assert error["data"]["code"] == "LOG_VERSION"
    assert f"log format {FORMAT_VERSION + 1} is newer" in error["message"] and "upgrade agent-server" in error["message"]


async def test_load_of_a_session_open_in_another_process_is_refused_as_busy_and_changes_nothing(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("mine"))
    owner = await harness(acp_harness_factory, endpoint)
    sid = (await owner.new_session(str(workspace))).session_id
    await owner.prompt(sid, "hello")
    before = log_path(agent_state_dir, sid).read_bytes()
    other = await harness(acp_harness_factory, endpoint)
    with pytest.raises(Exception):
        await load(other, sid, workspace)
    error = load_error(other)
    assert error["data"]["code"] == "SESSION_BUSY" and "open in another agent-server process" in error["message"]
    assert log_path(agent_state_dir, sid).read_bytes() == before


@pytest.mark.replay_exempt("the session is deleted at the end: its requests cannot be replayed afterwards")
async def test_delete_of_a_session_open_elsewhere_is_refused_busy(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("mine"))
    endpoint.push(text_stream("still mine"))
    owner = await harness(acp_harness_factory, endpoint)
    sid = (await owner.new_session(str(workspace))).session_id
    await owner.prompt(sid, "important work")
    other = await harness(acp_harness_factory, endpoint)
    with pytest.raises(Exception):
        await other.request("session/delete", {"sessionId": sid})
    error = other.transcript.response_to(other.transcript.requests("session/delete")[-1]).message["error"]
    assert error["code"] == -32603 and error["data"]["code"] == "SESSION_BUSY"
    assert "cannot delete session" in error["message"] and "open in another agent-server process" in error["message"]
    assert (await owner.prompt(sid, "more work")).stop_reason == "end_turn"
    assert [e.data["content"] for e in events(agent_state_dir, sid) if e.type == "user"] == ["important work", "more work"]
    assert sid in json.dumps(await other.request("session/list", {}))
    await owner.request("session/close", {"sessionId": sid})  # closed there: now it can go
    assert await other.request("session/delete", {"sessionId": sid}) == {}
    assert not (agent_state_dir / "sessions" / sid).exists()


async def test_load_of_an_unknown_session_is_resource_not_found(acp_harness_factory, workspace):
    h = await acp_harness_factory()
    await h.initialize()
    with pytest.raises(Exception):
        await load(h, "sess_nope", workspace)
    assert load_error(h)["code"] == -32002


async def test_list_is_newest_first_filtered_by_cwd_with_title_and_updated_at(
        acp_harness_factory, endpoint, workspace, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for text in ("a", "b", "c", "d"):
        endpoint.push(text_stream(text))
    h = await harness(acp_harness_factory, endpoint)
    older = (await h.new_session(str(workspace))).session_id
    await h.prompt(older, "\n  Fix the login bug\nsecond line")
    elsewhere = (await h.new_session(str(other))).session_id
    await h.prompt(elsewhere, "elsewhere")
    newer = (await h.new_session(str(workspace))).session_id
    await h.prompt(newer, "x" * 200)
    await asyncio.sleep(0.05)
    await h.prompt(older, "touch it again: now the newest")
    listed = (await h.request("session/list", {"cwd": str(workspace)}))["sessions"]
    assert [s["sessionId"] for s in listed] == [older, newer]
    assert listed[0]["title"] == "Fix the login bug" and listed[0]["cwd"] == str(workspace)
    assert listed[1]["title"] == "x" * 79 + "…"
    assert listed[0]["updatedAt"] > listed[1]["updatedAt"] and listed[0]["updatedAt"].endswith("Z")
    everything = (await h.request("session/list", {}))["sessions"]
    assert {s["sessionId"] for s in everything} == {older, newer, elsewhere}


@pytest.mark.replay_exempt("the session is deleted: its requests cannot be replayed afterwards")
async def test_delete_closes_a_live_session_and_removes_its_folder(acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("hi"))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "hello")
    assert (agent_state_dir / "sessions" / sid).is_dir()
    assert await h.request("session/delete", {"sessionId": sid}) == {}
    assert not (agent_state_dir / "sessions" / sid).exists()
    assert (await h.request("session/list", {}))["sessions"] == []
    with pytest.raises(Exception):
        await h.prompt(sid, "gone?")
    with pytest.raises(Exception):
        await h.request("session/delete", {"sessionId": sid})
    response = h.transcript.response_to(h.transcript.requests("session/delete")[-1])
    assert response.message["error"]["code"] == -32002


async def test_sigkill_of_the_server_takes_its_running_command_along_and_load_closes_the_call(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    # An unconfined command runs under the reaper (tools/mcp/reaper.py, issue 32 §11): it dies with the
    # server, where before it ran on as an orphan until a load stopped it (that load-time sweep,
    # host/lifecycle.reap_orphans, stays for a reaper that could not start).
    endpoint.push(tool_call_stream([call("k1", "bash", command="echo $$ > pid.txt; exec sleep 60")]))
    endpoint.push(text_stream("recovered"))
    env = config_env(tmp_path, FULL_ACCESS)
    first = await harness(acp_harness_factory, endpoint, env)
    sid = (await first.new_session(str(workspace))).session_id
    first.start_prompt(sid, "run")
    await first.wait_for_update("tool_call_update", session_id=sid, predicate=lambda u: u.get("status") == "in_progress")
    deadline = time.monotonic() + HANG
    while not (workspace / "pid.txt").exists() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    pid = int((workspace / "pid.txt").read_text())
    os.kill(first.pid, signal.SIGKILL)  # the server only
    await first.wait_exit()
    deadline = time.monotonic() + HANG
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError(f"process {pid} outlived the server's SIGKILL")
    second = await harness(acp_harness_factory, endpoint, env)
    await load(second, sid, workspace)
    logged = events(agent_state_dir, sid)
    (result,) = [e.data for e in logged if e.type == "tool/result" and e.data.get("call_id") == "k1"]
    assert result["status"] == "failed", result
