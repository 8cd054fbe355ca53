"""End to end: slash commands, project instructions (AGENTS.md) and session titles (issue 7)."""

import asyncio
import json


from agent_server.offline import text_stream, tool_call_stream
from agent_server.host.commands import INIT_PROMPT, unknown_command_text
from agent_server.host.lifecycle import history_updates
from agent_server.session import read_events


async def start(factory, endpoint, workspace, **kw):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, **kw)
    await h.initialize()
    session = await h.new_session(str(workspace))
    return h, session.session_id


def events(state_dir, sid):
    return read_events(state_dir / "sessions" / sid / "events.jsonl")


async def test_available_commands_arrive_after_the_session_new_response(acp_harness_factory, endpoint, workspace):
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    update = await h.wait_for_update("available_commands_update", session_id=sid)
    names = [c["name"] for c in update.message["params"]["update"]["availableCommands"]]
    assert names == ["mode", "model", "usage", "init", "compact", "undo", "redo", "checkpoints"]
    transcript = h.transcript.snapshot()
    answered = transcript.index(h.transcript.response_to(h.transcript.requests("session/new")[0]))
    assert transcript.index(update) > answered


async def test_slash_commands_could_not_be_completed_before_the_first_session(acp_harness_factory, endpoint):
    """ACP sends the slash commands with a session (``available_commands_update``), so an editor had
    none to complete before its first prompt. The ``initialize`` answer lists them too, in
    ``_meta.agentServer.availableCommands`` (the same list, valid ``AvailableCommand``s), answered by
    the start-up fast path like the rest of it; the whole answer stays valid ACP."""
    from support.acp_schema import load_schema

    from agent_server.host.commands import COMMANDS

    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    init = await h.initialize()
    listed = init.field_meta["agentServer"]["availableCommands"]
    assert listed == COMMANDS and [c["name"] for c in listed][:3] == ["mode", "model", "usage"]
    schema = load_schema()
    assert [schema.errors("AvailableCommand", c) for c in listed] == [[] for _ in listed]
    answer = h.transcript.response_to(h.transcript.requests("initialize")[0])
    assert schema.errors("InitializeResponse", answer.message["result"]) == []
    assert h.validate().ok, h.validate()
    assert endpoint.requests == []  # no session, no model


async def test_mode_command_switches_mode_without_a_model_request(acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(tool_call_stream([("w", "write", json.dumps({"path": "x.txt", "content": "x"}))]))
    endpoint.push(text_stream("ok"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "/mode read-only")).stop_reason == "end_turn"
    assert endpoint.requests == []
    assert h.updates(sid, "current_mode_update")[-1]["currentModeId"] == "read-only"
    assert (await h.prompt(sid, "write x")).stop_reason == "end_turn"
    assert not (workspace / "x.txt").exists()
    first = endpoint.requests[0].json()
    assert "read-only" in first["messages"][0]["content"]
    assert all("/mode" not in str(m.get("content")) for m in first["messages"])  # a command is not a message
    kinds = [e.type for e in events(agent_state_dir, sid)]
    assert "command" in kinds and kinds.count("mode/changed") == 2


async def test_model_command_changes_the_next_requests_model(acp_harness_factory, endpoint, workspace, agent_state_dir,
                                                             tmp_path):
    endpoint.push(text_stream("one"))
    endpoint.push(text_stream("two"))
    config = tmp_path / "config.toml"
    config.write_text('[[models]]\nid = "other-model"\n')  # the default (test-model) is listed first
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(config)})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "hi")
    assert (await h.prompt(sid, "/model unlisted-model")).stop_reason == "end_turn"
    assert "Unknown model 'unlisted-model'" in h.agent_text(sid)
    assert (await h.prompt(sid, "/model other-model")).stop_reason == "end_turn"
    assert "other-model" in h.agent_text(sid)
    await h.prompt(sid, "again")
    assert [r.json()["model"] for r in endpoint.requests] == ["test-model", "other-model"]
    assert [e.data["to"] for e in events(agent_state_dir, sid) if e.type == "model/changed"] == ["other-model"]


