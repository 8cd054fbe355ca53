"""What git (and the hook managers) run from the working tree: read-only to confined commands, and
a write by the file tools asks (issue 32 §1: a confined ``bash`` rewrote ``.husky/pre-commit`` and
the user's next ``git commit`` ran it outside the sandbox).

Must never: run anything from the repository (no hook, no filter, no fsmonitor) while looking.

Role: ``hook_paths(roots)`` lists, inside the roots, what a user's git command later executes or
reads as configuration: the folder ``core.hooksPath`` names (the whole folder; husky's ``.husky/_``
protects ``.husky``), the hook managers' files (``.pre-commit-config.yaml``, ``lefthook*.yml``,
``.lefthook/``, ``.husky/``), files named by ``include.path`` / ``includeIf.*.path`` (every
condition: a condition may hold later), and scripts named by command-valued settings (filter, diff
and merge drivers, ``core.fsmonitor``, ``core.sshCommand``, editors, pagers, ``gpg.program``,
credential helpers, ``!`` aliases). The repository's configuration is read with ``git config --file``
(no repository discovery, nothing run), includes followed by hand. ``None`` means the set cannot be
determined (a configuration git cannot parse, git missing beside a ``.git``): then every shell
command asks, as without a sandbox. Code those hooks run (linter configs, package scripts) is an
ordinary edit. Each configuration file's entries are kept by its identity (device, inode, size,
mtime, ctime): ``git config`` runs again only for a file that changed (or one changed too recently
to trust its timestamps, ``RACY_NS``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterable
from typing import Any
from pathlib import Path

#: Hook managers' files and folders at a repository's top (and at each root).
HOOK_NAMES = (".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
              "lefthook-local.yml", "lefthook-local.yaml", ".lefthook-local.yml", ".lefthook-local.yaml",
              ".lefthook", ".lefthook-local", ".husky")
#: Settings whose value is a command git runs (the keys as ``git config --list`` writes them).
_COMMAND_KEYS = ("core.fsmonitor", "core.sshcommand", "core.editor", "core.pager", "sequence.editor",
                 "gpg.program", "credential.helper", "diff.external")
_COMMAND_SUFFIXES = (".clean", ".smudge", ".process", ".textconv", ".command", ".driver", ".helper", ".program")
_COMMAND_SECTIONS = ("filter.", "diff.", "merge.", "credential.", "gpg.")
#: Include depth git itself allows.
_MAX_INCLUDE_DEPTH = 10


class Undeterminable(Exception):
    """The protected set cannot be told (the reason is the message)."""


def _repo_top(root: Path) -> Path | None:
    for folder in (root, *root.parents):
        if os.path.lexists(folder / ".git"):
            return folder
    return None


def _git_dir(top: Path) -> Path:
    dot_git = top / ".git"
    if dot_git.is_file():  # a worktree or submodule: "gitdir: PATH"
        text = dot_git.read_text(encoding="utf-8", errors="replace").strip()
        if not text.startswith("gitdir:"):
            raise Undeterminable(f"{dot_git} is not a git link file")
        return (top / text[len("gitdir:"):].strip()).resolve()
    return dot_git


def _config_files(git_dir: Path) -> list[Path]:
    files = [git_dir / "config", git_dir / "config.worktree"]
    common = git_dir / "commondir"
    if common.is_file():
        base = (git_dir / common.read_text(encoding="utf-8", errors="replace").strip()).resolve()
        files += [base / "config", base / "config.worktree"]
    return files


#: A file whose ctime is this close to when it was looked at is read again next time: the kernel's
#: timestamps are coarse, so a second change within the same tick would keep its identity.
RACY_NS = 50_000_000
_CACHE_MAX = 256
_cache: dict[tuple[str, str], tuple[tuple[int, ...], list[tuple[str, str]]]] = {}
_cache_lock = threading.Lock()


def _identity(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)


def _entries(git: str, path: Path) -> list[tuple[str, str]]:
    """The entries of one configuration file (``--no-includes``), from the cache while the file's
    identity is unchanged."""
    now = time.time_ns()
    key = (git, str(path))
    seen = _identity(path)
    with _cache_lock:
        kept = _cache.get(key)
    if kept is not None and seen is not None and kept[0] == seen:
        return kept[1]
    out = _read_entries(git, path)
    if seen is not None and now - seen[4] > RACY_NS and _identity(path) == seen:
        with _cache_lock:
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = (seen, out)
    return out


def _read_entries(git: str, path: Path) -> list[tuple[str, str]]:
    try:
        done = subprocess.run([git, "config", "--file", str(path), "--no-includes", "--list", "-z"],
                              capture_output=True, timeout=10, stdin=subprocess.DEVNULL,
                              env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C",
                                   "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Undeterminable(f"git config could not read {path}: {exc}") from None
    if done.returncode != 0:
        raise Undeterminable(f"git cannot parse {path}: {done.stderr.decode(errors='replace').strip()[:200]}")
    out = []
    for record in done.stdout.split(b"\0"):
        if record:
            key, _, value = record.decode("utf-8", "surrogateescape").partition("\n")
            out.append((key.lower(), value))
    return out


def _command_key(key: str) -> bool:
    if key in _COMMAND_KEYS:
        return True
    if key.startswith("alias."):
        return True
    if key.startswith("pager."):
        return True
    return key.startswith(_COMMAND_SECTIONS) and key.endswith(_COMMAND_SUFFIXES)


def _command_files(command: str, top: Path) -> list[Path]:
    """The words of a command that name a file of the tree (git runs it from the top)."""
    import shlex  # deferred: not on the server's start-up path (tests/server/test_lazy_imports.py)

    if command.startswith("!"):
        command = command[1:]
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    found = []
    for word in words:
        if "/" in word or (top / word).is_file():
            found.append(Path(os.path.expanduser(word)) if word.startswith("~") else top / word)
    return found


#: Which hook manager's files matter, by a word its installed hooks contain.
_MANAGERS = {"pre-commit": (".pre-commit-config.yaml",), "lefthook": tuple(n for n in HOOK_NAMES if "lefthook" in n),
             "husky": (".husky",)}


def _installed_managers(hook_folders: Iterable[Path]) -> set[str]:
    """The hook managers whose hooks are installed in ``hook_folders`` (by the words in them)."""
    found: set[str] = set()
    for folder in hook_folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries[:100]:
            if entry.name.endswith(".sample") or not entry.is_file(follow_symlinks=False):
                continue
            try:
                with open(entry.path, "rb") as handle:
                    text = handle.read(65536).decode("utf-8", "replace")
            except OSError:
                continue
            found.update(word for word in _MANAGERS if word in text)
    return found


def hook_paths(roots: Iterable[Path | str], *, all_names: bool = False) -> list[str]:
    """Resolved paths inside ``roots`` that git or a hook manager runs or reads: the existing hook
    managers' files, those of a manager whose hooks are installed (existing or not), and what the
    git configuration names (existing or not); ``all_names``: every manager's names, installed or
    not (the file tools ask about them all). Raises ``Undeterminable`` when the set cannot be told."""
    roots = [Path(os.path.realpath(r)) for r in roots]
    found: list[Path] = []
    git = shutil.which("git")
    for root in roots:
        top = _repo_top(root)
        bases = [root] if top is None or top == root else [root, top]
        found += [b / name for b in bases for name in HOOK_NAMES if all_names or os.path.lexists(b / name)]
        if top is None:
            continue
        if git is None:
            raise Undeterminable(f"{top} is a git repository but git was not found to read its configuration")
        seen: set[Path] = set()
        git_dir = _git_dir(top)
        hook_folders = [git_dir / "hooks"]
        pending = [(f, 0) for f in _config_files(git_dir)]
        while pending:
            config, depth = pending.pop()
            config = Path(os.path.realpath(config))
            if config in seen:
                continue
            seen.add(config)
            found.append(config)  # an included file inside the tree is protected itself
            if not config.is_file():
                continue
            for key, value in _entries(git, config):
                if key == "include.path" or (key.startswith("includeif.") and key.endswith(".path")):
                    if depth >= _MAX_INCLUDE_DEPTH:
                        raise Undeterminable(f"includes nested deeper than {_MAX_INCLUDE_DEPTH} in {config}")
                    target = Path(os.path.expanduser(value))
                    pending.append((target if target.is_absolute() else config.parent / target, depth + 1))
                elif key == "core.hookspath":
                    hooks = Path(os.path.expanduser(value))
                    hooks = hooks if hooks.is_absolute() else top / hooks
                    found.append(hooks)
                    hook_folders.append(hooks)
                    if hooks.name == "_" and hooks.parent.name == ".husky":
                        found.append(hooks.parent)  # husky's stubs run the scripts beside them
                elif _command_key(key):
                    found += _command_files(value, top)
        for manager in _installed_managers(hook_folders):
            found += [b / name for b in bases for name in _MANAGERS[manager]]
    out: list[str] = []
    for path in found:
        real = os.path.realpath(path)
        if not any(real == str(r) or real.startswith(str(r) + "/") for r in roots):
            continue
        if any(real == str(r / ".git") or real.startswith(str(r / ".git") + "/") for r in roots):
            continue  # .git itself is read-only already
        out.append(real)
    return sorted(set(out))


def read_only_paths(paths: Iterable[str], roots: Iterable[Path | str]) -> list[str]:
    """What to bind read-only for ``paths``: each one, or the highest of its missing ancestors
    inside a root (a placeholder there blocks creating the whole chain, and none of the user's
    folders is made); a path inside another one is covered by it."""
    tops = [Path(os.path.realpath(r)) for r in roots]
    out = set()
    for text in paths:
        best = path = Path(text)
        for parent in path.parents:
            if os.path.lexists(parent) or parent in tops:
                break
            best = parent
        out.add(str(best))
    return [p for p in sorted(out) if not any(p != q and p.startswith(q + "/") for q in out)]


def hook_of(resolved: Path, lexical: Path, paths: Iterable[str]) -> str | None:
    """The protected path of ``paths`` that ``resolved`` or ``lexical`` is or lies in, else None;
    in any case (``.HUSKY/pre-commit``: a case-folding filesystem opens it as ``.husky/pre-commit``)."""
    for base in paths:
        folded = base.casefold()
        for p in (str(resolved).casefold(), str(lexical).casefold()):
            if p == folded or p.startswith(folded.rstrip("/") + "/"):
                return base
    return None


# -- what the hooks run (the end-of-turn summary) ----------------------------------------------------

#: Files the tools a hook typically starts read or run, by name at any depth (their words in the
#: hook, or any word when a hook manager that runs such tools is set up: pre-commit, lefthook).
_TOOL_FILES = {
    "npm": ("package.json",), "npx": ("package.json",), "yarn": ("package.json",), "pnpm": ("package.json",),
    "bun": ("package.json",), "node": ("package.json",),
    "lint-staged": ("package.json", ".lintstagedrc*", "lint-staged.config.*"),
    "eslint": (".eslintrc*", "eslint.config.*"), "prettier": (".prettierrc*", "prettier.config.*"),
    "stylelint": (".stylelintrc*", "stylelint.config.*"), "commitlint": (".commitlintrc*", "commitlint.config.*"),
    "make": ("Makefile", "makefile", "GNUmakefile", "*.mk"),
    "ruff": ("pyproject.toml", "ruff.toml", ".ruff.toml"), "black": ("pyproject.toml",),
    "flake8": ("setup.cfg", "tox.ini", ".flake8"), "mypy": ("pyproject.toml", "setup.cfg", "mypy.ini", ".mypy.ini"),
    "pylint": ("pyproject.toml", ".pylintrc", "pylintrc"), "isort": ("pyproject.toml", ".isort.cfg"),
    "pytest": ("pyproject.toml", "pytest.ini", "setup.cfg", "tox.ini", "conftest.py"), "tox": ("tox.ini",),
    "cargo": ("Cargo.toml", "build.rs", "rustfmt.toml", ".rustfmt.toml", "clippy.toml"),
    "golangci-lint": (".golangci.yml", ".golangci.yaml", ".golangci.toml"),
}
#: Hook managers whose configuration names tools by repository or id (any tool word then counts).
_TOOL_CONFIGS = (".pre-commit-config.yaml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml", ".lefthook.yaml",
                 "lefthook-local.yml", "lefthook-local.yaml")


def hook_runs(roots: Iterable[Path | str]) -> "HookRuns | None":
    """What the installed git hooks of the roots' repositories run or read (``None``: no hook is
    installed, or the set cannot be told): the hook scripts and managers' files themselves, every
    file of the tree they name, and the files the tools they start read (``_TOOL_FILES``; one level
    into ``package.json`` scripts). An approximation that errs on naming too much: it only feeds
    the end-of-turn summary, never a permission."""
    import fnmatch  # deferred: off the start-up path
    import re

    roots = [Path(os.path.realpath(r)) for r in roots]
    try:
        protected = hook_paths(roots)
    except Undeterminable:
        return None
    texts: dict[str, str] = {}
    for root in roots:
        top = _repo_top(root)
        if top is None:
            continue
        try:
            folders = [_git_dir(top) / "hooks"]
        except (Undeterminable, OSError):
            folders = []
        folders += [Path(p) for p in protected if os.path.isdir(p)]
        for folder in folders:  # a hooks folder and one level below it (husky's `_`), bounded
            for sub in (folder, *_subfolders(folder)):
                for name in _files(sub):
                    if not name.endswith(".sample") and len(texts) < _MAX_HOOK_FILES:
                        texts[os.path.join(sub, name)] = _head(os.path.join(sub, name))
        for p in protected:
            if os.path.isfile(p) and len(texts) < _MAX_HOOK_FILES:
                texts[p] = _head(p)
    if not texts:
        return None
    tops = {t for t in (_repo_top(r) for r in roots) if t is not None} | set(roots)
    named: dict[str, str] = {}
    patterns: dict[str, str] = {}
    path_words: dict[str, str] = {}
    for hook, text in texts.items():
        words = set(re.findall(r"[\w./@+-]{1,255}", text))
        named.setdefault(os.path.realpath(hook), hook)
        for word in words:
            if ("/" in word or "." in word) and not word.startswith(("http", "//")) and len(path_words) < _MAX_WORDS:
                path_words.setdefault(word, hook)
        tools = [w for w in _TOOL_FILES if w in words or (os.path.basename(hook) in _TOOL_CONFIGS)]
        for tool in tools:
            for pattern in _TOOL_FILES[tool]:
                patterns.setdefault(pattern, hook)
    for word, hook in path_words.items():  # each word looked up once, in each top
        for top in tops:
            candidate = os.path.realpath(top / word)
            if os.path.isfile(candidate):
                named.setdefault(candidate, hook)
    for top in tops:  # one level into package.json: `npm test` runs what "test" names, lint-staged its globs' tools
        package = top / "package.json"
        if "package.json" in patterns and package.is_file():
            for word in list(set(re.findall(r"[\w./@+-]{1,255}", _head(str(package)))))[:_MAX_WORDS]:
                candidate = os.path.realpath(top / word)
                if ("/" in word or "." in word) and os.path.isfile(candidate):
                    named.setdefault(candidate, str(package))
                for pattern in _TOOL_FILES.get(word, ()):
                    patterns.setdefault(pattern, str(package))
    return HookRuns(named, patterns, fnmatch)


class HookRuns:
    """``why(path)``: the hook file (or ``package.json``) through which a hook runs or reads
    ``path``, else ``None``."""

    def __init__(self, named: dict[str, str], patterns: dict[str, str], fnmatch: Any) -> None:
        self.named, self.patterns, self._fnmatch = named, patterns, fnmatch

    def why(self, path: str) -> str | None:
        real = os.path.realpath(path)
        if real in self.named:
            return self.named[real]
        name = os.path.basename(real)
        for pattern, hook in self.patterns.items():
            if self._fnmatch.fnmatchcase(name, pattern):
                return hook
        return None


#: Most hook files read, and most path-like words looked up, for one summary.
_MAX_HOOK_FILES = 200
_MAX_WORDS = 2000


def _subfolders(folder: Path) -> list[str]:
    try:
        return [e.path for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)][:20]
    except OSError:
        return []


def _files(folder: Path | str) -> list[str]:
    try:
        return [e.name for e in os.scandir(folder) if e.is_file(follow_symlinks=False)][:_MAX_HOOK_FILES]
    except OSError:
        return []


def _head(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(65536).decode("utf-8", "replace")
    except OSError:
        return ""
