"""fs/read_text_file and fs/write_text_file through the plugin's buffers (a scripted ACP agent asks;
the real server's reads are covered in test_proposals.py): the unsaved text with b:changedtick and
dirty, a clean buffer reloaded when its file changed on disk, writes saved only to clean buffers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPTED = [sys.executable, str(HERE / "scripted_agent.py")]


def last_answer(ed, prefix: str) -> dict:
    line = [ln for ln in ed.chat().splitlines() if ln.startswith(prefix)][-1]
    return json.loads(line[len(prefix):])


def test_read_answers_the_unsaved_buffer_with_its_changedtick_and_dirty_flag(make_editor, workspace):
    path = workspace / "a.txt"
    path.write_text("on disk\n")
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'unsaved text'})")
    tick = ed.lua("return vim.b.changedtick")
    ed.cmd(f"AgentAsk read {path}")
    ed.idle()
    assert last_answer(ed, "read: ") == {"content": "unsaved text\n",
                                         "_meta": {"agentServer": {"version": tick, "dirty": True}}}


def test_read_reloads_a_clean_buffer_whose_file_changed_on_disk_and_reads_unopened_files_from_disk(
        make_editor, workspace):
    path = workspace / "b.txt"
    path.write_text("old\n")
    other = workspace / "c.txt"
    other.write_text("never opened\n")
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd(f"edit {path}")
    path.write_text("changed on disk\n")
    ed.cmd(f"AgentAsk read {path}")
    ed.idle()
    answer = last_answer(ed, "read: ")
    assert answer["content"] == "changed on disk\n" and answer["_meta"]["agentServer"]["dirty"] is False
    assert ed.buffer_text(path) == "changed on disk\n" and ed.modified(path) is False
    ed.cmd(f"AgentAsk read {other}")
    ed.idle()
    assert last_answer(ed, "read: ") == {"content": "never opened\n",
                                         "_meta": {"agentServer": {"version": None, "dirty": False}}}


def test_write_goes_through_the_buffer_and_saves_only_a_clean_one(make_editor, workspace):
    clean, dirty = workspace / "clean.txt", workspace / "dirty.txt"
    clean.write_text("c\n")
    dirty.write_text("d\n")
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd(f"edit {dirty}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'mine, unsaved'})")
    ed.cmd(f"edit {clean}")
    ed.cmd(f"AgentAsk write {clean} new\\nclean")
    ed.idle()
    assert ed.buffer_text(clean) == "new\nclean"  # no final newline: none is added
    assert clean.read_text() == "new\nclean" and ed.modified(clean) is False
    ed.cmd(f"AgentAsk write {dirty} agent text\\n")
    ed.idle()
    assert ed.buffer_text(dirty) == "agent text\n" and ed.modified(dirty) is True
    assert dirty.read_text() == "d\n"  # the user's unsaved buffer is not written behind their back
    ed.cmd(f"AgentAsk write {workspace / 'new' / 'n.txt'} fresh\\n")
    ed.idle()
    assert (workspace / "new" / "n.txt").read_text() == "fresh\n"


def propose(ed, delta: str, hash_mode: str, path) -> None:
    ed.cmd(f"AgentAsk propose {delta} {hash_mode} {path}")


def test_stale_rule_on_arrival_needs_both_version_and_hash_to_differ(make_editor, workspace):
    path = workspace / "p.txt"
    path.write_text("text\n")
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd(f"edit {path}")
    # version and hash both differ: stale at once, nothing shown, the chat says why
    propose(ed, "-1", "bad", path)
    ed.idle()
    assert last_answer(ed, "proposal: ")["outcome"] == "stale"
    assert "not applied — stale: the file changed in the editor since the agent read it" in ed.chat()
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1
    # only the version differs (a save bumps b:changedtick, the text is the same): shown, appliable
    propose(ed, "-1", "ok", path)
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert last_answer(ed, "proposal: ")["outcome"] == "applied"
    assert ed.buffer_text(path) == "Xtext\n"
    # version null: the hash alone decides
    propose(ed, "null", "bad", path)
    ed.idle()
    assert last_answer(ed, "proposal: ")["outcome"] == "stale"
    propose(ed, "null", "ok", path)
    ed.proposal_open()
    ed.cmd("AgentReject")
    ed.idle()
    assert last_answer(ed, "proposal: ")["outcome"] == "rejected"
    assert ed.buffer_text(path) == "Xtext\n"
