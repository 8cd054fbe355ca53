"""Newcomer finding F7 on the server's side: a file the agent read through the editor and that was
deleted (or replaced by a directory) before the write is ``stale`` on every guarded write path — the
editor may still hold its buffer, and writing into it (then saving) created the file again. And the
editor's own reason for a ``stale`` proposal (changed on disk, deleted) reaches the model instead of
"changed in the editor"."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from agent_server.server.acp.editor_files import EditorCapabilities, EditorFiles
from support.editor_end import EditorEnd, quiet


class BufferEditor(EditorEnd):
    """An editor holding ``text`` in a buffer whatever the disk says (as Neovim and VS Code keep the
    buffer of a file deleted under them): it answers reads with it, takes writes into it (saving:
    the file is written) and answers proposals with ``answer``."""

    def __init__(self, path: Path, text: str, answer: dict[str, Any] | None = None) -> None:
        super().__init__(text, {"version": 3, "dirty": False}, saves_to=path, answer=answer)



CAPS = {
    "plain ACP write": dict(read_text=True, write_text=True),
    "accept-edits write": dict(read_text=True, write_text=True, apply_workspace_edit=True, buffer_versions=True),
    "proposal": dict(read_text=True, apply_workspace_edit=True, buffer_versions=True),
}


def _write_after(tmp_path: Path, kind: str, remove) -> tuple[Any, BufferEditor, Path]:
    path = tmp_path / "gone.txt"
    path.write_text("x\n")
    editor = BufferEditor(path, "x\n")
    files = EditorFiles(editor, "s", EditorCapabilities(**CAPS[kind]), emit=quiet)
    files.auto_apply = lambda: kind == "accept-edits write"

    async def go():
        base = await files.read(path)
        remove(path)
        return await files.write(path, b"y\n", base=base)

    return asyncio.run(go()), editor, path


def test_a_file_deleted_after_the_agent_read_it_through_the_editor_was_created_again_by_the_guarded_write(tmp_path):
    for kind in CAPS:
        folder = tmp_path / kind.replace(" ", "-")
        folder.mkdir()
        outcome, editor, path = _write_after(folder, kind, Path.unlink)
        assert outcome.status == "stale", (kind, outcome)
        assert "was deleted on disk since you read it" in outcome.message, (kind, outcome.message)
        assert not path.exists() and editor.writes == [] and editor.proposals == [], kind


def test_a_file_replaced_by_a_directory_after_the_read_is_stale_too(tmp_path):
    def to_dir(path: Path) -> None:
        path.unlink()
        path.mkdir()

    outcome, editor, path = _write_after(tmp_path, "accept-edits write", to_dir)
    assert outcome.status == "stale" and "replaced by a directory" in outcome.message, outcome
    assert path.is_dir() and editor.writes == []


def test_a_stale_file_changed_on_disk_was_described_to_the_model_as_changed_in_the_editor(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("x\n")
    said = f"{path} changed on disk during the review; nothing more was applied"
    editor = BufferEditor(path, "x\n", {"outcome": "stale", "message": said})
    files = EditorFiles(editor, "s", EditorCapabilities(**CAPS["proposal"]), emit=quiet)

    async def go():
        return await files.write(path, b"y\n", base=await files.read(path))

    outcome = asyncio.run(go())
    assert outcome.status == "stale"
    assert "in the editor" not in outcome.message and said in outcome.message, outcome.message
    # an editor that says "in the editor" (or nothing) keeps the words the model knows
    editor.answer = {"outcome": "stale", "message": "the file changed in the editor since the agent read it"}
    assert asyncio.run(go()).message == "a.txt changed in the editor since you read it"


def test_a_guarded_write_refused_as_changed_on_disk_was_told_to_the_model_as_changed_in_the_editor(tmp_path):
    """The same for ``fs/write_text_file``'s stale error: its message (changed on disk, deleted) was
    replaced by "changed in the editor"."""
    from agent_server.server.rpc.jsonrpc import JsonRpcError

    path = tmp_path / "w.txt"
    path.write_text("x\n")

    class Refusing(BufferEditor):
        message = f"{path} changed on disk since the agent read it; nothing was written"

        async def request(self, method, params):
            if method == "fs/write_text_file":
                raise JsonRpcError(-32603, self.message, {"agentServer": {"stale": True}})
            return await super().request(method, params)

    editor = Refusing(path, "x\n")
    files = EditorFiles(editor, "s", EditorCapabilities(**CAPS["accept-edits write"]), emit=quiet)
    files.auto_apply = lambda: True

    async def go():
        return await files.write(path, b"y\n", base=await files.read(path))

    outcome = asyncio.run(go())
    assert outcome.status == "stale" and "in the editor" not in outcome.message, outcome
    assert Refusing.message in outcome.message, outcome.message
    Refusing.message = f"{path} changed in the editor since the agent read it; nothing was written"
    assert asyncio.run(go()).message == "w.txt changed in the editor since it was read"