async def test_usage_command_reports_tokens_and_usage_update_follows_each_step(acp_harness_factory, endpoint, workspace):
    # a provider's count above the characters' estimate (≈ 1,960 tokens: the system prompt and the
    # tools) is taken as it is; a lower one never lowers the meter below what the request carries
    endpoint.push(text_stream("answer", usage={"prompt_tokens": 2500, "completion_tokens": 30, "total_tokens": 2530}))
    endpoint.push(text_stream("answer", usage={"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, "hi")
    (usage,) = h.updates(sid, "usage_update")
    assert usage["used"] == 2530 and usage["size"] > 2530
    await h.prompt(sid, "/usage")
    assert "2,530" in h.agent_text(sid) and "1 model request," in h.agent_text(sid)
    await h.prompt(sid, "again")
    low = h.updates(sid, "usage_update")[-1]
    assert 1900 < low["used"] < 2530  # the estimate of what the next request carries, not the provider's 150


async def test_agents_md_is_in_the_first_request_and_a_change_is_logged_and_sent(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "AGENTS.md").write_text("Always run `make check` before finishing.\n")
    endpoint.push(text_stream("one"))
    endpoint.push(text_stream("two"))
    endpoint.push(text_stream("three"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, "hi")
    assert "Always run `make check`" in endpoint.requests[0].json()["messages"][0]["content"]
    await h.prompt(sid, "again")  # unchanged: no new event
    (workspace / "AGENTS.md").write_text("Use tabs, never spaces.\n")
    await h.prompt(sid, "and now")
    messages = endpoint.requests[2].json()["messages"]
    assert messages[0] == endpoint.requests[0].json()["messages"][0]  # the system message is never rewritten
    note = messages[-2]  # told before the prompt it preceded
    assert note["role"] == "user" and note["content"].startswith("[agent-server notice]")
    assert "Use tabs, never spaces." in note["content"] and "make check" not in note["content"]
    assert messages[-1] == {"role": "user", "content": "and now"}
    logged = [e.data["files"] for e in events(agent_state_dir, sid) if e.type == "project/instructions"]
    assert len(logged) == 2 and "make check" in logged[0][0]["text"] and "tabs" in logged[1][0]["text"]


async def test_first_turn_names_the_session(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("one"))
    endpoint.push(text_stream("two"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, "Fix the flaky login test\nDetails follow")
    await h.prompt(sid, "second")
    titles = h.updates(sid, "session_info_update")
    assert [t["title"] for t in titles] == ["Fix the flaky login test"]
    listed = await h.request("session/list", {"cwd": str(workspace)})
    assert listed["sessions"][0]["title"] == "Fix the flaky login test"


async def test_init_command_asks_the_model_to_write_agents_md(acp_harness_factory, endpoint, workspace):
    endpoint.push(tool_call_stream([("w", "write", json.dumps({"path": "AGENTS.md", "content": "# Project\n"}))]))
    endpoint.push(text_stream("wrote it"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "/init")).stop_reason == "end_turn"
    assert endpoint.requests[0].json()["messages"][-1] == {"role": "user", "content": INIT_PROMPT}
    assert (workspace / "AGENTS.md").read_text() == "# Project\n"


async def test_session_list_matches_the_folder_not_the_spelling(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("one"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await h.prompt(sid, "hi")
    for spelling in (str(workspace), str(workspace) + "/", str(workspace) + "/."):
        listed = await h.request("session/list", {"cwd": spelling})
        assert [s["sessionId"] for s in listed["sessions"]] == [sid]


async def test_two_slash_command_replies_sent_close_together_were_joined_into_one_chunk(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    # A command's reply carried no messageId, so the server's chunk batching joined two replies sent
    # within its window (commands typed while an answer streamed) into one text no client could
    # split again ("…# optional: profile, context_window, priceUnknown command /bogus…").
    endpoint.push(text_stream("word " * 200, chunk_size=5, delay=0.01))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    turn = h.start_prompt(sid, "a long answer")
    await h.wait_for_update("agent_message_chunk", session_id=sid)  # the answer streams
    answers = await asyncio.gather(h.prompt(sid, "/checkpoints"), h.prompt(sid, "/bogus"))
    assert [a.stop_reason for a in answers] == ["end_turn", "end_turn"]
    await turn
    logged = [e for e in events(agent_state_dir, sid) if e.type == "command"]
    replies = {e.seq: (unknown_command_text("bogus") if e.data["name"] == "bogus" else e.data["outcome"])
               for e in logged}
    assert len(replies) == 2
    chunks = h.updates(sid, "agent_message_chunk")
    for seq, text in replies.items():
        carrying = [c for c in chunks if c.get("messageId") == f"cmd-{seq}"]
        assert [c["content"]["text"] for c in carrying] == [text], f"the reply of command {seq} was not one chunk of its own"
    assert all(c.get("messageId", "").startswith("msg-") for c in chunks
               if c["content"]["text"] not in replies.values() and not c.get("_meta"))  # the answer's own
    # session/load replays each reply with the same messageId
    replay = history_updates(events(agent_state_dir, sid), [str(workspace)])
    replayed = {u["content"]["text"]: u.get("messageId") for u in replay if u["sessionUpdate"] == "agent_message_chunk"}
    shown = [e.seq for e in logged if e.data["name"] == "checkpoints"]  # /bogus is not shown again
    assert [replayed.get(replies[seq]) for seq in shown] == [f"cmd-{seq}" for seq in shown]
