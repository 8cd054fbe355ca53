"""End to end, through the official ACP SDK client and the real server: ``session/resume``,
``session/close``, ``session/fork`` (validated against the unstable schema), ``session/list``
pages, loads of a running session, loads that change nothing, and the ``model`` config option."""

import asyncio
import base64
import json
import os
import signal
import time

import pytest
from support.acp_schema import load_unstable_schema
from support.procs import wait_gone
from support.sessions import FULL_ACCESS, call, config_env, events, log_path, one_result_per_call
from support.timeouts import HANG

from agent_server.agent.replay import logged_requests
from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import read_events

UNSTABLE = {"schema": load_unstable_schema()}


async def harness(factory, endpoint, env=None, **kw):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})}, **kw)
    await h.initialize()
    return h


def chat(endpoint):
    return [r for r in endpoint.requests if r.method == "POST" and r.path.endswith("/chat/completions")]


def after(h, request_method, sid):
    """The session's updates sent after the last ``request_method`` request, and its response's
    index in that list (updates before it were sent before the response)."""
    transcript = h.transcript.snapshot()
    request = h.transcript.requests(request_method)[-1]
    start = transcript.index(request)
    response = h.transcript.response_to(request)
    updates, answered = [], None
    for message in transcript[start + 1:]:
        if message is response:
            answered = len(updates)
        elif message.method == "session/update" and message.message["params"]["sessionId"] == sid:
            updates.append(message.message["params"]["update"])
    return updates, answered


async def test_initialize_advertises_resume_close_and_fork(acp_harness_factory, endpoint):
    h = await acp_harness_factory()
    caps = (await h.initialize()).agent_capabilities.session_capabilities
    assert caps.resume is not None and caps.close is not None and caps.fork is not None


# -- session/resume -----------------------------------------------------------------------------


