"""End to end: the ``accept-edits`` mode (issue 30 item 10) through the official ACP Python SDK, the
real server, scripted model turns and an in-memory editor that takes proposals and writes its
buffers (``support.editor.MemoryEditor``). The agent's edits inside the workspace land without a
proposal or a question, are still shown with their diff and are taken back by ``/undo`` exactly
as reviewed ones; everything else (writes outside, shell commands) is workspace-write's. Every
test's model requests are replayed byte-exact from the log (``support.replay_check``)."""

from __future__ import annotations

import subprocess

from support.acp_client import ClientConfig
from support.client_impl import APPLY_WORKSPACE_EDIT, MemoryFs
from support.editor import Buffer, MemoryEditor
from support.sessions import call, config_env, events

from agent_server.agent.prefix import prefix_report
from agent_server.offline import text_stream, tool_call_stream

NO_SANDBOX = {"AGENT_SERVER_SANDBOX": "off"}
EXTENSION = {"version": 1, "bufferVersions": True, "applyWorkspaceEdit": True, "positionEncodings": ["utf-16"]}


def script(endpoint, *steps, final="done"):
    for calls in steps:
        endpoint.push(tool_call_stream(calls))
    endpoint.push(text_stream(final))


async def start(factory, endpoint, workspace, editor: MemoryEditor, *, permission="reject_once", env=None,
                mode: str | None = "accept-edits"):
    config = ClientConfig(read_text_file=editor.read, write_text_file=editor.write, permission=permission,
                          ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                          agent_server_extension=EXTENSION)
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    if mode is not None:
        await h.conn.set_session_mode(session_id=sid, mode_id=mode)
    return h, sid


def asks(h) -> list[dict]:
    return [p for m, p in h.client.calls if m == "session/request_permission"]


def decisions(state_dir, sid, tool=None) -> list[dict]:
    return [e.data for e in events(state_dir, sid) if e.type == "policy/decision" and tool in (None, e.data["tool"])]


def tool_results(endpoint, index=-1) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in endpoint.requests[index].json()["messages"] if m["role"] == "tool"}


def text_of(h, sid) -> str:
    return "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))


def git_init(root):
    subprocess.run(["git", "init", "-q", str(root)], check=True)


def edit_of_a(endpoint, final="shouted"):
    script(endpoint, [call("r", "read", path="a.txt")],
           [call("e", "edit", path="a.txt", old_string="alpha", new_string="ALPHA")], final=final)


