"""The smaller failures of issue 29 (item 6), each after its own words, in a real Neovim against the
real server: a prompt queued when the server is killed, tool-line notes cut without an ellipsis, a
401 without a hint where the key goes."""

from __future__ import annotations

import os
import signal

from support.nvim import call, editor_with_pending_edit, push

from agent_server.offline import text_stream


def test_a_prompt_queued_when_the_server_is_killed_is_not_drawn_as_started_and_lost_silently(
        make_editor, endpoint, workspace):
    path = workspace / "q.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "q = 1", "q = 2")
    ed.cmd("AgentAsk the second question")  # queued behind the turn that waits for the proposal
    session = ed.lua("return require('agent_server.client').state.session_id")
    ed.note_server()
    (pid,) = ed.server_pids
    os.killpg(pid, signal.SIGKILL)
    ed.wait("return require('agent_server.chat').text():find('agent-server exited', 1, true) ~= nil", what="the exit")
    ed.idle()
    chat = ed.chat()
    assert 'Not sent: "the second question" was queued behind that turn and never ran' in chat, chat
    assert "## You\nthe second question" not in chat  # never drawn as a turn that started
    assert f"It resumes session {session}" in chat  # started again at once
    ed.wait("return require('agent_server.transcript').prompt_text() == 'the second question'",
            what="the lost prompt given back in the prompt area")


def test_tool_line_notes_are_cut_with_an_ellipsis_and_keep_their_last_words_when_they_fit(
        make_editor, endpoint, workspace):
    long_name = "a-file-whose-name-is-long-" * 10 + ".txt"
    push(endpoint, call("r1", "read", path=long_name), call("r2", "read", path="missing.txt"), text_stream("done"))
    ed = make_editor()
    ed.cmd("AgentAsk read them")
    ed.idle()
    lines = [line for line in ed.chat().splitlines() if line.startswith("- ✗")]
    assert len(lines) == 2, ed.chat()
    assert lines[0].endswith("…"), lines[0]  # cut, and said to be cut
    assert not lines[1].endswith("…") and lines[1].endswith("."), lines[1]  # a whole sentence fits


def test_a_401_says_where_the_api_key_goes(make_editor, endpoint):
    endpoint.push({"kind": "error", "status": 401, "json": {"error": {"message": "Invalid API key"}}})
    ed = make_editor()
    ed.cmd("AgentAsk hello")
    ed.idle()
    chat = ed.chat()
    assert "**error:**" in chat
    assert "AGENT_SERVER_API_KEY" in chat and "agent-server login" in chat and ":AgentRestart" in chat, chat
