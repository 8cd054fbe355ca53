"""``/undo`` in the Neovim plugin against the real agent-server (a real Neovim, scripted model
streams): a file the user saved since the agent's change is asked about first — the permission
picker with "Take the checkpoint" / "Keep the file as it is" — and keeping it leaves the buffer and the disk as
the user saved them, with no proposal opened."""

from __future__ import annotations

import os
import subprocess

from support.fixtures import agent_server_command
from support.nvim import call, push

from agent_server.offline import text_stream

KEEP_MINE_ON_UNDO = """
    _G.selects = {}
    vim.ui.select = function(items, opts, on_choice)  -- allow the agent's command, keep mine on /undo
      local names = {}
      for i, it in ipairs(items) do names[i] = it.name or it.optionId end
      table.insert(_G.selects, { prompt = opts.prompt, names = names })
      local keep = vim.tbl_contains(names, "Keep mine") or vim.tbl_contains(names, "Keep the file as it is")
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
    assert set(question["names"]) == {"Take the checkpoint", "Keep the file as it is"}
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


PICK_AGENTS_CHANGE_ONLY = """
    _G.selects = {}
    vim.ui.select = function(items, opts, on_choice)  -- take back the agent's change alone where offered
      local names = {}
      for i, it in ipairs(items) do names[i] = it.name or it.optionId end
      table.insert(_G.selects, { prompt = opts.prompt, names = names })
      for _, want in ipairs({ "agents_change_only", "allow_once" }) do
        for _, it in ipairs(items) do
          if it.optionId == want then return on_choice(it) end
        end
      end
      on_choice(nil)
    end
"""


def test_a_stale_undo_in_neovim_marked_the_turn_undone_and_the_next_undo_said_nothing_to_undo(
        make_editor, endpoint, workspace):
    """Newcomer 3, finding 9 (Neovim): /undo's restore proposal went stale (the user typed into the
    file while it waited), the user saved, and /undo then said "Nothing to undo" although the agent's
    change was still in the file. The stale undo is no undo: the next /undo takes the same turn —
    and (finding 6) offers to take back the agent's change alone, keeping the typed line, bytes exact."""
    path = workspace / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\n")
    push(endpoint, call("r", "read", path="bom.txt"),
         call("e", "edit", path="bom.txt", old_string="line two", new_string="LINE TWO ünï"), text_stream("done"))
    ed = make_editor()
    ed.lua(PICK_AGENTS_CHANGE_ONLY)
    ed.cmd("AgentAsk change line two")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    agents = "\ufeffline one\r\nLINE TWO ünï\r\nline three\r\n".encode()
    assert path.read_bytes() == agents
    ed.cmd("AgentAsk /undo")
    ed.proposal_open()
    # the user opens the file while the proposal waits and types a line at its end (unsaved)
    ed.lua("local b = vim.fn.bufadd(...); vim.fn.bufload(b); vim.bo[b].buflisted = true; "
           "vim.api.nvim_buf_set_lines(b, -1, -1, false, {'NVIMTYPING'})", str(path))
    ed.cmd("AgentAccept")
    ed.idle()
    assert "not applied — stale" in ed.chat()
    ed.lua("vim.api.nvim_buf_call(vim.fn.bufnr(...), function() vim.cmd('write') end)", str(path))
    typed = "\ufeffline one\r\nLINE TWO ünï\r\nline three\r\nNVIMTYPING\r\n".encode()
    assert path.read_bytes() == typed
    ed.lua("_G.selects = {}")

    ed.cmd("AgentAsk /undo")
    ed.idle()
    chat = ed.chat()
    assert "Nothing to undo" not in chat, chat
    (question,) = ed.lua("return _G.selects")
    assert "bom.txt changed since the agent's edit" in question["prompt"], question
    assert question["names"] == ["Undo the agent's change, keep the rest", "Take the checkpoint",
                                 "Keep the file as it is"], question
    ed.wait("return not vim.bo[vim.fn.bufnr(...)].modified", str(path), what="the restore saved")
    assert path.read_bytes() == b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\nNVIMTYPING\r\n"


