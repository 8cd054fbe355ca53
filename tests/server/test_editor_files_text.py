"""The server's side of "the text of a document" (docs/protocol.md): the editor's text never holds
the file's BOM, so a change computed on it is proposed against exactly that text (hashes and
positions), and a disk write of it keeps the file's BOM and compares the base without it."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from agent_server.server.acp.editor_files import EditorCapabilities, EditorFiles
from agent_server.server.edits import apply_text_edits
from support.editor_end import EditorEnd, quiet

BOM = b"\xef\xbb\xbf"




def test_a_disk_write_of_a_change_to_a_bom_file_read_through_the_editor_keeps_the_bom_and_is_not_stale(tmp_path):
    path = tmp_path / "a.cs"
    path.write_bytes(BOM + b"x\r\n")
    files = EditorFiles(EditorEnd("x\r\n"), "s", EditorCapabilities(read_text=True), emit=quiet)

    async def go():
        base = await files.read(path)
        return await files.write(path, b"y\r\n", base=base)

    outcome = asyncio.run(go())
    assert outcome.status == "written", outcome
    assert path.read_bytes() == BOM + b"y\r\n"


def test_a_proposal_is_made_on_the_editors_text_even_when_it_starts_with_u_feff(tmp_path):
    """A file holding a BOM and then U+FEFF as text: Neovim's buffer starts with U+FEFF ('bomb' holds
    the BOM). Cutting it off (as the server did) moved every edit of line 1 one character early."""
    path = tmp_path / "b.cs"
    editor_text = "\ufeffusing System.IO;\n"
    path.write_bytes(BOM + editor_text.encode())
    stub = EditorEnd(editor_text)
    files = EditorFiles(stub, "s", EditorCapabilities(read_text=True, apply_workspace_edit=True,
                                                      buffer_versions=True), emit=quiet)

    async def go():
        base = await files.read(path)
        new = editor_text.replace("System.IO", "System.Text")
        return await files.write(path, new.encode(), base=base)

    assert asyncio.run(go()).status == "rejected"
    params = stub.proposals[0]
    uri = Path(path).as_uri()
    assert params["baseHashes"][uri] == hashlib.sha256(editor_text.encode()).hexdigest()
    edits = params["edit"]["documentChanges"][-1]["edits"]
    assert apply_text_edits(editor_text, edits, "utf-16") == editor_text.replace("System.IO", "System.Text")
