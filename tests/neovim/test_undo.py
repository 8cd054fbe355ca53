"""``/undo`` in the Neovim plugin against the real agent-server (a real Neovim, scripted model
streams): a file the user saved since the agent's change is asked about first — the permission
picker with "Take the checkpoint" / "Keep mine" — and Keep mine leaves the buffer and the disk as
the user saved them, with no proposal opened."""

from __future__ import annotations

from support.nvim import call, push

from agent_server.offline import text_stream

KEEP_MINE_ON_UNDO = """
    _G.selects = {}
    vim.ui.select = function(items, opts, on_choice)  -- allow the agent's command, keep mine on /undo
      local names = {}
      for i, it in ipairs(items) do names[i] = it.name or it.optionId end
      table.insert(_G.selects, { prompt = opts.prompt, names = names })
      local keep = vim.tbl_contains(names, "Keep mine")
      for _, it in ipairs(items) do
        if it.optionId == (keep and "reject_once" or "allow_once") then return on_choice(it) end
      end
      on_choice(nil)
    end
"""


def test_undo_in_neovim_overwrote_a_file_the_user_saved_without_asking(make_editor, endpoint, workspace):
    """The newcomer's report: after the agent's shell call changed mine.txt the user replaced its
    text and saved it with :w; /undo opened an ordinary "Edit mine.txt" proposal whose Accept put
    back "orig mine" with nothing saying the replaced text was the user's."""
    path = workspace / "mine.txt"
    path.write_text("orig mine\n")
    push(endpoint, call("s", "bash", command="echo agent > mine.txt"), text_stream("done"))
    ed = make_editor()
    ed.lua(KEEP_MINE_ON_UNDO)
    ed.cmd("AgentAsk run the shell")
    ed.idle()
    assert path.read_text() == "agent\n"
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'MY SAVED WORK'})")
    ed.cmd("write")
    assert path.read_text() == "MY SAVED WORK\n"
    ed.lua("_G.selects = {}")

    ed.cmd("AgentAsk /undo")
    ed.idle()
    (question,) = ed.lua("return _G.selects")
    assert "mine.txt changed since the agent's edit" in question["prompt"], question
    assert set(question["names"]) == {"Take the checkpoint", "Keep mine"}
    assert ed.lua("return require('agent_server.proposals').latest()") is None  # nothing proposed
    assert path.read_text() == "MY SAVED WORK\n"
    assert ed.lua("return vim.api.nvim_buf_get_lines(vim.fn.bufnr(...), 0, -1, false)", str(path)) == ["MY SAVED WORK"]
    assert "mine.txt: kept the user's version" in ed.chat()


def test_the_shell_undo_questions_diff_was_printed_twice_and_showed_raw_carriage_returns(
        make_editor, endpoint, workspace):
    """F11: the question /undo asks (Take the checkpoint / Keep mine) carried its diff twice — as text
    and as a diff block — and Neovim printed both; a CRLF file's lines ended in a raw carriage return.
    The diff is shown once, its line endings said in its header."""
    path = workspace / "crlf.txt"
    path.write_bytes(b"orig\r\nmine\r\n")
    push(endpoint, call("s", "bash", command="printf 'agent\\r\\n' > crlf.txt"), text_stream("done"))
    ed = make_editor()
    ed.lua(KEEP_MINE_ON_UNDO)
    ed.cmd("AgentAsk run the shell")
    ed.idle()
    assert path.read_bytes() == b"agent\r\n"
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'MY SAVED WORK'})")
    ed.cmd("write")
    assert path.read_bytes() == b"MY SAVED WORK\r\n"
    ed.cmd("AgentAsk /undo")
    ed.idle()
    chat = ed.chat()
    question = chat[chat.index("**Permission needed:**"):]
    assert question.count("-MY SAVED WORK") == 1 and question.count("+orig") == 1, question
    assert "\r" not in chat and "crlf.txt (CRLF line endings)" in question, question
    assert path.read_bytes() == b"MY SAVED WORK\r\n"


def test_undo_rejected_in_the_editor_said_not_restored_with_an_empty_reason(make_editor, endpoint, workspace):
    """F11: /undo's restore proposal rejected in the editor was told as "not restored (rejected: )"."""
    path = workspace / "r.txt"
    path.write_text("one\n")
    push(endpoint, call("r", "read", path="r.txt"), call("e", "edit", path="r.txt", old_string="one", new_string="two"),
         text_stream("done"))
    ed = make_editor()
    ed.cmd("AgentAsk edit it")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "two\n"
    ed.cmd("AgentAsk /undo")
    ed.proposal_open()
    ed.cmd("AgentReject")
    ed.idle()
    chat = ed.chat()
    assert "r.txt: not restored (the user rejected the restore in the editor)" in chat and "rejected: )" not in chat, chat
    assert path.read_text() == "two\n"
