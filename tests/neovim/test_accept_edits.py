"""The ``accept-edits`` mode in the Neovim plugin against the real agent-server (a real Neovim,
scripted model streams): its mode picker lists the server's modes and selecting ``accept-edits``
switches the session; the agent's edit then lands in the buffer without a proposal — a clean buffer
saved byte for byte (BOM, CRLF, no final newline), a dirty one left unsaved; the chat shows its
diff on the edit's line — and a write the
buffer moved on from since the agent read it is refused as stale (``fs/write_text_file``'s guard)."""

from __future__ import annotations

from support.nvim import call, push, tool_messages

from agent_server.offline import text_stream


WRITE = "local r, e = require('agent_server.buffers').write_text_file(...); return {result = r, err = e}"


def switch_to_accept_edits(ed) -> list:
    """Pick ``accept-edits`` in ``:AgentMode``'s picker; returns the ids the picker offered."""
    ed.choose("accept-edits")
    ed.cmd("AgentMode")
    ed.wait("return require('agent_server.chat').state.header.mode == 'accept-edits'", what="the mode switch")
    return ed.lua("return vim.tbl_map(function(m) return m.id end, _G.selects[#_G.selects].items)")


def test_mode_picker_lists_accept_edits_and_selecting_it_switches_the_session(make_editor, endpoint, workspace):
    ed = make_editor()
    offered = switch_to_accept_edits(ed)
    assert offered == ["read-only", "workspace-write", "accept-edits", "danger-full-access"]
    assert "mode accept-edits" in ed.chat().splitlines()[0]
    assert "accept-edits" in ed.lua("return vim.fn.getcompletion('AgentMode ', 'cmdline')")


def test_accept_edits_lands_in_a_clean_buffer_without_a_proposal_and_saves_it_byte_exact(
        make_editor, endpoint, workspace):
    path = workspace / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfalpha\r\nbeta\r\ngamma")
    push(endpoint, call("r", "read", path="bom.txt"),
         call("e", "edit", path="bom.txt", old_string="beta", new_string="BETA"), text_stream("done"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    switch_to_accept_edits(ed)
    ed.cmd("AgentAsk shout beta")
    ed.idle()
    assert ed.lua("return require('agent_server.proposals').latest()") is None  # never reviewed
    assert path.read_bytes() == b"\xef\xbb\xbfalpha\r\nBETA\r\ngamma"
    assert ed.modified(path) is False
    assert ed.lua("local b = require('agent_server.buffers').find(...); "
                  "return {vim.bo[b].bomb, vim.bo[b].fileformat, vim.bo[b].eol}", str(path)) == [True, "dos", False]
    assert "unsaved" not in tool_messages(endpoint, 2)[-1]["content"]
    chat = ed.chat()  # the card shows the diff it was not reviewed in
    assert "    │ -beta\n    │ +BETA\n" in chat, chat


def test_accept_edits_leaves_a_dirty_buffer_unsaved(make_editor, endpoint, workspace):
    path = workspace / "dirty.py"
    path.write_text("x = 1\nprint(x)\n")
    push(endpoint, call("r", "read", path="dirty.py"),
         call("e", "edit", path="dirty.py", old_string="print(x)", new_string="print(x, y)"), text_stream("done"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 1, false, {'y = 2  # unsaved'})")
    switch_to_accept_edits(ed)
    ed.cmd("AgentAsk print y")
    ed.idle()
    assert ed.buffer_text(path) == "x = 1\ny = 2  # unsaved\nprint(x, y)\n"
    assert ed.modified(path) is True and path.read_text() == "x = 1\nprint(x)\n"
    assert "unsaved changes" in tool_messages(endpoint, 2)[-1]["content"]


def test_a_guarded_write_to_a_buffer_typed_in_since_the_read_is_refused_as_stale(make_editor, workspace):
    path = workspace / "g.txt"
    path.write_text("one\n")
    ed = make_editor()
    ed.cmd(f"edit {path}")
    read = ed.lua("return require('agent_server.buffers').read_text_file({path = ...})", str(path))
    meta = {"agentServer": {"version": read["_meta"]["agentServer"]["version"],
                            "sha256": ed.lua("return require('agent_server.text').sha256(...)", read["content"])}}
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, 1, false, {'one, typed'})")  # a keystroke after the read
    answer = ed.lua(WRITE, {"path": str(path), "content": "ONE\n", "_meta": meta})
    assert "result" not in answer and answer["err"]["data"]["agentServer"]["stale"] is True
    assert ed.buffer_text(path) == "one, typed\n" and path.read_text() == "one\n"
    # the same write against the text the buffer holds now lands
    read = ed.lua("return require('agent_server.buffers').read_text_file({path = ...})", str(path))
    meta = {"agentServer": {"version": read["_meta"]["agentServer"]["version"],
                            "sha256": ed.lua("return require('agent_server.text').sha256(...)", read["content"])}}
    answer = ed.lua(WRITE, {"path": str(path), "content": "ONE\n", "_meta": meta})
    assert answer == {"result": {}}
    assert ed.buffer_text(path) == "ONE\n"


def test_a_guarded_write_to_a_file_changed_on_disk_said_it_changed_in_the_editor(make_editor, workspace):
    """F11 on the guarded-write path: a file no buffer holds, changed or deleted on disk since the
    agent read it, was refused as "changed in the editor"; the refusal says which is true."""
    path = workspace / "d.txt"
    path.write_text("one\n")
    ed = make_editor()
    read = ed.lua("return require('agent_server.buffers').read_text_file({path = ...})", str(path))
    meta = {"agentServer": {"version": None,
                            "sha256": ed.lua("return require('agent_server.text').sha256(...)", read["content"])}}
    path.write_text("another program's\n")
    answer = ed.lua(WRITE, {"path": str(path), "content": "ONE\n", "_meta": meta})
    assert answer["err"]["data"]["agentServer"]["stale"] is True
    assert "changed on disk since the agent read it" in answer["err"]["message"], answer
    path.unlink()
    answer = ed.lua(WRITE, {"path": str(path), "content": "ONE\n", "_meta": meta})
    assert "was deleted on disk since the agent read it" in answer["err"]["message"], answer
    assert not path.exists()
