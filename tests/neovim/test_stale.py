"""Stale said before, not after (issue 29 item 3, docs/protocol.md "Stale said at once"): typing in a
file whose edit proposal is under review marks it stale at once — in the diff view and the chat —
and offers "ask the agent again on the current text"; accept is refused as before (no re-basing)."""

from __future__ import annotations

from support.nvim import editor_with_pending_edit, push, tool_messages

from agent_server.offline import text_stream


def type_in_file(ed, path) -> None:
    ed.lua("local b = require('agent_server.buffers').find(...); "
           "vim.api.nvim_buf_set_lines(b, 0, 0, false, {'# typed while the proposal waited'})", str(path))


def test_typing_in_a_file_with_a_pending_proposal_marks_it_stale_at_once_and_accept_is_refused(
        make_editor, endpoint, workspace):
    path = workspace / "w.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "v = 1", "v = 2", text_stream("ok"))
    type_in_file(ed, path)
    ed.wait("return require('agent_server.proposals').latest().stale == true", what="stale said at once")
    assert "stale — you changed w.py" in ed.chat()  # before any accept
    marks = ed.lua("local p = require('agent_server.proposals').latest(); local v = p.docs[1].view; "
                   "return #vim.api.nvim_buf_get_extmarks(v.prop_buf, -1, 0, -1, {details = true, type = 'virt_lines'})")
    assert marks >= 1  # the diff view says it too
    ed.cmd("AgentAccept")
    ed.idle()
    assert "Edit w.py: not applied — stale" in ed.chat()
    assert ed.buffer_text(path) == "# typed while the proposal waited\nv = 1\n"  # nothing re-based onto it


def test_typing_back_to_the_text_the_agent_read_lifts_the_stale_mark(make_editor, endpoint, workspace):
    path = workspace / "b.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "b = 1", "b = 2", text_stream("ok"))
    type_in_file(ed, path)
    ed.wait("return require('agent_server.proposals').latest().stale == true", what="stale")
    ed.lua("local b = require('agent_server.buffers').find(...); vim.api.nvim_buf_set_lines(b, 0, 1, false, {})",
           str(path))
    ed.wait("return require('agent_server.proposals').latest().stale == false", what="no longer stale")
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "b = 2\n"


def test_ask_again_answers_the_stale_proposal_with_a_request_to_redo_it_on_the_current_text(
        make_editor, endpoint, workspace):
    path = workspace / "a.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "a = 1", "a = 2", text_stream("I will redo it"))
    type_in_file(ed, path)
    ed.wait("return require('agent_server.proposals').latest().stale == true", what="stale")
    ed.cmd("AgentAskAgain")
    ed.idle()
    result = tool_messages(endpoint, 2)[-1]["content"]
    # the stale answer is the request: the model is told to read the file again and redo the change
    assert "changed in the editor since you read it" in result and "Read it again and redo the change" in result, result
    # after the proposal was answered, asking again is a prompt that says so
    push(endpoint, text_stream("on it"))
    ed.cmd("AgentAskAgain")
    ed.idle()
    last_user = [m for m in endpoint.requests[-1].json()["messages"] if m["role"] == "user"][-1]["content"]
    assert "Read a.py again and redo your change to it on its current text" in str(last_user)
