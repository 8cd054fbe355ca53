"""Pure-Python fallback for ``glob`` and ``grep`` when ``rg`` is missing: a ``.gitignore``-aware
walk (``pathspec``) and a line search (``re``), run as a child process in ripgrep's place.

Role: mirror what the ripgrep backend returns — files under a folder, ``.gitignore`` files of the
folder, its sub-folders and its parents (up to the enclosing git repository) honoured, hidden files
included, ``.git`` skipped, binary files skipped by ``grep`` — so the tools behave the same either
way (except the regex dialect: Python ``re`` instead of Rust ``regex``). ``python -I _walk.py
files`` writes ``rg --files --null``'s output, ``python -I _walk.py grep [-i] -e REGEX [-- -]``
``rg --json``'s ``match`` records — ``-x REL``: a file or folder never searched, as ``rg --glob=!/REL``;
``-g GLOB``: the same for a path glob; ``-t NAME``: files whose name matches the ``fnmatch`` glob in any
case, as ``rg --type-not``; ``-T`` (``files``): only those, as ``rg --type``. The tools run it through
``_rg.run_rg`` like ``rg`` itself.

Must never: run in the server's process — the model's regex and a cloned repository's
``.gitignore`` patterns go to backtracking ``re`` (``(a+)+$`` runs for ages); as a child it is
killed at the tool's deadline or on cancel, and no other session waits (issue 32 §3). Follow a
symlinked folder (no loops) or read a file that is not a search candidate.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import os
import re
import stat
import sys
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


@dataclass(frozen=True)
class Rules:
    """What a walk leaves out whatever the ignore files say, in any case: ``paths`` (relative files or
    folders), ``globs`` (a regex of relative path globs), ``names`` (a regex of file names);
    ``only_names``: list only the files ``names`` matches instead."""

    paths: frozenset[str] = frozenset()
    globs: re.Pattern[str] | None = None
    names: re.Pattern[str] | None = None
    only_names: bool = False


def path_glob(glob: str) -> str:
    """A path glob (``*``/``?`` within a name, ``**`` any depth) as a regex (``access.SecretRules`` too)."""
    return "".join(".*" if part == "**" else "[^/]*" if part == "*" else "[^/]" if part == "?" else re.escape(part)
                   for part in re.split(r"(\*\*|\*|\?)", glob))


def walk_files(root: Path, stop: threading.Event | None = None, exclude: frozenset[str] = frozenset(),
               rules: Rules | None = None) -> Iterator[str]:
    """Relative posix paths of the files under ``root`` that ``.gitignore`` does not exclude,
    in sorted order (folders depth first). Stops early when ``stop`` is set. ``exclude``: relative
    paths (files or folders) never listed nor entered, whatever the ignore files say; ``rules``:
    more of the same (``Rules``)."""
    rules = rules or Rules(paths=exclude)
    exclude = frozenset(p.casefold() for p in exclude | rules.paths)  # any case, as ``rg --iglob``
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
            if child.casefold() in exclude or (rules.globs is not None and rules.globs.match(child)):
                continue
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
                named = rules.names is not None and rules.names.match(entry.name) is not None
                if named == rules.only_names:
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


def _json_path(rel: str) -> dict[str, str]:
    raw = os.fsencode(rel)
    try:
        return {"text": raw.decode("utf-8")}
    except UnicodeDecodeError:
        return {"bytes": base64.b64encode(raw).decode("ascii")}


def _match_record(match: LineMatch, path: dict[str, str]) -> bytes:
    """``rg --json``'s ``match`` record for ``match`` (byte offsets, as ripgrep gives them)."""
    submatches = []
    offset = 0
    previous = 0
    for start in match.starts:  # each piece of the line encoded once: linear in the line
        offset += len(match.text[previous:start].encode("utf-8", "surrogatepass"))
        previous = start
        submatches.append({"match": {"text": ""}, "start": offset, "end": offset})
    record = {"type": "match", "data": {"path": path, "lines": {"text": match.text + "\n"},
                                        "line_number": match.line, "submatches": submatches}}
    return json.dumps(record, separators=(",", ":")).encode("ascii") + b"\n"


def _split_excluded(args: list[str]) -> tuple[list[str], Rules]:
    """``args`` without its ``-x REL``, ``-g GLOB``, ``-t NAME`` and ``-T`` arguments, and the
    ``Rules`` they make; read left to right, so a pattern or path spelled ``-x``/``-e`` stays one."""
    rest: list[str] = []
    paths: set[str] = set()
    globs: list[str] = []
    names: list[str] = []
    only = False
    i = 0
    while i < len(args):
        if args[i] in ("-x", "-g", "-t") and i + 1 < len(args):
            {"-x": lambda v: paths.add(v), "-g": globs.append, "-t": names.append}[args[i]](args[i + 1])
            i += 2
        elif args[i] == "-T":
            only = True
            i += 1
        elif args[i] == "-e" and i + 1 < len(args):
            rest += args[i:i + 2]
            i += 2
        else:
            rest.append(args[i])
            i += 1
    return rest, Rules(frozenset(paths), re.compile("|".join(f"(?:{path_glob(g)})\\Z" for g in globs), re.IGNORECASE) if globs else None,
                       re.compile("|".join(fnmatch.translate(n) for n in names), re.IGNORECASE) if names else None,
                       only)


def main(argv: list[str]) -> int:
    """The child's entry (see the module): 0 found, 1 nothing found, 2 error — as ``rg``."""
    out = sys.stdout.buffer
    root = Path(os.getcwd())
    argv, rules = _split_excluded(argv)
    if argv[:1] == ["files"]:
        found = False
        for rel in walk_files(root, rules=rules):
            out.write(os.fsencode(rel) + b"\0")
            found = True
        out.flush()
        return 0 if found else 1
    if argv[:1] != ["grep"]:
        sys.stderr.write("usage: _walk.py files | grep [-i] -e REGEX [-- -]\n")
        return 2
    args = argv[1:]
    flags = re.IGNORECASE if "-i" in args else 0
    try:
        regex = re.compile(args[args.index("-e") + 1], flags)
    except (ValueError, IndexError):
        sys.stderr.write("usage: _walk.py grep [-i] -e REGEX [-- -]\n")
        return 2
    except re.error as exc:
        sys.stderr.write(f"invalid regular expression: {exc}\n")
        return 2
    stdin = args[-2:] == ["--", "-"]
    files = iter(["<stdin>"]) if stdin else walk_files(root, rules=rules)
    opened = {"<stdin>": sys.stdin.fileno()} if stdin else None
    found = False
    for match in grep_files(root, files, regex, opened=opened):
        out.write(_match_record(match, _json_path(match.path)))
        found = True
    out.flush()
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
