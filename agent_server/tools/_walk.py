"""Pure-Python fallback for ``glob`` and ``grep`` when ``rg`` is missing: a ``.gitignore``-aware
walk (``pathspec``) and a line search (``re``).

Role: mirror what the ripgrep backend returns — files under a folder, ``.gitignore`` files of the
folder, its sub-folders and its parents (up to the enclosing git repository) honoured, hidden files
included, ``.git`` skipped, binary files skipped by ``grep`` — so the tools behave the same either
way (except the regex dialect: Python ``re`` instead of Rust ``regex``).

Must never: follow a symlinked folder (no loops) or read a file that is not a search candidate.
"""

from __future__ import annotations

import os
import re
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_BINARY_SNIFF = 8192


def _spec(lines: list[str]):  # -> pathspec.GitIgnoreSpec
    import pathspec  # deferred: only the fallback needs it

    return pathspec.GitIgnoreSpec.from_lines(lines)


@dataclass
class _Ignore:
    base: str  # posix path of the folder holding the ignore file, relative to the walk root ("" = root)
    spec: object


def _load(folder: Path) -> object | None:
    lines: list[str] = []
    for name in (".gitignore", ".ignore", ".rgignore"):
        try:
            lines += (folder / name).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
    return _spec(lines) if lines else None


def _parent_ignores(root: Path) -> list[tuple[Path, object]]:
    """Ignore files in the folders above ``root``, up to the enclosing git repository's top."""
    found: list[tuple[Path, object]] = []
    if (root / ".git").exists():
        return found
    for parent in root.parents:
        spec = _load(parent)
        if spec is not None:
            found.append((parent, spec))
        if (parent / ".git").exists():
            break
    return found


def _ignored(rel: str, is_dir: bool, stack: list[_Ignore], parents: list[tuple[Path, object]], root: Path) -> bool:
    """Deepest ignore file with an opinion wins (as in git)."""
    probe_suffix = "/" if is_dir else ""
    for entry in reversed(stack):
        sub = rel[len(entry.base) + 1 :] if entry.base else rel
        result = entry.spec.check_file(sub + probe_suffix)  # type: ignore[attr-defined]
        if result.include is not None:
            return bool(result.include)
    for folder, spec in parents:
        sub = (root / rel).relative_to(folder).as_posix()
        result = spec.check_file(sub + probe_suffix)  # type: ignore[attr-defined]
        if result.include is not None:
            return bool(result.include)
    return False


def walk_files(root: Path, stop: threading.Event | None = None) -> Iterator[str]:
    """Relative posix paths of the files under ``root`` that ``.gitignore`` does not exclude,
    in sorted order (folders depth first). Stops early when ``stop`` is set."""
    parents = _parent_ignores(root)
    stack: list[_Ignore] = []

    def visit(folder: Path, rel: str) -> Iterator[str]:
        if stop is not None and stop.is_set():
            return
        spec = _load(folder)
        if spec is not None:
            stack.append(_Ignore(rel, spec))
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            entries = []
        for entry in entries:
            if entry.name == ".git":
                continue
            child = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                is_file = entry.is_file()
            except OSError:
                continue
            if _ignored(child, is_dir, stack, parents, root):
                continue
            if is_dir:
                yield from visit(Path(entry.path), child)
            elif is_file:
                yield child
        if spec is not None:
            stack.pop()

    yield from visit(root, "")


def _read_fd(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _read_regular(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        os.set_blocking(fd, True)
        return _read_fd(fd)
    finally:
        os.close(fd)


@dataclass
class LineMatch:
    """One matching line: ``path`` relative posix, ``line`` 1-based, ``text`` without its line
    break, ``starts`` the character index of each match in ``text``."""

    path: str
    line: int
    text: str
    starts: list[int]


def grep_files(
    root: Path, files: Iterator[str], regex: re.Pattern[str], stop: threading.Event | None = None,
    *, opened: dict[str, int] | None = None,
) -> Iterator[LineMatch]:
    """Matching lines of ``files`` (relative to ``root``); binary files (NUL in the first 8 KB)
    are skipped, text decoded as UTF-8 with replacement. ``opened``: files already opened by the
    caller (relative name → fd, read from its start, not closed here). Other files are opened
    without following a link and only when regular (never a FIFO or device)."""
    for rel in files:
        if stop is not None and stop.is_set():
            return
        try:
            if opened and rel in opened:
                raw = _read_fd(opened[rel])
            else:
                raw = _read_regular(root / rel)
        except OSError:
            continue
        if b"\x00" in raw[:_BINARY_SNIFF]:
            continue
        lines = raw.decode("utf-8", "replace").split("\n")
        if lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            line = line.removesuffix("\r")
            starts = [m.start() for m in regex.finditer(line)]
            if starts:
                yield LineMatch(rel, number, line, starts)
