"""``/undo`` and ``/redo`` of a shell change to a file open with unsaved edits, through the server's
seam to an editor (``EditorFiles``) and the scripted editor end (``support.editor_end``): the agent's
change lives on the disk, the user's unsaved text in the buffer (written before the change). The
restore takes the change off the disk and leaves the buffer alone, its question's diff is the disk's,
and "restored" is said only when the disk holds the restore afterwards (newcomer 4, finding 3c)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_server.checkpoints.blobs import BlobStore
from agent_server.host.undo import AGENTS_CHANGE_ONLY, Restorer
from agent_server.policy.approvals import Answer
from agent_server.server.acp.editor_files import EditorCapabilities, EditorFiles
from agent_server.session.events import EventLog
from support.editor_end import EditorEnd, quiet

CAPS = EditorCapabilities(read_text=True, write_text=True, buffer_versions=True, apply_workspace_edit=True)
BEFORE = b"s1\ns2\ns3\ns4\ns5\n"
AGENTS = b"s1\ns2\ns3\ns4\nS5shell\n"  # sed -i s/s5/S5shell/ shd.txt
BUFFER = "s1 UNSAVED-MINE\ns2\ns3\ns4\ns5\n"  # typed before the command, never saved


class Asked:
    """The approver: keeps each question and answers it with ``option``."""

    def __init__(self, option: str) -> None:
        self.option, self.asks = option, []

    async def ask(self, ask: Any) -> Answer:
        self.asks.append(ask)
        return Answer("selected", self.option)


def _setup(tmp_path: Path, option: str) -> tuple[Path, EditorEnd, Asked, Restorer]:
    root = tmp_path / "ws"
    root.mkdir()
    path = root / "shd.txt"
    path.write_bytes(AGENTS)
    blobs = BlobStore(tmp_path / "blobs")
    log = EventLog.create(tmp_path / "log.jsonl", {"cwd": str(root)})
    log.append("checkpoint/file", {"turn": 1, "call_id": "c1", "path": str(path), "source": "bash",
                                   "before": blobs.keep(BEFORE, 0o644).to_json(),
                                   "after": blobs.keep(AGENTS, 0o644).to_json()})
    editor = EditorEnd(BUFFER, {"version": 7, "dirty": True, "diskChanged": True}, saves_to=path,
                       answer={"outcome": "applied"})
    approver = Asked(option)
    files = EditorFiles(editor, "s", CAPS, emit=quiet).reviewed()
    return path, editor, approver, Restorer(log, files, blobs, approver, quiet, [str(root)])


async def test_undo_of_a_shell_change_to_a_file_with_unsaved_edits_said_restored_but_the_disk_kept_the_agents_change(
        tmp_path):
    path, editor, approver, restorer = _setup(tmp_path, AGENTS_CHANGE_ONLY)

    text = await restorer.run("undo")
    # the disk held exactly the agent's change: taken off the disk, no question over the user's buffer
    assert approver.asks == []
    assert path.read_bytes() == BEFORE
    assert editor.writes == [] and editor.proposals == []  # the unsaved buffer is not touched
    assert "shd.txt: restored (on disk; the editor's buffer keeps your unsaved changes as they are)" in text, text

    text = await restorer.run("redo")
    assert approver.asks == []
    assert path.read_bytes() == AGENTS
    assert editor.writes == [] and editor.proposals == []
    assert "shd.txt: restored (on disk;" in text, text


async def test_undo_of_a_shell_change_when_the_disk_also_holds_a_save_asks_with_the_disks_diff_and_merges_on_disk(
        tmp_path):
    path, editor, approver, restorer = _setup(tmp_path, AGENTS_CHANGE_ONLY)
    path.write_bytes(b"s1\ns2 SAVED\ns3\ns4\nS5shell\n")  # another save of the disk's, after the command

    text = await restorer.run("undo")
    (ask,) = approver.asks
    assert ask.title == "shd.txt changed since the agent's edit"
    body, diff = ask.content[0]["content"]["text"], ask.content[1]
    assert "your editor's buffer of it has unsaved changes, which are left as they are" in body
    assert diff["oldText"] == "s1\ns2 SAVED\ns3\ns4\nS5shell\n" and diff["newText"] == "s1\ns2 SAVED\ns3\ns4\ns5\n"
    assert path.read_bytes() == b"s1\ns2 SAVED\ns3\ns4\ns5\n"
    assert editor.writes == [] and editor.proposals == []
    assert "restored (only the agent's change taken back; the file's other changes kept) (on disk;" in text, text

    text = await restorer.run("redo")  # from what the undo left, on the disk again: no question
    assert len(approver.asks) == 1
    assert path.read_bytes() == b"s1\ns2 SAVED\ns3\ns4\nS5shell\n"
    assert editor.writes == [] and editor.proposals == []
    assert "shd.txt: restored (on disk;" in text, text


async def test_undo_of_a_shell_change_never_says_restored_when_the_disk_does_not_hold_it_afterwards(
        tmp_path, monkeypatch):
    from agent_server.tools import safe_fs

    path, editor, approver, restorer = _setup(tmp_path, AGENTS_CHANGE_ONLY)
    real = safe_fs.replace_entry

    def raced(dirfd: int, name: str, raw: bytes, mode: int) -> None:
        real(dirfd, name, raw, mode)
        path.write_bytes(b"another program\n")  # right after the write, before it is looked at

    monkeypatch.setattr(safe_fs, "replace_entry", raced)
    text = await restorer.run("undo")
    assert path.read_bytes() == b"another program\n"
    assert ": restored" not in text and "not restored (it changed on disk just now" in text, text
