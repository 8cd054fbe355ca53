"""The workspace-file seam: the only way a tool reads or writes a workspace file.

Role: ``WorkspaceFiles`` (a small async protocol: ``read`` a snapshot, ``write`` bytes guarded by
the snapshot they were computed from), its disk backend ``DiskFiles`` (atomic, guarded writes),
and the ``ReadLedger`` of what the session has read (invariant 12). Issue 4 adds the editor-buffer
and edit-proposal backends behind the same protocol.

Must never: write over a file whose bytes are not the ones the caller based its change on — a
guarded write whose base no longer matches is answered ``stale`` and nothing is written.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from . import safe_fs
from .access import FileAccess

CURRENT_TOOL_CALL: contextvars.ContextVar[str | None] = contextvars.ContextVar("current_tool_call", default=None)
"""The editor's ``toolCallId`` of the call a backend is working for (set by the pipeline around a
dispatch), so an editor backend can tie its requests (edit proposals) to that call."""

PROPOSAL_LABEL: contextvars.ContextVar[str | None] = contextvars.ContextVar("proposal_label", default=None)
"""The title an editor backend gives the edit proposal of the write in progress instead of its own
("Edit app.py"): ``/undo`` and ``/redo`` set it ("Undo turn 3: app.py") around their writes."""

#: Files larger than this are not loaded by ``DiskFiles.read`` (``FileTooLargeError``).
DEFAULT_MAX_READ_BYTES = 32 * 1024 * 1024


def sha256_hex(raw: bytes) -> str:
    """Hex sha256 of ``raw``."""
    return hashlib.sha256(raw).hexdigest()


class FileTooLargeError(OSError):
    """A file is larger than the backend agrees to load; ``size`` and ``limit`` in bytes."""

    def __init__(self, path: Path, size: int, limit: int) -> None:
        super().__init__(f"{path} is {size:,} bytes, more than the {limit:,}-byte limit")
        self.path, self.size, self.limit = path, size, limit


class NotTextFileError(OSError):
    """A backend refuses to hand over a file's text because it cannot be faithful to its bytes (an
    editor holds a file that is not UTF-8); ``reason`` is the ``NotTextError`` sentence, worded as
    ``decode_text`` words it for the same bytes."""

    def __init__(self, path: Path, reason: object) -> None:
        super().__init__(str(reason))
        self.path, self.reason = path, str(reason)


@dataclass(frozen=True)
class FileSnapshot:
    """The full bytes of a file at one moment.

    ``path``: absolute path as asked for; ``raw``: every byte; ``sha256``: hex digest of ``raw``;
    ``version``: the editor buffer's version when the bytes came from an open buffer, ``None`` when
    they came from disk. ``disk_changed``: the buffer has unsaved changes and the editor says its
    file changed on disk since it was loaded or saved (the disk holds other text). ``editor_text``:
    ``raw`` is an editor's text (docs/protocol.md "The text of a document"), which never holds the
    file's BOM — ``file_bytes`` gives the file's bytes it stands for.
    """

    path: Path
    raw: bytes
    sha256: str
    version: int | None = None
    disk_changed: bool = False
    editor_text: bool = False

    @classmethod
    def of(cls, path: Path, raw: bytes, version: int | None = None, *, disk_changed: bool = False,
           editor_text: bool = False) -> FileSnapshot:
        """A snapshot of ``raw`` with its digest computed."""
        return cls(Path(path), raw, sha256_hex(raw), version, disk_changed, editor_text)


UTF8_BOM = b"\xef\xbb\xbf"


def file_bytes(snapshot: FileSnapshot, disk: bytes | None) -> bytes:
    """The file's bytes ``snapshot`` stands for: an editor's text never holds the file's BOM (a
    property of the file, docs/protocol.md), so the BOM the file has on ``disk`` goes before it;
    any other snapshot is the bytes already. What is compared with, merged with or kept beside a
    checkpoint (the file's bytes) is this, never the editor's text as it came."""
    if snapshot.editor_text and disk is not None and disk.startswith(UTF8_BOM):
        return UTF8_BOM + snapshot.raw
    return snapshot.raw


def editor_text_of(raw: bytes, snapshot: FileSnapshot | None) -> bytes:
    """``raw`` (a file's bytes) as the text of the editor ``snapshot`` came from: without one leading
    BOM when that is an editor's text (the file keeps its own BOM there); else ``raw`` as it is."""
    if snapshot is not None and snapshot.editor_text and raw.startswith(UTF8_BOM):
        return raw[len(UTF8_BOM):]
    return raw


@dataclass
class WriteOutcome:
    """What a guarded write (or an edit proposal to the editor) did.

    ``status``: ``"written"`` (the change is in place; ``snapshot`` describes what really landed —
    an editor may return text the user adjusted before accepting), ``"partial"`` (the user accepted
    some hunks: ``snapshot`` is the text that landed, ``hunks_applied`` of ``hunks_total``),
    ``"rejected"`` (the user said no), ``"stale"`` (the file is not what ``base`` said — nothing
    written), ``"cancelled"`` (the turn was cancelled while the proposal was pending — nothing
    written), ``"timeout"`` (no answer from the user within the approval timeout; the proposal
    was withdrawn — nothing written), ``"failed"`` (an OS or editor error — nothing written). ``message``: a sentence for
    the model. ``saved``: whether the disk now holds the new text (``False``: the change is in an
    editor buffer with unsaved changes, the disk still has the old text). ``save_failed``: not saved
    because the editor's save of a buffer without unsaved text did not complete (a save participant
    such as format-on-save still running, or the write failed), not because of the user's edits. ``landed_by``: who made
    ``snapshot`` differ from what was sent — ``"user"`` (adjusted before accepting) or ``"editor"``
    (the client changed the text while writing it, e.g. a final blank line). ``merged``: the editor
    applied the change on top of the user's edits of other lines made while it waited; ``snapshot``
    is then the agent's view (its base with the change), not the file's text. ``as_sent``: with
    ``landed_by`` ``"editor"`` after a save, the editor applied exactly the text sent (every hunk, as
    proposed; ``fs/write_text_file``'s whole text) before its save participant (format-on-save)
    changed it: the save's doing alone.
    """

    status: Literal["written", "partial", "rejected", "stale", "cancelled", "timeout", "failed"]
    message: str = ""
    snapshot: FileSnapshot | None = None
    saved: bool = True
    save_failed: bool = False
    hunks_applied: int | None = None
    hunks_total: int | None = None
    landed_by: Literal["user", "editor"] = "user"
    merged: bool = False
    as_sent: bool = False


@runtime_checkable
class WorkspaceFiles(Protocol):
    """How tools reach workspace files. Paths are absolute."""

    async def read(self, path: Path) -> FileSnapshot:
        """The file's current bytes. Raises ``FileNotFoundError``, ``IsADirectoryError``,
        ``PermissionError`` (or another ``OSError``, e.g. ``FileTooLargeError``)."""
        ...

    async def write(self, path: Path, raw: bytes, *, base: FileSnapshot | None) -> WriteOutcome:
        """Replace the file with ``raw`` if it still is ``base`` (``base=None``: only if it does
        not exist yet). Never raises for an OS error: answers ``failed``."""
        ...


def _current_umask() -> int:
    """The process umask without changing it (Linux ``/proc``), else the common ``0o022``."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


class DiskFiles:
    """``WorkspaceFiles`` on the local disk.

    The path is resolved once; after that nothing follows a link (``safe_fs``). Reads open regular
    files only (never a FIFO, device, socket or a refused ``/proc`` entry). Writes are atomic (a
    temporary file created *inside* the directory fd of the resolved target's folder, ``fsync``,
    ``renameat`` in that fd), reached beneath the root that contains the target (``access``), keep
    the replaced file's permission bits (never setuid/setgid), give new files ``0644`` minus the
    umask, create missing parent folders, and write through a symlink to its target (the link
    stays a link). A link swapped into the path after the resolution makes the write fail —
    nothing lands anywhere else. The guard re-reads the file just before replacing it; a change
    in the instant between that check and the rename cannot be detected (no file locking).

    ``access``: the session's ``FileAccess`` (roots, protected stores, whether writes may land
    outside the roots); ``None``: no roots known — ``/proc`` rules only, writes anywhere.
    """

    def __init__(self, *, max_read_bytes: int = DEFAULT_MAX_READ_BYTES, access: FileAccess | None = None) -> None:
        self.max_read_bytes = max_read_bytes
        self.access = access or FileAccess()

    async def read(self, path: Path) -> FileSnapshot:
        """See ``WorkspaceFiles.read``; also raises ``FileTooLargeError`` above ``max_read_bytes``,
        ``safe_fs.PathRefused``, ``NotRegularFileError`` and ``PathChangedError``."""
        return await asyncio.to_thread(self._read, Path(path))

    def _read(self, path: Path) -> FileSnapshot:
        fd, _ = self.access.open_read(path)
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > self.max_read_bytes:
                raise FileTooLargeError(path, size, self.max_read_bytes)
            raw = fh.read(self.max_read_bytes + 1)
        if len(raw) > self.max_read_bytes:
            raise FileTooLargeError(path, len(raw), self.max_read_bytes)
        return FileSnapshot.of(path, raw)

    async def write(self, path: Path, raw: bytes, *, base: FileSnapshot | None) -> WriteOutcome:
        """See ``WorkspaceFiles.write``."""
        return await asyncio.to_thread(self._write, Path(path), raw, base)

    def _write(self, path: Path, raw: bytes, base: FileSnapshot | None) -> WriteOutcome:
        try:
            resolved = self.access.check(path, "write")
            anchor = self.access.write_anchor(resolved)
        except safe_fs.PathRefused as exc:
            return WriteOutcome("failed", f"{path} is refused: {exc.reason}")
        except safe_fs.PathChangedError as exc:
            return WriteOutcome("failed", f"{path} changed after the permission check ({exc.detail}); nothing "
                                          "was written")
        if resolved == anchor:
            return WriteOutcome("failed", f"{path} is a directory")
        parts = os.path.relpath(resolved, anchor).split("/")
        try:
            dirfd = safe_fs.open_dir_beneath(anchor, parts[:-1], create=True)
        except safe_fs.PathChangedError:
            return WriteOutcome("failed", f"{path} changed while it was being written (a link appeared in its "
                                          "path); nothing was written")
        except OSError as exc:
            return WriteOutcome("failed", f"cannot write {path}: {exc.strerror or exc}")
        try:
            return self._write_in(dirfd, parts[-1], path, raw, base)
        finally:
            os.close(dirfd)

    def _write_in(self, dirfd: int, name: str, path: Path, raw: bytes, base: FileSnapshot | None) -> WriteOutcome:
        try:
            found = safe_fs.read_entry(dirfd, name, self.max_read_bytes)
        except IsADirectoryError:
            return WriteOutcome("failed", f"{path} is a directory")
        except safe_fs.PathChangedError:
            return WriteOutcome("stale", f"{path} changed since it was read (it is a link now)")
        except OSError as exc:
            return WriteOutcome("failed", f"cannot read {path} before writing: {exc.strerror or exc}")
        current, mode = (found[0], found[1].st_mode & 0o777) if found else (None, 0o644 & ~_current_umask())
        if base is None and current is not None:
            return WriteOutcome("stale", f"{path} exists now (it did not when the change was made)")
        if base is not None:
            if current is None:
                return WriteOutcome("stale", f"{path} was deleted since it was read")
            if sha256_hex(current) != base.sha256:
                return WriteOutcome("stale", f"{path} changed on disk since it was read")
        try:
            safe_fs.replace_entry(dirfd, name, raw, mode)
        except OSError as exc:
            return WriteOutcome("failed", f"cannot write {path}: {exc.strerror or exc}")
        return WriteOutcome("written", snapshot=FileSnapshot.of(path, raw))


def ledger_key(path: Path | str) -> str:
    """The key the ledger files a path under: its absolute path with symlinks resolved (as
    written when a link keeps changing under the resolution)."""
    try:
        return safe_fs.resolve_once(path)
    except OSError:
        return os.path.abspath(path)


class ReadLedger:
    """What this session has read, per file: the last snapshot the model saw (invariant 12).

    ``write``/``edit`` refuse a file with no entry (not read) or whose current bytes differ from
    the entry (stale); after a successful write the new snapshot is recorded, so the model can
    edit the same file again without re-reading.
    """

    def __init__(self) -> None:
        self._seen: dict[str, FileSnapshot] = {}

    def record(self, snapshot: FileSnapshot) -> None:
        """Remember ``snapshot`` as the latest the model saw of its file."""
        self._seen[ledger_key(snapshot.path)] = snapshot

    def last(self, path: Path | str) -> FileSnapshot | None:
        """The latest snapshot recorded for ``path`` (any spelling of the same file), or ``None``."""
        return self._seen.get(ledger_key(path))

    def forget(self, path: Path | str) -> None:
        """Drop the entry for ``path`` (e.g. after the file was deleted)."""
        self._seen.pop(ledger_key(path), None)

    def __len__(self) -> int:
        return len(self._seen)
