"""Stale said before, not after (issue 29 item 3, docs/protocol.md "Stale said at once"): typing in a
file whose edit proposal is under review marks it stale at once — in the diff view and the chat —
and offers "ask the agent again on the current text"; accept is refused as before (no re-basing) — unless
the user's typing is on other lines than the proposal's hunks and touches none of them: then accepting
applies the hunks on top of it (docs/protocol.md "Merged with the user's edits of other lines")."""

from __future__ import annotations

import pytest
from support.nvim import call, editor_with_pending_edit, push, tool_messages

from agent_server.offline import text_stream


STALE = "return require('agent_server.proposals').latest().stale == true"
NOT_STALE = "return require('agent_server.proposals').latest().stale == false"


def typed_until_stale(ed, path, what: str) -> None:
    """``type_in_file``, then wait until the proposal is marked stale (``what``: said while waiting)."""
    type_in_file(ed, path)
    ed.wait(STALE, what=what)


def type_in_file(ed, path) -> None:
    ed.lua("local b = require('agent_server.buffers').find(...); "
           "vim.api.nvim_buf_set_lines(b, 0, 0, false, {'# typed while the proposal waited'})", str(path))


def test_typing_in_a_file_with_a_pending_proposal_marks_it_stale_at_once_and_accept_is_refused(
        make_editor, endpoint, workspace):
    path = workspace / "w.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "v = 1", "v = 2", text_stream("ok"))
    typed_until_stale(ed, path, "stale said at once")
    assert "stale — you changed w.py" in ed.chat()  # before any accept
    assert "stale" in view_state(ed)["prop"]  # the diff view says it too
    ed.cmd("AgentAccept")
    ed.idle()
    assert "Edit w.py: not applied — stale" in ed.chat()
    assert ed.buffer_text(path) == "# typed while the proposal waited\nv = 1\n"  # nothing re-based onto it


def test_typing_back_to_the_text_the_agent_read_lifts_the_stale_mark(make_editor, endpoint, workspace):
    path = workspace / "b.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "b = 1", "b = 2", text_stream("ok"))
    typed_until_stale(ed, path, "stale")
    ed.lua("local b = require('agent_server.buffers').find(...); vim.api.nvim_buf_set_lines(b, 0, 1, false, {})",
           str(path))
    ed.wait(NOT_STALE, what="no longer stale")
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "b = 2\n"


def test_ask_again_answers_the_stale_proposal_with_a_request_to_redo_it_on_the_current_text(
        make_editor, endpoint, workspace):
    path = workspace / "a.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "a = 1", "a = 2", text_stream("I will redo it"))
    typed_until_stale(ed, path, "stale")
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


def view_state(ed):
    return ed.lua("local v = require('agent_server.proposals').latest().docs[1].view; "
                  "return {cur = vim.wo[v.cur_win].winbar, prop = vim.wo[v.prop_win].winbar, "
                  "lines = vim.api.nvim_buf_get_lines(v.cur_buf, 0, -1, false)}")


def test_the_stale_line_the_help_promised_was_not_shown_and_the_current_pane_kept_the_old_text(
        make_editor, endpoint, workspace):
    """F10: the stale line sat above the proposed buffer's first line (a virtual line there shows only
    once scrolled up: the user saw none, the winbar empty) and the "current" pane kept the text the
    agent read. Both panes' winbar says stale at once; the current pane shows the current text."""
    path = workspace / "s.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "s = 1", "s = 2", text_stream("ok"))
    assert view_state(ed) == {"cur": "", "prop": "", "lines": ["s = 1"]}
    typed_until_stale(ed, path, "stale said at once")
    state = view_state(ed)
    assert "stale" in state["cur"] and "you changed s.py" in state["prop"] and ":AgentAskAgain" in state["prop"], state
    assert state["lines"] == ["# typed while the proposal waited", "s = 1"]
    ed.lua("local b = require('agent_server.buffers').find(...); vim.api.nvim_buf_set_lines(b, -1, -1, false, {'t = 3'})",
           str(path))
    ed.wait("return #require('agent_server.proposals').latest().docs[1].view and "
            "vim.api.nvim_buf_line_count(require('agent_server.proposals').latest().docs[1].view.cur_buf) == 3",
            what="the current pane follows further typing")
    # typed back to what the agent read: not stale, the winbars are cleared, the pane shows that text
    ed.lua("local b = require('agent_server.buffers').find(...); vim.api.nvim_buf_set_lines(b, 0, -1, false, {'s = 1'})",
           str(path))
    ed.wait(NOT_STALE, what="no longer stale")
    assert view_state(ed) == {"cur": "", "prop": "", "lines": ["s = 1"]}
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "s = 2\n"