async def test_accept_edits_applies_an_edit_without_review_shows_its_diff_and_undo_takes_it_back(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    git_init(workspace)
    path = workspace / "a.txt"
    path.write_text("alpha\n")
    editor = MemoryEditor({str(path): Buffer("alpha\n", version=4)})
    h, sid = await start(acp_harness_factory, endpoint, workspace, editor)
    edit_of_a(endpoint)
    assert (await h.prompt(sid, "shout alpha")).stop_reason == "end_turn"

    assert editor.proposals == [] and asks(h) == []  # no review, no question
    (write,) = editor.writes  # into the open buffer, guarded by the document the agent read
    assert write["content"] == "ALPHA\n"
    assert write["_meta"]["agentServer"]["version"] == 4
    assert editor.buffers[str(path)].text == "ALPHA\n" and path.read_text() == "ALPHA\n"  # clean: saved
    # the card shows the diff, and ends completed
    card = [u for u in h.updates(sid, "tool_call_update") if u["toolCallId"] == write_call(h, sid)]
    diffs = [c for u in card for c in (u.get("content") or []) if c["type"] == "diff"]
    assert diffs and diffs[0]["oldText"] == "alpha\n" and diffs[0]["newText"] == "ALPHA\n"
    assert card[-1]["status"] == "completed"
    (decision,) = decisions(agent_state_dir, sid, "edit")
    assert (decision["mode"], decision["rule"], decision["outcome"]) == ("accept-edits", "accept-edits", "allow")
    assert "unsaved" not in tool_results(endpoint)["e"]

    # /undo takes it back as it takes back a reviewed edit: the restore is the editor's proposal
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    (restore,) = editor.proposals
    assert restore["edit"]["documentChanges"][-1]["edits"][0]["newText"] == "alpha"
    assert editor.buffers[str(path)].text == "alpha\n" and path.read_text() == "alpha\n"
    assert "a.txt: restored" in text_of(h, sid)


def write_call(h, sid) -> str:
    """The ``toolCallId`` of the session's ``edit`` call."""
    return next(u["toolCallId"] for u in h.updates(sid, "tool_call") if u.get("kind") == "edit")


async def test_undo_of_an_accepted_edit_keeps_the_users_later_save(acp_harness_factory, endpoint, workspace):
    git_init(workspace)
    path = workspace / "a.txt"
    path.write_text("alpha\n")
    editor = MemoryEditor({str(path): Buffer("alpha\n", version=1)}, decide=lambda params, hunks: "reject")
    h, sid = await start(acp_harness_factory, endpoint, workspace, editor)
    edit_of_a(endpoint)
    assert (await h.prompt(sid, "shout alpha")).stop_reason == "end_turn"
    assert path.read_text() == "ALPHA\n"
    # the user adds a line and saves
    buffer = editor.buffers[str(path)]
    buffer.text, buffer.version = "ALPHA\nmine\n", buffer.version + 1
    path.write_text(buffer.text)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    # the restore over the user's text is asked first (Keep mine), never proposed or applied unasked
    (question,) = asks(h)
    assert question["toolCall"]["title"] == "a.txt changed since the agent's edit"
    assert editor.proposals == []
    assert buffer.text == "ALPHA\nmine\n" and path.read_text() == "ALPHA\nmine\n"
    assert "kept the user's version" in text_of(h, sid)


async def test_accept_edits_writes_into_a_dirty_buffer_without_saving_it_and_tells_the_model(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "a.txt"
    path.write_text("alpha\n")
    editor = MemoryEditor({str(path): Buffer("alpha\nunsaved line\n", version=7, dirty=True)})
    h, sid = await start(acp_harness_factory, endpoint, workspace, editor)
    edit_of_a(endpoint)
    assert (await h.prompt(sid, "shout alpha")).stop_reason == "end_turn"
    assert editor.buffers[str(path)].text == "ALPHA\nunsaved line\n"
    assert path.read_text() == "alpha\n"  # never saved behind the user's back
    result = tool_results(endpoint)["e"]
    assert "unsaved changes" in result and "disk still has the old text" in result


async def test_accept_edits_never_writes_over_a_keystroke_typed_after_the_agent_read_the_buffer(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    path = workspace / "a.txt"
    path.write_text("alpha\n")

    def keystroke(ed, p):  # the user types right before the write arrives
        ed.buffers[p].text, ed.buffers[p].version = "alpha!\n", ed.buffers[p].version + 1
        ed.buffers[p].dirty = True

    editor = MemoryEditor({str(path): Buffer("alpha\n", version=1)}, before_apply=keystroke)
    h, sid = await start(acp_harness_factory, endpoint, workspace, editor)
    edit_of_a(endpoint)
    assert (await h.prompt(sid, "shout alpha")).stop_reason == "end_turn"
    assert editor.buffers[str(path)].text == "alpha!\n" and path.read_text() == "alpha\n"
    result = tool_results(endpoint)["e"]
    assert result.startswith("Not written:") and "Read it again" in result
    (res,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result" and e.data["call_id"] == "e"]
    assert "changed in the editor since it was read" in str(res)


async def test_accept_edits_keeps_bom_crlf_and_no_final_newline_of_a_file_no_buffer_holds(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "a.txt"
    original = b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma"
    path.write_bytes(original)
    editor = MemoryEditor()  # not open: the guarded disk write, not fs/write_text_file
    h, sid = await start(acp_harness_factory, endpoint, workspace, editor)
    edit_of_a(endpoint)
    assert (await h.prompt(sid, "shout alpha")).stop_reason == "end_turn"
    assert path.read_bytes() == b"\xef\xbb\xbfALPHA\r\nbeta\r\ngamma"
    assert editor.writes == [] and editor.proposals == [] and asks(h) == []


async def test_accept_edits_still_refuses_an_edit_outside_the_workspace(
        acp_harness_factory, endpoint, workspace, tmp_path, agent_state_dir):
    outside = tmp_path / "outside.txt"
    outside.write_text("alpha\n")
    editor = MemoryEditor()
    h, sid = await start(acp_harness_factory, endpoint, workspace, editor)
    script(endpoint, [call("w", "write", path=str(outside), content="ALPHA\n")], final="refused")
    assert (await h.prompt(sid, "write outside")).stop_reason == "end_turn"
    assert outside.read_text() == "alpha\n"
    assert editor.writes == [] and editor.proposals == [] and asks(h) == []
    (decision,) = decisions(agent_state_dir, sid, "write")
    assert (decision["rule"], decision["outcome"]) == ("workspace-boundary", "deny")
    result = tool_results(endpoint)["w"]
    assert "outside the workspace" in result and "In accept-edits mode writes are only allowed" in result


async def test_accept_edits_asks_about_a_shell_command_as_workspace_write_does(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    editor = MemoryEditor()
    h, sid = await start(acp_harness_factory, endpoint, workspace, editor, env=NO_SANDBOX, mode=None)
    script(endpoint, [call("b1", "bash", command="echo one > one.txt")], final="first")
    assert (await h.prompt(sid, "one")).stop_reason == "end_turn"
    await h.conn.set_session_mode(session_id=sid, mode_id="accept-edits")
    script(endpoint, [call("b2", "bash", command="echo one > one.txt")], final="second")
    assert (await h.prompt(sid, "again")).stop_reason == "end_turn"
    first, second = decisions(agent_state_dir, sid, "bash")
    assert (first["mode"], second["mode"]) == ("workspace-write", "accept-edits")
    assert (first["rule"], first["outcome"]) == (second["rule"], second["outcome"]) == ("no-sandbox", "deny")
    assert [a["toolCall"]["title"] for a in asks(h)] == ["Run `echo one > one.txt`"] * 2
    assert not (workspace / "one.txt").exists()


async def test_plain_acp_client_in_accept_edits_is_not_asked_about_an_edit(acp_harness_factory, endpoint, workspace):
    path = workspace / "p.txt"
    fs = MemoryFs({str(path): "alpha\n"})
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="reject_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    await h.conn.set_config_option(config_id="mode", session_id=sid, value="accept-edits")
    script(endpoint, [call("r", "read", path="p.txt")],
           [call("e", "edit", path="p.txt", old_string="alpha", new_string="beta")])
    assert (await h.prompt(sid, "beta")).stop_reason == "end_turn"
    assert fs.files[str(path)] == "beta\n" and asks(h) == []
    diffs = [c for u in h.updates(sid, "tool_call_update") for c in (u.get("content") or []) if c["type"] == "diff"]
    assert diffs and diffs[0]["newText"] == "beta\n"


async def test_accept_edits_is_advertised_chosen_by_every_way_and_told_to_the_model_by_a_note(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    new = await h.new_session(str(workspace))
    sid = new.session_id
    modes = {m.id: m for m in new.modes.available_modes}
    assert list(modes) == ["read-only", "workspace-write", "accept-edits", "danger-full-access"]
    assert modes["accept-edits"].name == "Accept edits" and "without review" in modes["accept-edits"].description
    option = new.config_options[0]
    assert option.id == "mode" and [o.value for o in option.options] == list(modes)
    endpoint.push(text_stream("first"))
    assert (await h.prompt(sid, "hi")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "/mode accept-edits")).stop_reason == "end_turn"
    assert h.updates(sid, "current_mode_update")[-1]["currentModeId"] == "accept-edits"
    endpoint.push(text_stream("second"))
    assert (await h.prompt(sid, "and now?")).stop_reason == "end_turn"
    first, second = (r.json()["messages"] for r in endpoint.requests)
    assert second[:len(first)] == first  # the system message is kept: a note tells the change
    note = second[-2]["content"]
    assert "Mode: accept-edits" in note and "without the user's review" in note
    log = events(agent_state_dir, sid)
    assert [(e.data["from"], e.data["to"], e.data["by"]) for e in log if e.type == "mode/changed"] == [
        (None, "workspace-write", "default_mode"), ("workspace-write", "accept-edits", "/mode")]
    assert any(e.type == "header/note" and "mode" in e.data["changes"] for e in log)
    assert prefix_report(log).unplanned == 0

    # [policy] default_mode starts a session in it
    h2 = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                        **config_env(tmp_path, '[policy]\ndefault_mode = "accept-edits"\n')})
    await h2.initialize()
    started = await h2.new_session(str(workspace))
    assert started.modes.current_mode_id == "accept-edits"
    assert started.config_options[0].current_value == "accept-edits"
