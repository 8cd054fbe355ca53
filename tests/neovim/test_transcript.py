"""The chat transcript's bookkeeping against the real agent-server: tool lines keyed by session, a
tool killed with the server, failed tools with their reason, a refused load, the proposal's echo
line and who cancelled it, a prompt sent while another turn runs."""

from __future__ import annotations

import json
import os
import signal

from support.nvim import call, editor_with_pending_edit, push

from agent_server.offline import text_stream


def tool_lines(chat: str) -> list[str]:
    return [line for line in chat.splitlines() if line.startswith("- ")]


def test_after_a_kill_the_running_tool_shows_unfinished_and_the_new_sessions_first_call_gets_its_own_line(
        make_editor, endpoint, workspace):
    path = workspace / "calc.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "x = 1", "x = 2")
    ed.note_server()
    (pid,) = ed.server_pids
    os.killpg(pid, signal.SIGKILL)
    ed.wait("return require('agent_server.chat').text():find('agent-server exited', 1, true) ~= nil", what="the exit")
    ed.idle()
    assert tool_lines(ed.chat()) == ["- ✓ Read calc.py", "- ⚠ Edit calc.py (unfinished)"], ed.chat()
    # one report for one kill: the exit line, not also the prompt's '**error:** the server exited'
    assert ed.chat().count("agent-server exited") == 1 and "**error:**" not in ed.chat(), ed.chat()
    push(endpoint, call("r2", "read", path="calc.py"), text_stream("read it again"))
    ed.cmd("AgentAsk read it")
    ed.idle()
    chat = ed.chat()
    # the resumed session's next call is a line of its own; the call the dead server left open is
    # closed on its own line with the reason the resuming server gives (no stray "tool" line)
    lines = tool_lines(chat)
    assert len(lines) == 3 and lines[0] == lines[2] == "- ✓ Read calc.py", chat
    assert lines[1].startswith("- ✗ Edit calc.py — Interrupted: agent-server stopped"), chat
    assert chat.rstrip().endswith("_— stop: end_turn —_") and "read it again" in chat


def test_after_the_server_was_killed_the_next_prompt_started_a_new_session_in_neovim(
        make_editor, endpoint, workspace):
    """Newcomer 5 finding h: after ``kill -9`` of the server the next prompt started a *new* session
    ("The next prompt starts a new session; `:AgentSessions` loads session sess_… again"), while VS
    Code's Restart Server resumes it. The next prompt starts the server again and resumes the session
    the chat shows (``session/resume``): the model's request carries the earlier turns, the id is
    the old one; the proposal that waited is marked unfinished."""
    path = workspace / "h.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "h = 1", "h = 2")
    session = ed.lua("return require('agent_server.client').state.session_id")
    ed.note_server()
    (pid,) = ed.server_pids
    os.killpg(pid, signal.SIGKILL)
    ed.wait("return require('agent_server.chat').text():find('agent-server exited', 1, true) ~= nil", what="the exit")
    ed.idle()
    assert tool_lines(ed.chat()) == ["- ✓ Read h.txt", "- ⚠ Edit h.txt (unfinished)"], ed.chat()
    assert f"resumes session {session}" in ed.chat(), ed.chat()
    asked = len(endpoint.requests)
    push(endpoint, text_stream("I remember the file"))
    ed.cmd("AgentAsk what did you read")
    ed.idle()
    chat = ed.chat()
    assert ed.lua("return require('agent_server.client').state.session_id") == session, chat
    assert f"session {session} resumed: the agent still has everything above" in chat, chat
    assert "new session" not in chat.split("agent-server exited", 1)[1], chat
    sent = json.loads(endpoint.requests[-1].body)["messages"]
    assert len(endpoint.requests) == asked + 1
    said = [m.get("content") for m in sent if m["role"] == "user"]
    assert said[0].startswith("change it") and said[-1].startswith("what did you read"), said
    assert any(m["role"] == "tool" and "h = 1" in str(m.get("content")) for m in sent), sent  # the read's result
    assert "I remember the file" in chat and chat.rstrip().endswith("_— stop: end_turn —_"), chat
    lines = tool_lines(chat)  # the waiting edit stays one line, closed with the server's reason
    assert len(lines) == 2 and lines[1].startswith("- ✗ Edit h.txt — Interrupted"), chat