def test_accepting_a_proposal_for_a_file_deleted_meanwhile_re_created_it(make_editor, endpoint, workspace):
    """F7 in Neovim: the file (loaded in a buffer) is removed on disk while its proposal waits; Accept
    applied to the buffer and saved it, re-creating the file. It is stale: refused, with the ask-again
    path, and the file stays gone."""
    path = workspace / "gone.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "x", "y", text_stream("ok"))
    path.unlink()
    ed.cmd("AgentAccept")
    ed.idle()
    assert not path.exists()
    chat = ed.chat()
    assert "Edit gone.txt: not applied — stale" in chat and "deleted on disk" in chat, chat
    assert ed.buffer_text(path) == "x\n"  # the buffer the user has is not touched either
    result = tool_messages(endpoint, 2)[-1]["content"]
    assert "Read it again" in result, result


def test_accepting_a_proposal_for_an_unopened_file_deleted_meanwhile_is_refused_as_stale(
        make_editor, endpoint, workspace):
    path = workspace / "closed.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "x", "y", text_stream("ok"), opened=False)
    path.unlink()
    ed.cmd("AgentAccept")
    ed.idle()
    assert not path.exists() and "Edit closed.txt: not applied — stale" in ed.chat(), ed.chat()


def test_a_file_changed_on_disk_while_its_proposal_waited_was_said_changed_in_the_editor(
        make_editor, endpoint, workspace):
    """F11: a file another program changed on disk (not in the editor) while its proposal waited was
    refused as "changed in the editor". It says on disk — for a file not open, and for one a buffer
    holds (whose Accept would otherwise have saved over the other program's text)."""
    opened = workspace / "open.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, opened, "x", "y", text_stream("ok"))
    opened.write_text("another program's\n")
    ed.cmd("AgentAccept")
    ed.idle()
    assert opened.read_text() == "another program's\n"
    chat = ed.chat()
    assert "Edit open.txt: not applied — stale: the file changed on disk" in chat, chat
    assert "changed on disk" in tool_messages(endpoint, 2)[-1]["content"]

    closed = workspace / "closed.txt"
    editor_with_pending_edit(make_editor, endpoint, closed, "x", "y", text_stream("ok"), opened=False, ed=ed,
                             ids=("r2", "e2"))
    closed.write_text("changed on disk\n")
    ed.cmd("AgentAccept")
    ed.idle()
    assert closed.read_text() == "changed on disk\n"
    assert "Edit closed.txt: not applied — stale: the file changed on disk" in ed.chat(), ed.chat()


def test_a_file_changed_or_deleted_on_disk_while_its_proposal_waited_was_said_stale_only_on_accept(
        make_editor, endpoint, workspace):
    """F10's class: a change on disk (another program) marked nothing until Accept was refused. A
    watcher on the file's folder says it at once in the diff view and the chat, with where it changed."""
    path = workspace / "disk.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "x", "y", text_stream("ok"), opened=False)
    path.write_text("another program's\n")
    ed.wait(STALE, what="stale said at once")
    state = view_state(ed)
    assert "disk.txt changed on disk" in state["prop"] and ":AgentAskAgain" in state["prop"], state
    assert state["lines"] == ["another program's"]  # the current pane shows the file as it is now
    assert "stale — disk.txt changed on disk while it waited" in ed.chat(), ed.chat()
    path.write_text("x\n")  # back to what the agent read
    ed.wait(NOT_STALE, what="no longer stale")
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "y\n"

    gone = workspace / "gone.txt"
    ed2 = editor_with_pending_edit(make_editor, endpoint, gone, "a", "b", text_stream("ok"))
    gone.unlink()
    ed2.wait(STALE, what="deleted: stale at once")
    assert "gone.txt was deleted on disk" in view_state(ed2)["prop"], view_state(ed2)