def test_a_stale_undo_proposal_offered_ask_again_which_would_send_the_model_a_request_to_redo_it(
        make_editor, endpoint, workspace):
    """Newcomer 3, finding 9 in Neovim (and finding 5's /redo): the user typed into a file while
    ``/undo``'s restore waited; the stale restore said ":AgentAskAgain asks the agent to redo it on
    the current text" — but a restore is no change of the agent, and :AgentAskAgain answered it and
    would have prompted the model to redo a change it never proposed. The chat, the winbar and the
    echo area say what does work (reject it, /undo again asks about the user's change), and
    :AgentAskAgain refuses without sending anything; the turn stays the one /undo takes back."""
    path = workspace / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\n")
    push(endpoint, call("r", "read", path="bom.txt"),
         call("e", "edit", path="bom.txt", old_string="line two", new_string="LINE TWO x"), text_stream("done"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk edit")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_bytes() == b"\xef\xbb\xbfline one\r\nLINE TWO x\r\nline three\r\n"
    ed.cmd("tabfirst")
    ed.cmd("AgentAsk /undo")
    ed.proposal_open()
    ed.cmd("tabfirst")
    ed.cmd(f"buffer {path}")
    ed.keys("2GANVIMTYPING<Esc>")  # on the restore's own line (typing on other lines is merged, d8bf73a)
    ed.wait("return require('agent_server.chat').text():find('Undo turn 1: bom.txt: stale', 1, true) ~= nil",
            what="stale said")
    chat = ed.chat()
    stale = chat[chat.index("Undo turn 1: bom.txt: stale"):].split("\n", 1)[0]
    assert "AgentAskAgain" not in stale and ":AgentReject it; /undo again asks about your change" in stale, stale
    assert "/undo again asks about your change" in ed.lua(
        "local v = require('agent_server.proposals').latest().docs[1].view; return vim.wo[v.prop_win].winbar")
    requests = len(endpoint.requests)
    ed.lua("_G.notes = {}; vim.notify = function(msg) table.insert(_G.notes, msg) end")
    ed.cmd("AgentAskAgain")
    (note,) = ed.lua("return _G.notes")
    assert "Undo turn 1: bom.txt is no change of the agent" in note and "/undo again" in note, note
    assert ed.lua("return require('agent_server.proposals').latest() ~= nil")  # still open, not answered
    ed.cmd("AgentReject")
    ed.idle()
    assert len(endpoint.requests) == requests  # nothing was sent to the model
    assert ed.buffer_text(path) == "line one\nLINE TWO xNVIMTYPING\nline three\n"  # the user's typing kept
    assert path.read_bytes() == b"\xef\xbb\xbfline one\r\nLINE TWO x\r\nline three\r\n"


def test_undo_in_neovim_of_an_agent_edit_to_a_bom_file_asked_changed_since_the_agents_edit_with_a_phantom_feff_line(
        make_editor, endpoint, workspace, server_env):
    """Newcomer 4, finding 2: ``agent-server run`` changed line 2 of a file with a BOM, CRLF and no
    final newline; nothing touched it since. In Neovim (``:AgentSessions``, the file open) ``/undo``
    asked "bomx.txt changed since the agent's edit" with ``+<feff>p1`` in its diff and no way to take
    back the agent's change alone. Now no question: the restore is the undo's proposal, and the bytes
    after it are the file's before the agent's edit, exactly; ``/redo`` puts the agent's back."""
    path = workspace / "bomx.txt"
    path.write_bytes(b"\xef\xbb\xbfp1\r\np2\r\np3")
    push(endpoint, call("r", "read", path="bomx.txt"),
         call("e", "edit", path="bomx.txt", old_string="p2", new_string="P2 cli"), text_stream("done"))
    done = subprocess.run([*agent_server_command(), "run", "-p", "change p2", "--cwd", str(workspace), "--allow", "edit"],
                          env={**os.environ, **server_env}, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    sid = [line for line in done.stderr.splitlines() if line.startswith("[session ")][0].split()[1].rstrip("]")
    assert path.read_bytes() == b"\xef\xbb\xbfp1\r\nP2 cli\r\np3"

    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.choose(sid)
    ed.cmd("AgentSessions")
    ed.wait("return require('agent_server.client').state.session_id == ...", sid, what="the session loaded")
    ed.lua("_G.selects = {}")
    ed.cmd("AgentAsk /undo")
    ed.proposal_open()
    assert ed.lua("return _G.selects") == []  # no "changed since the agent's edit"
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_bytes() == b"\xef\xbb\xbfp1\r\np2\r\np3"
    assert ed.lua("local b = require('agent_server.buffers').find(...); return {vim.api.nvim_buf_get_lines(b, 0, -1, "
                  "false), vim.bo[b].bomb, vim.bo[b].fileformat, vim.bo[b].eol, vim.bo[b].modified}", str(path)) == [
        ["p1", "p2", "p3"], True, "dos", False, False]
    assert "bomx.txt: restored" in ed.chat() and "<feff>" not in ed.chat()

    ed.cmd("AgentAsk /redo")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert ed.lua("return _G.selects") == []
    assert path.read_bytes() == b"\xef\xbb\xbfp1\r\nP2 cli\r\np3"


def test_undo_of_a_shell_change_to_a_file_with_unsaved_edits_said_restored_but_the_disk_kept_the_agents_change(
        make_editor, endpoint, workspace):
    """Newcomer 4, finding 3c (Neovim): shd.txt open with unsaved typing on line 1, the agent's shell
    command changed line 5 on disk; /undo showed an empty diff (buffer against buffer), said "restored",
    and the disk kept the agent's change (:w then warned the file had changed). The change is taken
    off the disk, the unsaved buffer is left alone; /redo puts it back on the disk the same way."""
    path = workspace / "shd.txt"
    before, agents = b"s1\ns2\ns3\ns4\ns5\n", b"s1\ns2\ns3\ns4\nS5shell\n"
    path.write_bytes(before)
    push(endpoint, call("s", "bash", command="sed -i s/s5/S5shell/ shd.txt"), text_stream("done"))
    ed = make_editor()
    ed.lua(KEEP_MINE_ON_UNDO)
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_text(0, 0, 2, 0, 2, {' UNSAVED-MINE'})")
    typed = ["s1 UNSAVED-MINE", "s2", "s3", "s4", "s5"]
    ed.cmd("tabfirst")
    ed.cmd("AgentAsk run the shell")
    ed.idle()
    assert path.read_bytes() == agents
    ed.lua("_G.selects = {}")

    ed.cmd("AgentAsk /undo")
    ed.idle()
    assert ed.lua("return _G.selects") == []  # the disk held the agent's change alone: nothing to ask
    assert path.read_bytes() == before
    buf = "vim.fn.bufnr(...)"
    assert ed.lua(f"return vim.api.nvim_buf_get_lines({buf}, 0, -1, false)", str(path)) == typed
    assert ed.lua(f"return vim.bo[{buf}].modified", str(path)) is True
    assert "shd.txt: restored (on disk; the editor's buffer keeps your unsaved changes as they are)" in ed.chat()

    ed.cmd("AgentAsk /redo")
    ed.idle()
    assert ed.lua("return _G.selects") == []
    assert path.read_bytes() == agents
    assert ed.lua(f"return vim.api.nvim_buf_get_lines({buf}, 0, -1, false)", str(path)) == typed


def test_saving_after_undo_restored_the_disk_under_unsaved_edits_warned_the_file_had_changed(
        make_editor, endpoint, workspace):
    """After ``/undo`` took the agent's shell change off the disk under a buffer with unsaved typing,
    ``:w`` warned "The file has been changed since reading it!!! Do you really want to write to it" — the
    undo's own write gave the file a new mtime, though the disk held again exactly what the buffer was
    read from. The client makes Neovim's record of the file current: ``:w`` writes the unsaved text
    unasked, the undo history kept (``u`` takes back the typing)."""
    path = workspace / "sv.txt"
    before = b"s1\ns2\ns3\ns4\ns5\n"
    path.write_bytes(before)
    push(endpoint, call("s", "bash", command="sed -i s/s5/S5shell/ sv.txt"), text_stream("done"))
    ed = make_editor()
    ed.lua(KEEP_MINE_ON_UNDO)
    ed.cmd(f"edit {path}")
    ed.keys("1GA UNSAVED<Esc>")
    ed.cmd("tabfirst")
    ed.cmd("AgentAsk run the shell")
    ed.idle()
    assert path.read_bytes() == b"s1\ns2\ns3\ns4\nS5shell\n"
    ed.cmd("AgentAsk /undo")
    ed.idle()
    assert path.read_bytes() == before
    assert "sv.txt: restored (on disk;" in ed.chat() and "this restore wrote it" in ed.chat()
    buf = "require('agent_server.buffers').find(...)"
    assert ed.lua(f"return vim.bo[{buf}].modified", str(path)) is True
    # a "n" waits in the typeahead: Neovim's "Do you really want to write to it (y/n)?" would take it
    ed.lua(f"vim.api.nvim_feedkeys('n', 't', false); vim.api.nvim_buf_call({buf}, function() "
           "pcall(vim.cmd, 'write') end); vim.api.nvim_input('<Esc>')", str(path))
    assert path.read_bytes() == b"s1 UNSAVED\ns2\ns3\ns4\ns5\n"
    assert ed.lua(f"return vim.bo[{buf}].modified", str(path)) is False
    ed.lua(f"vim.api.nvim_buf_call({buf}, function() vim.cmd('silent undo') end)", str(path))
    assert ed.lua(f"return vim.api.nvim_buf_get_lines({buf}, 0, 1, false)", str(path)) == ["s1"]


def test_undo_under_unsaved_edits_of_a_long_file_wiped_the_buffers_undo_history(make_editor, endpoint, workspace):
    """278cec3 makes Neovim's record of the file current with ``:edit!`` and sets the unsaved text
    back: the undo history is kept only when 'undoreload' saves the reload (a file under 10,000
    lines by default). A longer file lost it: after ``/undo`` the user's two unsaved edits were one
    step, ``u`` took both back, and nothing before them could be undone."""
    path = workspace / "long.txt"
    before = "".join(f"line {i}\n" for i in range(1, 12001)).encode()
    path.write_bytes(before)
    push(endpoint, call("s", "bash", command="sed -i 's/^line 12000$/LAST/' long.txt"), text_stream("done"))
    ed = make_editor()
    ed.lua(KEEP_MINE_ON_UNDO)
    ed.cmd(f"edit {path}")
    ed.keys("1GA FIRST<Esc>")
    ed.keys("2GA SECOND<Esc>")  # two edits of the user's: two undo steps
    ed.cmd("tabfirst")
    ed.cmd("AgentAsk run the shell")
    ed.idle()
    ed.cmd("AgentAsk /undo")
    ed.idle()
    assert path.read_bytes() == before
    buf = "require('agent_server.buffers').find(...)"
    assert ed.lua(f"return vim.api.nvim_buf_get_lines({buf}, 0, 2, false)", str(path)) == ["line 1 FIRST", "line 2 SECOND"]
    ed.lua(f"vim.api.nvim_buf_call({buf}, function() vim.cmd('silent undo') end)", str(path))
    assert ed.lua(f"return vim.api.nvim_buf_get_lines({buf}, 0, 2, false)", str(path)) == ["line 1 FIRST", "line 2"]
