"""Byte-faithful buffers (issue 29 item 1, docs/protocol.md "The text of a document"): the BOM is a
property of the file ('bomb'), never text; line breaks follow 'fileformat'; a missing final newline
follows 'eol' and reading changes neither 'eol' nor 'fixeol'; a read never modifies a buffer. The real
server edits each kind of file — open and unmodified, open with unsaved changes, not open — in a real
Neovim, and the saved bytes are compared."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from support.nvim import call, push, tool_messages

from agent_server.offline import text_stream

HERE = Path(__file__).resolve().parent
SCRIPTED = [sys.executable, str(HERE / "scripted_agent.py")]
BOM = b"\xef\xbb\xbf"

#: name → the file's bytes; each holds "target" once, which the agent edits to "TARGET"
KINDS = {
    "bom": BOM + b"using System.target;\nclass A {}\n",
    "crlf": b"line one\r\nusing target\r\nend\r\n",
    "no_final_newline": b"first\nsecond target",
    "emoji": "😀 café 👍🏽 target 🎉\nnext\n".encode(),
    "mixed": BOM + "😀 one\r\n👍 target here\r\nlast 🎉".encode(),
    "mixed_line_endings": b"a\r\nb target\nc\r\n",
}
OPTIONS = "return { vim.bo.bomb, vim.bo.eol, vim.bo.fixeol, vim.bo.fileformat, vim.bo.modified }"


def last_answer(ed, prefix: str) -> dict:
    line = [ln for ln in ed.chat().splitlines() if ln.startswith(prefix)][-1]
    return json.loads(line[len(prefix):])


def edited(raw: bytes) -> bytes:
    assert raw.count(b"target") == 1
    return raw.replace(b"target", b"TARGET")


def ask_edit(ed, endpoint, path: Path) -> None:
    push(endpoint, call("r", "read", path=path.name),
         call("e", "edit", path=path.name, old_string="target", new_string="TARGET"), text_stream("done"))
    ed.cmd("AgentAsk change target")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()


def edit_result(endpoint) -> str:
    return tool_messages(endpoint, 2)[-1]["content"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_agent_edit_of_an_open_unmodified_file_saves_exact_bytes_and_its_read_changes_nothing(
        make_editor, endpoint, workspace, kind):
    """The blocker: reading an open BOM file put U+FEFF into the buffer (still 'unmodified'), the next
    :w wrote two BOMs, and the agent's edit landed one character early ("using Syste.IOm;")."""
    raw = KINDS[kind]
    path = workspace / f"{kind}.txt"
    path.write_bytes(raw)
    ed = make_editor()
    ed.cmd(f"edit {path}")
    before = ed.lua(OPTIONS)
    ask_edit(ed, endpoint, path)
    read = tool_messages(endpoint, 1)[0]["content"]
    assert "\ufeff" not in read, read
    assert path.read_bytes() == edited(raw), edit_result(endpoint)
    assert ed.lua(OPTIONS) == before  # 'bomb', 'eol', 'fixeol', 'fileformat' kept; not modified
    assert "\ufeff" not in "".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    ed.cmd("write!")  # the user's own save writes what the file now holds (one BOM, its line breaks)
    expected = edited(raw)
    if not before[1]:  # no final newline: the user's :w adds one when 'fixeol' is on, as Neovim does
        expected += b"\r\n" if before[3] == "dos" else b"\n"
    assert path.read_bytes() == expected


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_agent_edit_of_a_dirty_buffer_lands_on_the_right_characters(make_editor, endpoint, workspace, kind):
    raw = KINDS[kind]
    path = workspace / f"{kind}.txt"
    path.write_bytes(raw)
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, 0, false, {'// mine, unsaved'})")
    before = ed.lua(OPTIONS)
    lines_before = ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)")
    ask_edit(ed, endpoint, path)
    assert path.read_bytes() == raw  # the user's unsaved buffer is not written behind their back
    assert ed.lua(OPTIONS) == before
    want = [line.replace("target", "TARGET") for line in lines_before]
    assert ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)") == want


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_agent_edit_of_a_file_that_is_not_open_is_not_stale_and_saves_exact_bytes(
        make_editor, endpoint, workspace, kind):
    """Edits to a BOM file that is not open always failed as "stale" (the server and the plugin
    hashed the text with and without the BOM)."""
    raw = KINDS[kind]
    path = workspace / f"{kind}.txt"
    path.write_bytes(raw)
    ed = make_editor()
    ask_edit(ed, endpoint, path)
    assert "stale" not in edit_result(endpoint).lower(), edit_result(endpoint)
    assert path.read_bytes() == edited(raw)
    assert "\ufeff" not in tool_messages(endpoint, 1)[0]["content"]


def test_a_read_of_a_file_without_a_final_newline_keeps_fixeol_and_a_bom_file_unmodified(make_editor, workspace):
    """"An agent read of a file without a final newline turns off that buffer's 'fixeol'", and a read
    of an open BOM file modified its text (U+FEFF) — fs/read_text_file answered by the plugin."""
    noeol, bom = workspace / "noeol.txt", workspace / "bom.txt"
    noeol.write_bytes(b"a\nb")
    bom.write_bytes(BOM + b"x\r\n")
    ed = make_editor(server_cmd=SCRIPTED)
    for path, content in ((noeol, "a\nb"), (bom, "x\r\n")):
        ed.cmd(f"edit {path}")
        before = ed.lua(OPTIONS)
        tick = ed.lua("return vim.b.changedtick")
        ed.cmd(f"AgentAsk read {path}")
        ed.idle()
        assert last_answer(ed, "read: ")["content"] == content
        assert ed.lua(OPTIONS) == before and ed.lua("return vim.b.changedtick") == tick


def test_a_bom_file_that_is_not_open_is_read_without_its_bom_and_written_with_it(make_editor, workspace):
    path = workspace / "closed.txt"
    path.write_bytes(BOM + b"one\r\n")
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd(f"AgentAsk read {path}")
    ed.idle()
    assert last_answer(ed, "read: ")["content"] == "one\r\n"
    ed.cmd(f"AgentAsk write {path} two\\r\\n")
    ed.idle()
    assert path.read_bytes() == BOM + b"two\r\n"


@pytest.mark.parametrize("kind", ["no_final_newline", "mixed"])
def test_the_help_says_nofixeol_keeps_a_missing_final_newline_through_the_agents_edit_and_your_own_save(
        make_editor, endpoint, workspace, kind):
    """`:help agent-server-eol`: the agent's accepted edit keeps the missing final newline exactly (BOM
    and CRLF too); your own `:w` keeps it when 'fixeol' is off for the buffer, as the help says to do."""
    raw = KINDS[kind]
    path = workspace / f"{kind}.txt"
    path.write_bytes(raw)
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("setlocal nofixeol")
    ask_edit(ed, endpoint, path)
    assert path.read_bytes() == edited(raw)
    ed.lua("vim.api.nvim_buf_set_lines(0, -2, -1, false, { vim.api.nvim_buf_get_lines(0, -2, -1, false)[1] .. '!' })")
    ed.cmd("write")
    assert path.read_bytes() == edited(raw) + b"!"  # still no final newline, BOM and line breaks kept
    assert ed.lua("return { vim.bo.eol, vim.bo.fixeol }") == [False, False]
    help_text = (Path(__file__).resolve().parents[2] / "clients/neovim/doc/agent-server.txt").read_text()
    assert "*agent-server-eol*" in help_text and ":setlocal nofixeol" in help_text