def test_a_proposal_for_a_file_deleted_before_it_arrived_failed_as_unreadable_instead_of_stale(make_editor, workspace):
    """F7's class on arrival: the file the agent read was deleted before its proposal arrived; the
    answer was "failed: cannot read", which does not tell the model to read again. It is stale."""
    path = workspace / "early.txt"
    ed = make_editor()
    reply = ed.lua("""
        local path = ...
        local uri = vim.uri_from_fname(path)
        local answer
        require('agent_server.proposals').receive({
          params = { label = 'Edit early.txt', edit = { documentChanges = { {
            textDocument = { uri = uri, version = vim.NIL },
            edits = { { range = { start = { line = 0, character = 0 }, ['end'] = { line = 0, character = 1 } },
                        newText = 'y' } } } } },
            baseHashes = { [uri] = require('agent_server.text').sha256('x\\n') } },
          reply = function(r) answer = r end,
        }, 'utf-16')
        return answer""", str(path))
    assert reply["outcome"] == "stale" and "early.txt was deleted on disk" in reply["message"], reply
    assert not path.exists()


MERGED = "return require('agent_server.proposals').latest().docs[1].merged == true"
CRLF_BOM = b"\xef\xbb\xbfone\r\ntwo\r\nthree"  # BOM, CRLF, no final newline