def test_a_failed_tool_line_keeps_its_reason_live_and_when_the_session_is_loaded(make_editor, endpoint, workspace):
    push(endpoint, call("r", "read", path="missing.txt"), text_stream("no such file"))
    ed = make_editor()
    ed.cmd("AgentAsk read missing.txt")
    ed.idle()
    (line,) = tool_lines(ed.chat())
    assert line.startswith("- ✗ Read missing.txt — ") and len(line) > len("- ✗ Read missing.txt — "), line
    first = ed.lua("return require('agent_server.client').state.session_id")
    ed.cmd("AgentNew")
    ed.wait("return require('agent_server.client').state.session_id ~= ...", first, what="a new session")
    ed.choose(first)
    ed.cmd("AgentSessions")
    ed.wait("return require('agent_server.chat').text():find('replayed', 1, true) ~= nil", what="the load")
    replay = ed.chat().rsplit(f"# Session {first} (loaded)", 1)[1]
    assert tool_lines(replay) == [line], replay  # the replayed call carries its reason too


def test_a_load_refused_because_another_process_has_the_session_leaves_the_chat_on_its_own_session(
        make_editor, endpoint, workspace):
    push(endpoint, text_stream("first window's answer"), text_stream("second window's answer"),
         text_stream("still in my session"))
    one = make_editor()
    one.cmd("AgentAsk hello from one")
    one.idle()
    busy = one.lua("return require('agent_server.client').state.session_id")
    two = make_editor()
    two.cmd("AgentAsk hello from two")
    two.idle()
    mine = two.lua("return require('agent_server.client').state.session_id")
    two.choose(busy)
    two.cmd("AgentSessions")
    two.wait("return require('agent_server.chat').text():find('could not load session', 1, true) ~= nil",
             what="the refusal")
    chat = two.chat()
    assert f"# Session {busy} (not loaded)" in chat and f"# Session {busy} (loaded)" not in chat, chat
    assert "another agent-server process" in chat and f"this chat stays on session {mine}" in chat, chat
    assert two.lua("return require('agent_server.client').state.session_id") == mine
    assert f"session {mine[:12]}" in chat.splitlines()[0], chat.splitlines()[0]  # the header too
    two.cmd("AgentAsk are you there")
    two.idle()
    assert "still in my session" in two.chat()


def test_a_rejected_proposal_leaves_its_outcome_in_the_echo_area_not_the_accept_hint(make_editor, endpoint, workspace):
    path = workspace / "k.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "keep", "x", text_stream("ok"))
    ed.cmd("AgentReject")
    ed.idle()
    assert ed.lua("return vim.v.statusmsg") == "" or ":AgentAccept" not in ed.lua("return vim.v.statusmsg")
    messages = ed.lua("return vim.api.nvim_exec2('messages', { output = true }).output")
    assert messages.rstrip().splitlines()[-1] == "agent-server: Edit k.txt: rejected", messages


def test_agent_cancel_says_the_user_cancelled_the_proposal_not_the_agent(make_editor, endpoint, workspace):
    path = workspace / "k.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "keep", "x")
    ed.cmd("AgentCancel")
    ed.idle()
    chat = ed.chat()
    assert "Edit k.txt: cancelled — you cancelled the turn" in chat and "cancelled by the agent" not in chat, chat


def test_a_prompt_sent_while_a_turn_runs_is_queued_and_drawn_after_that_turn_ends(make_editor, endpoint, workspace):
    path = workspace / "calc.py"
    path.write_text("x = 1\n")
    push(endpoint, call("r", "read", path="calc.py"), call("e", "edit", path="calc.py", old_string="x = 1", new_string="x = 2"),
         text_stream("(The change is in your workspace.)"), text_stream("I'll read the code first."))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentChat")
    ed.cmd("AgentAsk prompt A")
    ed.proposal_open()
    ed.cmd("AgentAsk prompt B")
    assert "prompt B" not in ed.chat()  # queued on the server behind A: not drawn yet
    messages = ed.lua("return vim.api.nvim_exec2('messages', { output = true }).output")
    assert 'queued "prompt B"' in messages, messages
    ed.cmd("AgentAccept")
    ed.idle()
    chat = ed.chat()
    sections = [line for line in chat.splitlines() if line.startswith("## ")]
    assert sections == ["## You", "## Agent", "## You", "## Agent"], chat
    order = ["prompt A", "- ✓ Edit calc.py", "(The change is in your workspace.)", "_— stop: end_turn —_",
             "prompt B", "I'll read the code first."]
    at = [chat.index(s) for s in order]
    assert at == sorted(at), chat
    assert chat.count("_— stop: end_turn —_") == 2 and chat.rstrip().endswith("_— stop: end_turn —_")