async def test_resume_after_a_restart_sends_requests_byte_equal_to_what_the_first_process_would_have(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    for text in ("a1", "a1", "b2", "b2"):
        endpoint.push(text_stream(text))
    first = await harness(acp_harness_factory, endpoint, {"SHELL": "/bin/sh"})
    kept = (await first.new_session(str(workspace))).session_id
    control = (await first.new_session(str(workspace))).session_id
    await first.prompt(kept, "q1")
    await first.prompt(control, "q1")
    await first.prompt(control, "q2")  # what the first process sent for turn 2
    would_have_sent = chat(endpoint)[-1].body
    await first.close()
    before = log_path(agent_state_dir, kept).read_bytes()

    # another process, with an environment that renders another system text: the logged one holds
    second = await harness(acp_harness_factory, endpoint, {"SHELL": "/usr/bin/other-shell"})
    result = await second.request("session/resume", {"sessionId": kept, "cwd": str(workspace), "mcpServers": []})
    assert result["modes"]["currentModeId"] == "workspace-write"
    assert [u["sessionUpdate"] for u in second.updates(kept)] in ([], ["available_commands_update"])  # nothing replayed
    assert log_path(agent_state_dir, kept).read_bytes() == before  # nothing changed, nothing appended
    assert (await second.prompt(kept, "q2")).stop_reason == "end_turn"
    assert chat(endpoint)[-1].body == would_have_sent
    replayed = logged_requests(read_events(log_path(agent_state_dir, kept)))
    assert [r.body for r in replayed] == [chat(endpoint)[0].body, would_have_sent]


async def test_resume_of_a_session_killed_mid_tool_shows_the_interrupted_call_as_failed_after_the_response(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    endpoint.push(tool_call_stream([call("k1", "bash", command="sleep 30")]))
    endpoint.push(text_stream("recovered"))
    env = config_env(tmp_path, FULL_ACCESS)
    first = await harness(acp_harness_factory, endpoint, env)
    sid = (await first.new_session(str(workspace))).session_id
    first.start_prompt(sid, "run")
    running = await first.wait_for_update("tool_call_update", session_id=sid,
                                          predicate=lambda u: u.get("status") == "in_progress")
    tool_call_id = running.message["params"]["update"]["toolCallId"]
    os.killpg(first.pid, signal.SIGKILL)
    await first.wait_exit()

    second = await harness(acp_harness_factory, endpoint, env)
    result = await second.request("session/resume", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert result["_meta"]["agentServer"]["recovered"]["settledCalls"] == ["k1"]
    await second.wait_for_update("tool_call_update", session_id=sid)
    updates, answered = after(second, "session/resume", sid)
    assert answered == 0  # nothing before the response: no replay
    updates = [u for u in updates if u["sessionUpdate"] != "available_commands_update"]  # the commands follow
    assert [(u["sessionUpdate"], u["toolCallId"], u["status"]) for u in updates] == [
        ("tool_call_update", tool_call_id, "failed")]
    assert "agent-server stopped" in updates[0]["content"][0]["content"]["text"]
    assert (await second.prompt(sid, "what happened?")).stop_reason == "end_turn"
    one_result_per_call(events(agent_state_dir, sid))


async def test_resume_of_an_unknown_session_is_resource_not_found(acp_harness_factory, endpoint, workspace):
    h = await harness(acp_harness_factory, endpoint)
    with pytest.raises(Exception) as info:
        await h.request("session/resume", {"sessionId": "sess_nope", "cwd": str(workspace), "mcpServers": []})
    assert "-32002" in str(info.value) or "unknown session" in str(info.value)


# -- session/close ------------------------------------------------------------------------------


async def test_close_during_a_running_shell_command_leaves_no_process_and_the_log_can_be_loaded(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    pid_file = workspace / "sleeper.pid"
    endpoint.push(tool_call_stream([call("c1", "bash", command=f"sleep 60 & echo $! > {pid_file}; wait")]))
    endpoint.push(text_stream("after close"))
    h = await harness(acp_harness_factory, endpoint, config_env(tmp_path, FULL_ACCESS))
    sid = (await h.new_session(str(workspace))).session_id
    task = h.start_prompt(sid, "sleep")
    deadline = time.monotonic() + HANG
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "the command never started"
        await asyncio.sleep(0.05)
    sleeper = int(pid_file.read_text())
    assert await h.request("session/close", {"sessionId": sid}) == {}
    assert (await task).stop_reason == "cancelled"
    assert wait_gone([sleeper]), "the background command is still running"  # a zombie counts as gone
    # the agent and its long-lived shell launcher (one per process, kept for the next session's
    # commands since unconfined calls fork from it too): no command of the session is left
    left = [p for p in h.group_members() if p != h.pid]
    assert all(b"sandbox_zygote" in open(f"/proc/{p}/cmdline", "rb").read() for p in left), left
    assert not any(os.path.exists(f"/proc/{p}/task/{p}/children") and open(f"/proc/{p}/task/{p}/children").read().strip()
                   for p in left)  # the launcher holds no fork of a command
    with pytest.raises(Exception):
        await h.prompt(sid, "still there?")  # closed: unknown until loaded again
    assert [e.data["exit"] for e in events(agent_state_dir, sid) if e.type == "turn/end"] == ["cancelled"]
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert (await h.prompt(sid, "back")).stop_reason == "end_turn"
    one_result_per_call(events(agent_state_dir, sid))


# -- session/list -------------------------------------------------------------------------------


async def test_list_pages_through_120_sessions_each_once_newest_first(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("listed once prompted"))
    h = await harness(acp_harness_factory, endpoint, validate=UNSTABLE)  # session/fork is unstable
    first = (await h.new_session(str(workspace))).session_id
    await h.prompt(first, "a session is listed once it had a prompt")
    await h.new_session(str(workspace))  # never prompted: not listed
    created = {first} | {(await fork(h, first, workspace))["sessionId"] for _ in range(119)}
    seen, pages, cursor = [], [], None
    while True:
        params = {"cwd": str(workspace), **({"cursor": cursor} if cursor else {})}
        page = await h.request("session/list", params)
        pages.append(len(page["sessions"]))
        seen += page["sessions"]
        cursor = page.get("nextCursor")
        if not cursor:
            break
    assert len(pages) > 1 and all(n > 0 for n in pages)
    assert [s["sessionId"] for s in seen] == list(dict.fromkeys(s["sessionId"] for s in seen))  # no repeats
    assert {s["sessionId"] for s in seen} == created
    stamps = [s["updatedAt"] for s in seen]
    assert stamps == sorted(stamps, reverse=True)
    bogus = base64.urlsafe_b64encode(json.dumps({"nope": 1}).encode()).decode()
    for bad in ("not a cursor", bogus):
        with pytest.raises(Exception):
            await h.request("session/list", {"cursor": bad})


# -- session/load -------------------------------------------------------------------------------


async def test_load_during_a_running_turn_yields_the_replay_then_the_live_updates_in_order(
        acp_harness_factory, endpoint, workspace):
    answer = "".join(f"word{i} " for i in range(150))
    endpoint.push(text_stream("first answer"))
    endpoint.push(text_stream(answer, chunk_size=6, delay=0.01))
    h = await harness(acp_harness_factory, endpoint)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "one")
    task = h.start_prompt(sid, "two")
    await h.wait_for_update("agent_message_chunk", session_id=sid,
                            predicate=lambda u: u["content"]["text"] in answer and len(h.updates(sid)) > 5)
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert (await task).stop_reason == "end_turn"
    updates, answered = after(h, "session/load", sid)
    # a delta already on its way when the load arrived may come first; then the replay, whole
    start = next(i for i, u in enumerate(updates) if u["sessionUpdate"] == "user_message_chunk")
    assert {u["sessionUpdate"] for u in updates[:start]} <= {"agent_message_chunk"}
    replay = updates[start:]
    head = [(u["sessionUpdate"], u["content"].get("text")) for u in replay[:3]]
    assert head == [("user_message_chunk", "one"), ("agent_message_chunk", "first answer"),
                    ("user_message_chunk", "two")]
    rest = replay[3:]
    assert {u["sessionUpdate"] for u in rest} <= {"agent_message_chunk", "usage_update", "available_commands_update"}
    streamed = "".join(u["content"]["text"] for u in rest if u["sessionUpdate"] == "agent_message_chunk")
    assert streamed == answer  # the part streamed before the load, then the rest: nothing lost or doubled
    assert answered is not None and answered >= start + 3


async def test_load_of_an_unchanged_session_leaves_its_log_byte_identical(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("hello"))
    first = await harness(acp_harness_factory, endpoint)
    sid = (await first.new_session(str(workspace))).session_id
    await first.prompt(sid, "hi")
    await first.close()
    before = log_path(agent_state_dir, sid).read_bytes()
    for _ in range(2):
        h = await harness(acp_harness_factory, endpoint)
        await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replayed = [u["sessionUpdate"] for u in h.updates(sid) if u["sessionUpdate"] != "available_commands_update"]
        assert replayed == ["user_message_chunk", "agent_message_chunk"]
        await h.close()
        assert log_path(agent_state_dir, sid).read_bytes() == before


async def test_plan_calls_replay_as_plan_updates(acp_harness_factory, endpoint, workspace):
    entries = [{"content": "Read the code", "status": "completed", "priority": "high"},
               {"content": "Fix the bug", "status": "pending", "priority": "medium"}]
    endpoint.push(tool_call_stream([call("p1", "plan", entries=entries)]))
    endpoint.push(text_stream("planned"))
    first = await harness(acp_harness_factory, endpoint)
    sid = (await first.new_session(str(workspace))).session_id
    await first.prompt(sid, "plan it")
    live = [u["sessionUpdate"] for u in first.updates(sid) if u["sessionUpdate"] in ("tool_call", "plan")]
    await first.close()
    second = await harness(acp_harness_factory, endpoint)
    await second.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    replayed = [u for u in second.updates(sid) if u["sessionUpdate"] in ("tool_call", "plan")]
    assert [u["sessionUpdate"] for u in replayed] == live == ["tool_call", "plan"]
    assert replayed[1]["entries"] == entries


# -- the model option ---------------------------------------------------------------------------

MODELS = '''
model = "small"

[[models]]
id = "small"
name = "Small"

[[models]]
id = "big"
name = "Big"
context_window = 64000
'''


def models_env(tmp_path):
    """The config with two models; ``AGENT_SERVER_MODEL`` (set by the harness) emptied so the
    file's default model applies."""
    return {**config_env(tmp_path, MODELS), "AGENT_SERVER_MODEL": ""}


def model_option(options):
    return next(o for o in options if o["id"] == "model")


async def test_model_option_listed_switched_next_request_to_the_new_model_and_replay_reproduces_both(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    endpoint.push(text_stream("from small"))
    endpoint.push(text_stream("from big"))
    h = await harness(acp_harness_factory, endpoint, models_env(tmp_path))
    new = await h.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    sid = new["sessionId"]
    option = model_option(new["configOptions"])
    assert option["category"] == "model" and option["currentValue"] == "small"
    assert [(o["value"], o["name"]) for o in option["options"]] == [("small", "Small"), ("big", "Big")]
    await h.prompt(sid, "one")
    answer = await h.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "big"})
    assert model_option(answer["configOptions"])["currentValue"] == "big"
    update = await h.wait_for_update("config_option_update", session_id=sid)
    assert model_option(update.message["params"]["update"]["configOptions"])["currentValue"] == "big"
    updates, answered = after(h, "session/set_config_option", sid)
    assert answered == 0  # announced after the answer
    await h.prompt(sid, "two")
    assert [json.loads(r.body)["model"] for r in chat(endpoint)] == ["small", "big"]
    usage = [u for u in h.updates(sid, "usage_update")]
    assert usage[-1]["size"] == 64000  # the new model's window
    replayed = logged_requests(events(agent_state_dir, sid))
    assert [r.body for r in replayed] == [r.body for r in chat(endpoint)]
    with pytest.raises(Exception):
        await h.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "huge"})


