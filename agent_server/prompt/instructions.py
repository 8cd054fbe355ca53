"""Project instructions: the ``AGENTS.md`` files that tell an agent how a project works.

Role: find the ``AGENTS.md`` files that apply — one at each workspace root, and one in every folder
between a root and a file in focus (nearest last, so the most specific instructions come last) —
and read them, bounded, as ``{"path", "sha256", "text"}`` records. The agent logs those records as
a ``project/instructions`` event when they are first seen or change, and the system prompt is
rendered from that event, never from the disk directly. ``InstructionsMemo`` keeps the last
records with what they were read from, so a turn with nothing changed costs a ``stat`` per root.

Must never: read outside the workspace roots, or follow the folders above a root; read through a link
to a file outside its root, to a file that may hold secrets (``AGENTS.md -> .env``) or to something
other than a regular file (a cloned repository's ``AGENTS.md -> ~/.aws/credentials`` went into the
model's system prompt).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import stat
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

FILE_NAME = "AGENTS.md"
MAX_CHARS = 32_000
"""Characters of one AGENTS.md put into the prompt; more is cut with a note."""


def instruction_paths(roots: Sequence[Path], focus: Iterable[Path] = (),
                      may_read: Callable[[Path], bool] = lambda _path: True) -> list[Path]:
    """The ``AGENTS.md`` files that exist for ``roots`` and the ``focus`` files, in prompt order:
    each root's own file first, then for each focus file the folders from its root down to the
    file's folder (nearest last). No path appears twice. A link is followed only to a regular file
    inside the same root that ``may_read`` (its resolved path) allows — the host: not secret, not
    protected; ``AGENTS.md -> CLAUDE.md`` stays."""
    found: list[Path] = []

    def add(folder: Path, root: Path) -> None:
        candidate = folder / FILE_NAME
        real = Path(os.path.realpath(candidate))
        if candidate in found or root not in real.parents:
            return
        try:
            if stat.S_ISREG(os.lstat(real).st_mode) and may_read(real):
                found.append(candidate)
        except OSError:
            return

    real_roots = [Path(os.path.realpath(r)) for r in roots]
    for root in real_roots:
        add(root, root)
    for file in focus:
        target = Path(os.path.realpath(file))
        for root in real_roots:
            if root not in target.parents:
                continue
            folder = target.parent
            chain = []
            while folder != root and root in folder.parents:
                chain.append(folder)
                folder = folder.parent
            for step in reversed(chain):
                add(step, root)
            break
    return found


def read_instructions(paths: Iterable[Path], may_read: Callable[[Path], bool] = lambda _path: True,
                      roots: Sequence[Path] = ()) -> list[dict[str, Any]]:
    """``[{"path", "sha256", "text"}]`` for each readable file (invalid UTF-8 replaced; a file
    over ``MAX_CHARS`` is cut with a note). Unreadable files are skipped, and so is a file the open
    reached that ``may_read`` refuses or that lies outside ``roots`` (given): a link on the way
    re-pointed after ``instruction_paths`` checked it leads elsewhere, and what is read is judged."""
    real_roots = [Path(os.path.realpath(r)) for r in roots]
    records = []
    for path in paths:
        try:  # the resolved path, no link followed at its last part, regular only
            fd = os.open(os.path.realpath(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            reached = _opened_path(fd)  # where the open really went (a folder on the way may be a link now)
            if (reached is None or not may_read(reached)
                    or real_roots and not any(root in reached.parents for root in real_roots)
                    or not stat.S_ISREG(os.fstat(fd).st_mode)):
                continue
            with os.fdopen(os.dup(fd), "rb") as fh:
                raw = fh.read()
        except OSError:
            continue
        finally:
            os.close(fd)
        text = raw.decode("utf-8", "replace").lstrip("\ufeff")
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS] + f"\n[… {len(text) - MAX_CHARS:,} more characters not shown; read the file for the rest]"
        records.append({"path": str(path), "sha256": hashlib.sha256(raw).hexdigest(), "text": text})
    return records


def _opened_path(fd: int) -> Path | None:
    """The path of the file ``fd`` is open on (``/proc/self/fd``, macOS's ``F_GETPATH``), or ``None``."""
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        pass
    getpath = getattr(fcntl, "F_GETPATH", None)
    if getpath is None:
        return None
    try:
        return Path(os.fsdecode(fcntl.fcntl(fd, getpath, bytes(1024)).rstrip(b"\0")))
    except OSError:
        return None


RACY_SECONDS = 2.0
"""A file or folder changed this recently may change again within its timestamp's granularity
(a coarse kernel clock: milliseconds; FAT: 2 s) without its ``stat`` changing: not remembered."""


def _signature(st: os.stat_result) -> tuple[int, int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class InstructionsMemo:
    """The ``AGENTS.md`` records of a session's roots (``instruction_paths`` + ``read_instructions``,
    no focus file), kept with the ``stat`` of each root (which folder it is, and its entries: one
    created, removed or renamed changes its times) and the ``lstat`` of each file read (its content:
    size, times, inode). ``records`` gives them again while those are unchanged — a ``stat`` per root
    and an ``lstat`` per file instead of resolving every root and looking for the file (the roots'
    ``realpath``, the candidate's, an ``lstat``) and reading it. Not remembered (read each time, as
    before): a prompt with focus files (the folders between root and file), an ``AGENTS.md`` that
    is a link (its target may change elsewhere) or not a regular file, and anything changed within
    ``RACY_SECONDS`` (a timestamp that could not show the next change). ``roots`` and ``may_read``
    must be the same for one memo (the session's)."""

    def __init__(self) -> None:
        self._key: tuple[Any, ...] | None = None
        self._records: list[dict[str, Any]] = []

    def records(self, roots: Sequence[Path], focus: Sequence[Path] = (),
                may_read: Callable[[Path], bool] = lambda _path: True) -> list[dict[str, Any]]:
        """The records ``read_instructions(instruction_paths(roots, focus, may_read), may_read, roots)`` gives now."""
        if focus:
            return read_instructions(instruction_paths(roots, focus, may_read), may_read, roots)
        key = self._key
        if key is not None and key[0] == tuple(roots) and self._unchanged(key):
            return self._records
        self._key = None
        paths = instruction_paths(roots, (), may_read)
        records = read_instructions(paths, may_read, roots)
        self._remember(tuple(roots), paths, records)
        return records

    @staticmethod
    def _unchanged(key: tuple[Any, ...]) -> bool:
        _, folders, files = key
        try:
            return (all(_signature(os.stat(folder)) == sig for folder, sig in folders)
                    and all(_signature(os.lstat(path)) == sig for path, sig in files))
        except OSError:
            return False

    def _remember(self, roots: tuple[Path, ...], paths: list[Path], records: list[dict[str, Any]]) -> None:
        try:
            folders = tuple((root, _signature(os.stat(root))) for root in roots)
            files = []
            for root in roots:
                candidate = root / FILE_NAME
                try:
                    st = os.lstat(candidate)
                except FileNotFoundError:
                    continue
                if not stat.S_ISREG(st.st_mode):
                    return  # a link, or something else: read each time
                files.append((candidate, _signature(st)))
        except OSError:
            return
        if {str(path) for path in paths} != {str(record["path"]) for record in records}:
            return  # a file found but not read (gone meanwhile, unreadable): read each time
        newest = max(max(sig[3], sig[4]) for _, sig in (*folders, *files)) if folders else 0
        if newest > time.time_ns() - RACY_SECONDS * 1e9:
            return
        self._key = (roots, folders, tuple(files))
        self._records = records


def render_instructions(records: Sequence[dict[str, Any]]) -> str:
    """The system-prompt section for ``records`` ("" when there are none)."""
    if not records:
        return ""
    parts = ["# Project instructions",
             "The project's AGENTS.md files follow (more specific ones last; they win on conflicts)."]
    for record in records:
        parts.append(f"\n## {record['path']}\n\n{record['text'].rstrip()}")
    return "\n".join(parts) + "\n"