def crlf_proposal(make_editor, endpoint, workspace):
    """``crlf.txt`` open, the agent's proposal (``two`` → ``TWO``/``more``, line 2) shown; the cursor in the file."""
    path = workspace / "crlf.txt"
    path.write_bytes(CRLF_BOM)
    push(endpoint, call("r", "read", path="crlf.txt"),
         call("e", "edit", path="crlf.txt", old_string="two\n", new_string="TWO\nmore\n"), text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk change it")
    ed.proposal_open()
    ed.cmd("tabfirst")
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(path)
    return ed, path


def test_typing_on_another_line_while_a_proposal_waited_made_it_stale(make_editor, endpoint, workspace):
    # NEWCOMER4 finding 7: ` USER` typed at the end of line 1 (the change is on line 2), then :AgentAccept
    ed, path = crlf_proposal(make_editor, endpoint, workspace)
    ed.keys("1GA USER<Esc>")
    ed.wait(MERGED, what="the typing merged")
    ed.keys("ggOzero<Esc>")  # a line above: the hunk moves down with it
    ed.keys("GA!<Esc>")  # and the line below it
    ed.wait("return require('agent_server.proposals').latest().docs[1].base == 'zero\\none USER\\ntwo\\nthree!'",
            what="merged again")
    assert ed.lua("return require('agent_server.proposals').latest().stale") is not True
    ed.cmd("tablast")
    assert "zero" in "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))  # the diff follows
    ed.cmd("AgentAccept")
    ed.idle()
    assert ed.buffer_text(path) == "zero\none USER\nTWO\nmore\nthree!"  # both landed, the user's text as typed
    assert ed.lua("local b = require('agent_server.buffers').find(...); "
                  "return {vim.bo[b].bomb, vim.bo[b].fileformat, vim.bo[b].eol}", str(path)) == [True, "dos", False]
    assert path.read_bytes() == CRLF_BOM  # the user's typing is unsaved: never saved for them
    assert ed.modified(path) is True
    assert "Edit crlf.txt: applied (not saved)" in ed.chat()
    result = tool_messages(endpoint, 2)[-1]["content"]
    assert "the user edited other lines of crlf.txt" in result and "Read it again before you edit it" in result
    ed.cmd("write")
    assert path.read_bytes() in (b"\xef\xbb\xbfzero\r\none USER\r\nTWO\r\nmore\r\nthree!",
                                 b"\xef\xbb\xbfzero\r\none USER\r\nTWO\r\nmore\r\nthree!\r\n")  # 'fixeol' is Neovim's


@pytest.mark.parametrize("keys", ["2GAX<Esc>", "2GOnew<Esc>", "2Gonew<Esc>", "1GJ"],
                         ids=["inside the hunk", "a line inserted right before it", "a line inserted right after it",
                              "the line above joined with it"])
def test_typing_inside_or_next_to_a_waiting_proposals_hunk_still_makes_it_stale(make_editor, endpoint, workspace, keys):
    ed, path = crlf_proposal(make_editor, endpoint, workspace)
    ed.keys(keys)
    ed.wait(STALE, what="stale")
    before = ed.buffer_text(path)
    ed.cmd("tablast")
    ed.cmd("AgentAccept")
    ed.idle()
    assert "Edit crlf.txt: not applied — stale" in ed.chat()
    assert ed.buffer_text(path) == before and path.read_bytes() == CRLF_BOM


@pytest.mark.parametrize("when", ["typed while it waited (merged)", "unsaved before it came"])
def test_saving_your_own_edits_with_w_while_a_proposal_waited_made_it_stale(make_editor, endpoint, workspace, when):
    """``:w`` of the user's own edits of other lines while the agent's proposal waited made it stale
    ("the file changed on disk since the agent read it"): the disk changed, but to what the buffer
    holds — the user's save, not another program's. The proposal stays acceptable where the merge rule
    merges those edits; accepting applies the hunk on top and, the buffer being saved, saves it."""
    path = workspace / "sv.txt"
    path.write_bytes(b"one\ntwo\nthree\n")
    push(endpoint, call("r", "read", path="sv.txt"),
         call("e", "edit", path="sv.txt", old_string="two", new_string="TWO"), text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    if when.startswith("unsaved"):
        ed.keys("1GA USER<Esc>")
    ed.cmd("AgentAsk change it")
    ed.proposal_open()
    ed.cmd("tabfirst")
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(path)
    if when.startswith("typed"):
        ed.keys("1GA USER<Esc>")
        ed.wait(MERGED, what="the typing merged")
    ed.cmd("write")
    assert path.read_bytes() == b"one USER\ntwo\nthree\n"
    ed.wait("local d = require('agent_server.proposals').latest().docs[1]; "
            "return d.disk_hash == require('agent_server.text').sha256('one USER\\ntwo\\nthree\\n') or "
            "require('agent_server.proposals').latest().stale == true", what="the save seen")
    assert ed.lua("return require('agent_server.proposals').latest().stale") is not True
    ed.cmd("tablast")
    ed.cmd("AgentAccept")
    ed.idle()
    assert "Edit sv.txt: applied and saved" in ed.chat()
    assert path.read_bytes() == b"one USER\nTWO\nthree\n"
    assert ed.modified(path) is False


def test_editing_the_proposed_side_after_a_merge_made_the_proposal_stale(make_editor, endpoint, workspace):
    """The user's typing on line 1 merged into the waiting proposal (line 2); then they edited line 4 of
    the proposed side and accepted: "not applied — stale (you edited the proposed text after your
    edits were merged)". Edits of the proposed side on other lines are the user's, like their typing
    in the file: merged too — the file gets both, the agent's hunk as sent, the answer says merged."""
    path = workspace / "pm.txt"
    path.write_bytes(b"one\ntwo\nthree\nfour\n")
    push(endpoint, call("r", "read", path="pm.txt"),
         call("e", "edit", path="pm.txt", old_string="two", new_string="TWO"), text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk change it")
    ed.proposal_open()
    ed.cmd("tabfirst")
    ed.keys("1GA USER<Esc>")
    ed.wait(MERGED, what="the typing merged")
    ed.cmd("tablast")
    ed.wait("return vim.api.nvim_buf_get_lines(0, 0, 1, false)[1] == 'one USER'", what="the proposed side follows")
    assert ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == ["one USER", "TWO", "three", "four"]
    ed.keys("4GA PANE<Esc>")  # the proposed side, another line than the agent's
    ed.cmd("AgentAccept")
    ed.idle()
    assert "not applied" not in ed.chat()
    assert ed.buffer_text(path) == "one USER\nTWO\nthree\nfour PANE\n"
    assert path.read_bytes() == b"one\ntwo\nthree\nfour\n"  # the user's typing unsaved: never saved for them
    assert "Edit pm.txt: applied (not saved)" in ed.chat()
    result = tool_messages(endpoint, 2)[-1]["content"]
    assert "the user edited other lines of pm.txt" in result and "Read it again before you edit it" in result
