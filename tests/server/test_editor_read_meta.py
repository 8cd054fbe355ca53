"""What the editor says about a file beside its text (docs/protocol.md "Buffer versions"), and the
proposal's title: a dirty buffer whose file changed on disk is said to the model in the ``read``
result (issue 30, item 8), and an ``/undo`` restore is titled as an undo in the editor's review
(issue 30, item 7)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_server.server.acp.editor_files import EditorCapabilities, EditorFiles
from agent_server.tools import ToolContext, get_tool, validate_args
from agent_server.tools.access import FileAccess
from agent_server.tools.files import PROPOSAL_LABEL, ReadLedger
from support.editor_end import EditorEnd, quiet




CAPS = EditorCapabilities(read_text=True, apply_workspace_edit=True, buffer_versions=True)


async def _read(tmp_path: Path, meta: dict[str, Any]) -> str:
    (tmp_path / "app.py").write_text("on disk\n")
    access = FileAccess((tmp_path,))
    files = EditorFiles(EditorEnd("unsaved\n", meta), "s", CAPS, emit=quiet)
    ctx = ToolContext((tmp_path,), files, ReadLedger(), access=access)
    tool = get_tool("read")
    result = await tool.run(validate_args(tool, json.dumps({"path": "app.py"})), ctx)
    assert not result.is_error, result.text
    return result.text


async def test_a_dirty_buffer_whose_file_changed_on_disk_is_said_to_the_model(tmp_path):
    text = await _read(tmp_path, {"version": 4, "dirty": True, "diskChanged": True})
    assert "unsaved" in text and "on disk" not in text.split("\n")[0]
    assert "the file on disk changed since the editor loaded it" in text


async def test_a_buffer_without_disk_changed_says_nothing_more(tmp_path):
    text = await _read(tmp_path, {"version": 4, "dirty": True})
    assert "on disk" not in text
    # a clean buffer cannot differ from its file: a stray flag is not believed
    assert "on disk" not in await _read(tmp_path, {"version": 4, "dirty": False, "diskChanged": True})


async def test_the_proposal_of_a_write_under_a_label_is_titled_with_it(tmp_path):
    path = tmp_path / "app.py"
    path.write_text("a\n")
    editor = EditorEnd("a\n", {"version": 1, "dirty": False})
    files = EditorFiles(editor, "s", CAPS, emit=quiet)
    base = await files.read(path)
    token = PROPOSAL_LABEL.set("Undo turn 3: app.py")
    try:
        await files.write(path, b"b\n", base=base)
    finally:
        PROPOSAL_LABEL.reset(token)
    await files.write(path, b"c\n", base=base)
    assert [p["label"] for p in editor.proposals] == ["Undo turn 3: app.py", "Edit app.py"]
