"""Line breaks a Neovim buffer holds inside a line (newcomer 4's finding 0): LSP, and so the server's
proposal ranges, end a line at "\\r\\n", "\\n" and a lone "\\r"; a 'fileformat' unix or dos buffer keeps
a lone "\\r" inside its line. The plugin counts a proposal's positions on LSP lines, so the agent's
edit, its save and ``/undo`` of it land byte-exact. U+2028, U+0085 and a form feed end no line on
either side. The real server, a real Neovim, the offline endpoint."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.nvim import call, push, tool_messages

from agent_server.offline import text_stream

BOM = b"\xef\xbb\xbf"

#: name → (the file's bytes, the text the agent replaces, its replacement)
FINDING = {
    "old_mac_line_endings": (b"x1\ry2\rz3\r", "y2", "Y2"),
    "one_stray_cr_in_an_lf_file": (b"a1\rmid\na2\na3\n", "a3", "A3"),
}
#: the rest of the class: each holds "target" once, after the odd character
CLASS = {
    "crlf_with_one_lone_cr": b"c1\rmid\r\nc2\r\nc3 target\r\n",
    "cr_right_before_a_crlf": b"d1\r\r\nd2\r\nd3 target\r\n",
    "bom_and_a_lone_cr": BOM + b"b1\rmid\nb2\nb3 target\n",
    "bom_crlf_and_a_lone_cr": BOM + b"b1\rmid\r\nb2\r\nb3 target\r\n",
    "lone_cr_no_final_newline": b"e1\re2\ne3 target",
    "line_separator": "u1\u2028mid\nu2\nu3 target\n".encode(),
    "next_line_u0085": "n1\u0085mid\nn2\nn3 target\n".encode(),
    "form_feed": b"f1\x0cmid\nf2\nf3 target\n",
}


def agent_edit(ed, endpoint, path: Path, old: str, new: str) -> None:
    push(endpoint, call("r", "read", path=path.name),
         call("e", "edit", path=path.name, old_string=old, new_string=new), text_stream("done"))
    ed.cmd(f"AgentAsk change {old}")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()


def edit_result(endpoint) -> str:
    return tool_messages(endpoint, 2)[-1]["content"]


@pytest.mark.parametrize("opened", [False, True], ids=["not_open", "open"])
@pytest.mark.parametrize("kind", list(FINDING))
def test_an_edit_to_a_file_with_a_lone_cr_wrote_a_stray_character_at_its_end_in_neovim(
        make_editor, endpoint, workspace, kind, opened):
    """`x1\\ry2\\rz3\\r` (y2→Y2) became `x1\\ry2\\rz3\\rY`, `a1\\rmid\\na2\\na3\\n` (a3→A3) became
    `a1\\rmid\\na2\\na3\\nA`: the server's ranges count the lone CR as a line break, the plugin counted
    buffer rows, and "applied and saved" wrote a stray character at the end."""
    raw, old, new = FINDING[kind]
    path = workspace / f"{kind}.txt"
    path.write_bytes(raw)
    ed = make_editor()
    if opened:
        ed.cmd(f"edit {path}")
    agent_edit(ed, endpoint, path, old, new)
    assert path.read_bytes() == raw.replace(old.encode(), new.encode()), edit_result(endpoint)
    assert "changed the text while writing" not in edit_result(endpoint)


@pytest.mark.parametrize("opened", [False, True], ids=["not_open", "open"])
@pytest.mark.parametrize("kind", list(CLASS))
def test_an_edit_after_a_character_a_buffer_holds_inside_its_line_is_byte_exact(
        make_editor, endpoint, workspace, kind, opened):
    raw = CLASS[kind]
    path = workspace / f"{kind}.txt"
    path.write_bytes(raw)
    ed = make_editor()
    if opened:
        ed.cmd(f"edit {path}")
    agent_edit(ed, endpoint, path, "target", "TARGET")
    assert path.read_bytes() == raw.replace(b"target", b"TARGET"), edit_result(endpoint)
    assert "changed the text while writing" not in edit_result(endpoint)


@pytest.mark.parametrize("kind", list(FINDING))
def test_undo_said_restored_but_left_the_stray_character(make_editor, endpoint, workspace, kind):
    """After the misplaced edit, `/undo`'s proposal showed the same text on both sides, its Accept
    said "applied and saved" and the chat "restored" — the file kept the stray character. Now the
    edit lands, /undo gives back the exact bytes, and /redo the edited ones."""
    raw, old, new = FINDING[kind]
    path = workspace / f"{kind}.txt"
    path.write_bytes(raw)
    ed = make_editor()
    agent_edit(ed, endpoint, path, old, new)
    edited = raw.replace(old.encode(), new.encode())
    assert path.read_bytes() == edited, edit_result(endpoint)
    for command, expected in (("/undo", raw), ("/redo", edited)):
        ed.cmd(f"AgentAsk {command}")
        ed.proposal_open()
        ed.cmd("AgentAccept")
        ed.idle()
        assert path.read_bytes() == expected, ed.chat()[-1500:]
    assert "restored" in ed.chat()
