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


#: name → (the file's bytes, the 'fileformats' it is opened with (or ++ff), the keys that select,
#: the range the server must be told, the selected text as the file holds it)
SELECTIONS = {
    "lone_cr_unix_buffer": (b"a\rb\rc\r", "unix,dos", "1GV", "L1-L1", "a\rb\rc\r"),
    "crlf": (b"a\r\nb\r\nc\r\n", "unix,dos", "2GVj", "L2-L3", "b\nc"),
    "crlf_charwise": (b"one\r\ntwo\r\n", "unix,dos", "1G2|vj", "L1-L2", "ne\ntw"),
    "lone_cr_mac_buffer": (b"a\rb\rc\r", "unix,dos,mac", "2GV", "L1-L1", "b"),
    "lone_cr_mac_buffer_charwise": (b"ab\rcd\ref\r", "unix,dos,mac", "1G2|vj", "L1-L1", "b\rcd"),
    "mixed_forced_mac": (b"a\rb\nc\rd\n", "++ff=mac", "2GV", "L1-L2", "b\nc"),
    "mixed_forced_mac_after_a_break": (b"a\rb\nc\rd\n", "++ff=mac", "3GV", "L2-L2", "d\n"),
}


def test_a_selection_in_a_mac_fileformat_buffer_named_rows_the_server_has_no_lines_for(make_editor, endpoint,
                                                                                         workspace):
    """``#L`` ranges (a selection's, ``#selection``'s) count the buffer's rows; the server counts the
    file's lines as its ``read`` tool does (ended by ``\\n``, a lone ``\\r`` inside its line). Those
    are the rows of a unix or dos buffer (checked: a lone-CR file in a unix buffer, CRLF), not of a
    'fileformat' mac one — a lone-CR file opened with 'fileformats' holding mac — whose row 2 was sent
    as ``#L2-L2``: a line the file does not have. The range is the file's lines holding the
    selection now, and its text the file's bytes of it."""
    from agent_server.tools.text import decode_text

    for _ in SELECTIONS:
        endpoint.push(text_stream("ok"))
    ed = make_editor()
    ed.lua("""_G.sent = {}
        require('agent_server.client').on(function(ev)
          if ev.type == 'turn_start' then table.insert(_G.sent, ev.prompt[2].resource) end
        end)""")
    for n, (name, (data, fileformats, keys, _, _)) in enumerate(SELECTIONS.items()):
        path = workspace / f"{name}.txt"
        path.write_bytes(data)
        if fileformats.startswith("++"):
            ed.cmd(f"edit {fileformats} {path}")
        else:
            ed.cmd(f"set fileformats={fileformats}")
            ed.cmd(f"edit {path}")
        ed.keys(keys + "<Esc>")
        ed.cmd(f"'<,'>AgentAsk {name}")
        ed.wait("return #_G.sent == ...", n + 1, what=name)
        ed.idle()
    sent = ed.lua("return _G.sent")
    for (name, (data, _, _, fragment, text)), resource in zip(SELECTIONS.items(), sent):
        path = workspace / f"{name}.txt"
        assert resource["uri"] == f"{path.as_uri()}#{fragment}", name
        assert resource["text"] == text, name
        first, last = (int(x) for x in fragment[1:].split("-L"))
        lines = decode_text(data).lines()
        assert 1 <= first <= last <= len(lines) and text.rstrip("\r\n") in "\n".join(lines[first - 1:last]), name
        where = f"{path} line {first}" if first == last else f"{path} lines {first}-{last}"
        assert any(where in m["content"] for r in endpoint.requests for m in r.json()["messages"]
                   if m["role"] == "user" and isinstance(m["content"], str)), name
    # #selection in the chat's prompt area: the same range
    endpoint.push(text_stream("ok"))
    mac = workspace / "lone_cr_mac_buffer.txt"
    ed.cmd("set fileformats=unix,dos,mac")
    ed.cmd(f"edit {mac}")
    ed.keys("3GV<Esc>")
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('see #selection')")
    ed.lua("require('agent_server').send_typed()")
    ed.wait("return #_G.sent == ...", len(SELECTIONS) + 1, what="#selection")
    ed.idle()
    assert ed.lua("return _G.sent[#_G.sent]") == {"uri": f"{mac.as_uri()}#L1-L1", "text": "c",
                                                   "mimeType": "text/plain"}
