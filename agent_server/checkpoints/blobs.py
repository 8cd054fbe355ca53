"""A content-addressed store of file bytes, shared by every session of one state folder.

Role: ``put(raw)`` keeps bytes once under their sha256 (``blobs/ab/cdef…``, ``0600`` in ``0700``
folders, written atomically), ``get(sha)`` gives them back, ``collect(keep)`` removes every blob no
live session references (run after ``session/delete``). ``FileState`` is how the log names a file's
state: its blob and mode, or absent; a state whose bytes were not kept (a secret file, a file over the
size limit) names them only (``kept`` false) and can be compared, never restored.

Must never: overwrite a blob (same name, same bytes), or remove one that ``keep`` names.
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable


#: A symbolic link's ``FileState.mode`` (its bytes: the link's target text, never followed).
LINK_MODE = stat.S_IFLNK | 0o777
_SECRET_KEY = os.urandom(32)  # a secret file's state is told apart within this process only


@dataclass(frozen=True)
class FileState:
    """A file's state in a checkpoint: ``blob`` (sha256 hex of its bytes) and ``mode`` (permission
    bits, e.g. ``0o644``); the file absent is ``None`` where a ``FileState`` is expected.
    ``kept`` false: the bytes are not in the store (a secret, or over the size limit) — ``blob``
    then only tells states apart (a big file's sha256 or ``size:…:mtime:…``; a secret's keyed hash,
    ``secret:…``, whose key never leaves the process) and nothing can be restored from it."""

    blob: str
    mode: int
    kept: bool = True

    def to_json(self) -> dict[str, Any]:
        """``{"blob": sha, "mode": int}`` for a log event (``"kept": false`` added when not kept)."""
        return {"blob": self.blob, "mode": self.mode} if self.kept else {
            "blob": self.blob, "mode": self.mode, "kept": False}

    def holds(self, raw: bytes) -> bool | None:
        """Whether ``raw`` are this state's bytes; ``None`` when that cannot be told (a big file
        named by its size and mtime)."""
        if self.blob.startswith("secret:"):
            return self.blob[7:] == hashlib.blake2b(raw, key=_SECRET_KEY, digest_size=16).hexdigest()
        if self.blob.startswith("size:"):
            return None
        return hashlib.sha256(raw).hexdigest() == self.blob

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> FileState | None:
        """The inverse of ``to_json``; ``None`` stays ``None`` (the file was absent)."""
        return None if data is None else cls(str(data["blob"]), int(data["mode"]), data.get("kept", True) is not False)


class BlobStore:
    """Blobs under ``root`` (usually ``<state folder>/blobs``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, sha: str) -> Path:
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise ValueError(f"not a sha256 hex digest: {sha!r}")
        return self.root / sha[:2] / sha[2:]

    def put(self, raw: bytes) -> str:
        """Keep ``raw``; returns its sha256 hex. Raises ``OSError`` (disk full …): nothing half-written stays."""
        sha = hashlib.sha256(raw).hexdigest()
        path = self._path(sha)
        if path.exists():
            return sha
        for folder in (self.root, path.parent):
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return sha

    def put_file(self, path: Path) -> FileState | None:
        """Keep the current bytes of ``path`` (not following a final symlink); ``None`` when it does
        not exist or is not a regular file."""
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return None
        if not os.path.isfile(path) or os.path.islink(path):
            return None
        return FileState(self.put(Path(path).read_bytes()), st.st_mode & 0o7777)

    def keep(self, raw: bytes, mode: int, *, secret: bool = False, limit: int | None = None) -> FileState:
        """The state of a file holding ``raw`` with ``mode``: its bytes kept, or — a ``secret`` file,
        or more than ``limit`` bytes — named by their sha256 only (``kept`` false)."""
        if secret:
            return FileState("secret:" + hashlib.blake2b(raw, key=_SECRET_KEY, digest_size=16).hexdigest(), mode,
                             kept=False)
        if limit is not None and len(raw) > limit:
            return FileState(hashlib.sha256(raw).hexdigest(), mode, kept=False)
        return FileState(self.put(raw), mode)

    def get(self, sha: str) -> bytes:
        """The bytes of blob ``sha``. Raises ``FileNotFoundError`` when it is not kept."""
        return self._path(sha).read_bytes()

    def collect(self, keep: Iterable[str]) -> int:
        """Remove every blob not in ``keep``; returns how many were removed."""
        wanted = set(keep)
        removed = 0
        if not self.root.is_dir():
            return 0
        for folder in self.root.iterdir():
            if not folder.is_dir():
                continue
            for blob in folder.iterdir():
                if folder.name + blob.name not in wanted:
                    blob.unlink(missing_ok=True)
                    removed += 1
        return removed