async def test_slash_model_accepts_only_a_listed_model_and_says_how_to_add_one(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    h = await harness(acp_harness_factory, endpoint, models_env(tmp_path))
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "/model huge")
    text = h.agent_text(sid)
    assert "huge" in text and "small" in text and "big" in text and "[[models]]" in text
    assert not [e for e in events(agent_state_dir, sid) if e.type == "model/changed"]
    await h.prompt(sid, "/model big")
    assert [e.data["to"] for e in events(agent_state_dir, sid) if e.type == "model/changed"] == ["big"]
    update = h.updates(sid, "config_option_update")[-1]
    assert model_option(update["configOptions"])["currentValue"] == "big"


async def test_finding_2_slash_mode_announced_only_the_mode_option_and_the_model_picker_vanished(
        acp_harness_factory, endpoint, workspace, tmp_path):
    # config_option_update carries the session's whole set of options: a client replaces its pickers with it
    h = await harness(acp_harness_factory, endpoint, models_env(tmp_path))
    new = await h.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    sid = new["sessionId"]
    await h.prompt(sid, "/mode read-only")
    update = h.updates(sid, "config_option_update")[-1]
    assert [o["id"] for o in update["configOptions"]] == [o["id"] for o in new["configOptions"]]
    assert model_option(update["configOptions"])["currentValue"] == "small"
    assert next(o for o in update["configOptions"] if o["id"] == "mode")["currentValue"] == "read-only"