def test_agent_new_twice_leaves_no_empty_session_the_next_prompt_makes_it(make_editor, endpoint, workspace):
    push(endpoint, text_stream("first answer"), text_stream("second answer"))
    ed = make_editor()
    ed.cmd("AgentAsk hello")
    ed.idle()
    first = ed.lua("return require('agent_server.client').state.session_id")
    ed.cmd("AgentNew")
    ed.cmd("AgentNew")
    assert ed.lua("return require('agent_server.client').state.session_id") is None
    assert "new session: it starts with your next prompt" in ed.chat()
    ed.lua("""_G.listed = nil
        require('agent_server.client').list_sessions(function(err, sessions) _G.listed = sessions end)""")
    listed = ed.wait("return _G.listed", what="session/list")
    assert [s["sessionId"] for s in listed] == [first]  # no empty sessions made by :AgentNew
    ed.cmd("AgentAsk again")
    ed.idle()
    second = ed.lua("return require('agent_server.client').state.session_id")
    assert second not in (None, first) and "second answer" in ed.chat()


def test_agent_restart_started_a_new_session_where_vs_codes_restart_server_resumes_it(make_editor, endpoint):
    """The class of finding h: ``:AgentRestart`` said "the next prompt starts a new session"; VS
    Code's Restart Server resumes it. The restarted server resumes the session the chat shows."""
    push(endpoint, text_stream("first answer"), text_stream("second answer"))
    ed = make_editor()
    ed.cmd("AgentAsk remember the word kiwi")
    ed.idle()
    session = ed.lua("return require('agent_server.client').state.session_id")
    ed.cmd("AgentRestart")
    ed.wait("return require('agent_server.chat').text():find('resumed: the agent still has', 1, true) ~= nil",
            what="the resume")
    assert "new session" not in ed.chat().split("was restarted", 1)[1], ed.chat()
    ed.cmd("AgentAsk which word")
    ed.idle()
    assert ed.lua("return require('agent_server.client').state.session_id") == session
    said = [m["content"] for m in json.loads(endpoint.requests[-1].body)["messages"] if m["role"] == "user"]
    assert said[0].startswith("remember the word kiwi") and said[-1].startswith("which word"), said


def test_a_server_that_could_not_start_again_after_the_kill_lost_the_session_to_resume(
        make_editor, endpoint, tmp_path):
    """The class of finding h: the restart after the kill, and the first prompt after it, find no server
    to start (its command gone meanwhile): not sent, and the session is still the one resumed by the
    prompt after it."""
    push(endpoint, text_stream("first answer"), text_stream("second answer"))
    ed = make_editor()
    ed.cmd("AgentAsk remember the word plum")
    ed.idle()
    session = ed.lua("return require('agent_server.client').state.session_id")
    ed.note_server()
    (pid,) = ed.server_pids
    cmd = ed.lua("return require('agent_server.config').get().cmd")
    ed.lua("require('agent_server.config').get().cmd = { ... }", str(tmp_path / "gone-agent-server"))
    os.killpg(pid, signal.SIGKILL)  # started again at once: that start fails, and says so
    ed.wait("return require('agent_server.chat').text():find('did not start again', 1, true) ~= nil",
            what="the failed restart said")
    ed.choose("cancel")
    ed.cmd("AgentAsk which word")
    ed.wait("return require('agent_server.chat').text():find('Not sent:', 1, true) ~= nil", what="the failure")
    ed.lua("require('agent_server.config').get().cmd = ...", cmd)
    ed.cmd("AgentAsk which word")
    ed.idle()
    assert ed.lua("return require('agent_server.client').state.session_id") == session, ed.chat()
    said = [m["content"] for m in json.loads(endpoint.requests[-1].body)["messages"] if m["role"] == "user"]
    assert said[0].startswith("remember the word plum") and said[-1].startswith("which word"), said