# -- session/fork -------------------------------------------------------------------------------


async def fork(h, sid, workspace, turn=None):
    params = {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}
    if turn is not None:
        params["_meta"] = {"agentServer": {"forkAtTurn": turn}}
    return await h.request("session/fork", params)


async def test_fork_at_turn_2_prompted_with_turn_3s_text_sends_the_parents_turn_3_request_byte_for_byte(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    for text in ("a1", "a2", "a3", "other a3"):
        endpoint.push(text_stream(text))
    h = await harness(acp_harness_factory, endpoint, validate=UNSTABLE)
    parent = (await h.new_session(str(workspace))).session_id
    for prompt in ("p1", "p2", "p3"):
        await h.prompt(parent, prompt)
    parent_turn_3 = chat(endpoint)[2].body
    before = log_path(agent_state_dir, parent).read_bytes()
    result = await fork(h, parent, workspace, turn=2)
    child = result["sessionId"]
    assert child != parent and result["modes"]["currentModeId"] == "workspace-write"
    assert (await h.prompt(child, "p3")).stop_reason == "end_turn"
    assert chat(endpoint)[3].body == parent_turn_3
    assert log_path(agent_state_dir, parent).read_bytes() == before
    header = events(agent_state_dir, child)[0].data
    assert header["forked_from"]["session_id"] == parent and header["forked_from"]["turn"] == 2
    own = logged_requests(events(agent_state_dir, child))
    assert [r.body for r in own] == [parent_turn_3]  # replay of the fork, from its own log alone
    h.validate(**UNSTABLE)


async def test_fork_keeps_what_was_read_and_checks_an_edit_against_the_disk_as_it_is_now(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    notes = workspace / "notes.txt"
    notes.write_text("alpha\n")
    endpoint.push(tool_call_stream([call("r1", "read", path="notes.txt")]))
    endpoint.push(text_stream("read it"))
    edit = call("e1", "edit", path="notes.txt", old_string="alpha", new_string="beta")
    endpoint.push(tool_call_stream([edit]))  # first fork: the file is as it was read
    endpoint.push(text_stream("edited"))
    endpoint.push(tool_call_stream([edit]))  # second fork: the file changed on disk since
    endpoint.push(text_stream("stale"))
    h = await harness(acp_harness_factory, endpoint, config_env(tmp_path, FULL_ACCESS), validate=UNSTABLE)
    parent = (await h.new_session(str(workspace))).session_id
    await h.prompt(parent, "read notes.txt")
    first = (await fork(h, parent, workspace))["sessionId"]
    await h.prompt(first, "change alpha to beta")
    assert notes.read_text() == "beta\n"  # no re-read needed: the fork's log says it was read
    second = (await fork(h, parent, workspace))["sessionId"]
    await h.prompt(second, "change alpha to beta")
    result = next(e for e in events(agent_state_dir, second) if e.type == "tool/result" and e.data["call_id"] == "e1")
    assert result.data["status"] == "failed" and "changed since you last read it" in result.data["content"]
    assert notes.read_text() == "beta\n"


async def test_fork_at_a_turn_that_did_not_end_is_invalid_params(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("a1"))
    h = await harness(acp_harness_factory, endpoint, validate=UNSTABLE)
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "p1")
    with pytest.raises(Exception) as info:
        await fork(h, sid, workspace, turn=5)
    assert "turn 5" in str(info.value) or "-32602" in str(info.value)
