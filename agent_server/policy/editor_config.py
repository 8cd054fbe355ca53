"""Editor configuration in the workspace roots that editors execute or obey: read-only to confined
shell commands, and a write by the file tools always asks the user.

Role: ``EDITOR_CONFIG`` names the entries of a workspace root that an editor runs or obeys when it
opens the folder — ``.vscode/`` (settings choosing binaries, tasks, launch configurations),
``.idea/`` (run configurations, external tools), ``.zed/`` (settings, tasks), and Neovim's / Vim's
project files ``.nvim.lua``, ``.nvimrc``, ``.exrc`` (run with 'exrc'). A command that writes one of
them could escape the sandbox through the editor (the next time the editor or its extension reads
it, outside the sandbox), as a write into ``.git/hooks`` could through git; ``.git`` is handled on
its own (``sandbox.py``, ``engine.py``).

Must never: remove anything but an empty folder it made itself; let a placeholder go while another
command still has it mounted (the host-side ``rmdir`` of a mount point detaches that mount in every
other namespace).

The confined shell gets each such path that exists bind-mounted read-only onto itself in its mount
namespace (``ro_binds``, as ``.git``). A bind mount needs an existing target, so for a name that does
not exist yet ``Placeholders`` makes an empty *directory* there for the command's lifetime (a folder
for every name, ``.nvim.lua`` too: a folder blocks creating the file of that name, git does not show
an empty folder, and an editor does not run one), bind-mounted read-only like the others: the command
can neither create the name, nor write into it, nor remove or rename it (a mount point: EBUSY). When
the last confined command holding it ends, the placeholder is removed if it is still empty (the user
may have put something into it meanwhile, from outside the sandbox: then it is theirs and stays).
A server killed mid-command can leave an empty placeholder folder behind; it protects the same way
the next time and holds nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

#: Entries of a workspace root that editors execute or obey (see the module docstring); Vim's rc
#: files (sourced with 'exrc'), Helix's ``.helix/`` (``languages.toml`` names language servers) and
#: dev containers (``initializeCommand`` runs on the host) too (issue 32 §4).
EDITOR_CONFIG = (".vscode", ".idea", ".zed", ".nvim.lua", ".nvimrc", ".exrc", ".vimrc", "_vimrc", ".gvimrc",
                 ".helix", ".devcontainer", ".devcontainer.json")
#: Folders an editor obeys wherever they are (a sub-folder opened as a workspace, a multi-root one).
CONFIG_FOLDERS = frozenset({".vscode", ".idea", ".zed", ".helix", ".devcontainer"})
#: File names an editor obeys wherever they are; and ``*.code-workspace``.
CONFIG_FILES = frozenset({".nvim.lua", ".nvimrc", ".exrc", ".vimrc", "_vimrc", ".gvimrc", ".devcontainer.json",
                          "devcontainer.json"})
WORKSPACE_SUFFIX = ".code-workspace"
#: Folders the watch does not enter (as the secret scan: dependencies, caches, ``.git``).
WATCH_SKIP = frozenset({".git", "node_modules", ".venv", "venv", "site-packages", "__pycache__", ".tox", ".nox",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache"})
#: Most files (and bytes each) the watch keeps to put back.
WATCH_MAX_FILES = 2000
WATCH_MAX_BYTES = 1 << 20


def editor_config_paths(roots: Iterable[Path]) -> list[str]:
    """Each ``root/NAME`` of ``EDITOR_CONFIG`` (resolved, existing or not) that lies inside a root."""
    roots = [Path(os.path.realpath(r)) for r in roots]
    out: list[str] = []
    for root in roots:
        for name in EDITOR_CONFIG:
            path = Path(os.path.realpath(root / name))
            if any(path == r or r in path.parents for r in roots) and str(path) not in out:
                out.append(str(path))
    return out


def is_config_name(parts: Iterable[str]) -> bool:
    """Whether a path relative to a root (its ``parts``) is editor configuration at any depth: in a
    ``CONFIG_FOLDERS`` folder, or named like ``CONFIG_FILES`` or ``*.code-workspace``."""
    parts = list(parts)
    if not parts:
        return False
    name = parts[-1]
    return (any(p in CONFIG_FOLDERS for p in parts[:-1]) or name in CONFIG_FOLDERS or name in CONFIG_FILES
            or name.endswith(WORKSPACE_SUFFIX))


def editor_config_of(resolved: Path, lexical: Path, roots: Iterable[Path]) -> str | None:
    """The editor configuration (a ``root/NAME`` of ``EDITOR_CONFIG``, or a sub-folder's one) that
    ``resolved`` or ``lexical`` is or lies in, else None."""
    roots = list(roots)
    for root in roots:
        for p in (resolved, lexical):
            for base in {Path(os.path.realpath(root)), Path(os.path.abspath(root))}:
                if base in p.parents and is_config_name(p.relative_to(base).parts):
                    return str(p)
    for root in roots:
        for name in EDITOR_CONFIG:
            for base in {Path(os.path.realpath(root / name)), Path(os.path.abspath(root)) / name}:
                for p in (resolved, lexical):
                    if p == base or base in p.parents:
                        return str(Path(root) / name)
    return None


class Placeholders:
    """Empty read-only placeholder folders for the ``EDITOR_CONFIG`` paths that do not exist yet,
    shared (counted) by the confined commands running at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def acquire(self, paths: Iterable[str]) -> list[str]:
        """Makes each missing path of ``paths`` an empty folder (mode 0o755) and holds every one of
        ``paths`` that is a placeholder of ours; returns the held ones (give them to ``release``).
        Raises ``OSError`` when a placeholder cannot be made (the command must then not run)."""
        held: list[str] = []
        with self._lock:
            try:
                for path in paths:
                    if path in self._held:
                        self._held[path] += 1
                        held.append(path)
                        continue
                    if os.path.lexists(path):
                        continue
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    os.mkdir(path, 0o755)
                    self._held[path] = 1
                    held.append(path)
            except OSError:
                self._release_locked(held)
                raise
        return held

    def release(self, held: Iterable[str]) -> None:
        with self._lock:
            self._release_locked(list(held))

    def _release_locked(self, held: list[str]) -> None:
        for path in held:
            left = self._held.get(path, 0) - 1
            if left > 0:
                self._held[path] = left
                continue
            self._held.pop(path, None)
            try:
                os.rmdir(path)  # only if still empty: what the user put there stays
            except OSError:
                pass


#: The server's one set (every launcher of the process shares it: two sessions on one root).
PLACEHOLDERS = Placeholders()


class ConfigWatch:
    """Editor configuration below the roots that a read-only mount cannot hold (sub-folders' and
    ``*.code-workspace``): ``snapshot()`` before a confined command, ``restore()`` after it puts
    back what the command created, changed or removed there and returns those paths (relative to
    their root). Root-level ``EDITOR_CONFIG`` names are left to the mounts."""

    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots = [os.path.realpath(r) for r in roots]
        self.before: dict[str, tuple[bytes, int] | None] = {}
        self.complete = True

    def _scan(self) -> dict[str, tuple[bytes, int] | None]:
        found: dict[str, tuple[bytes, int] | None] = {}
        for root in self.roots:
            for folder, dirs, files in os.walk(root):
                dirs[:] = [d for d in dirs if d not in WATCH_SKIP and not os.path.islink(os.path.join(folder, d))]
                rel = os.path.relpath(folder, root)
                parts = [] if rel == "." else rel.split(os.sep)
                for name in files:
                    full = os.path.join(folder, name)
                    if not parts and name in EDITOR_CONFIG:
                        continue  # mounted read-only
                    if parts and parts[0] in EDITOR_CONFIG:
                        continue  # inside a mounted root-level folder
                    if not is_config_name([*parts, name]):
                        continue
                    if len(found) >= WATCH_MAX_FILES:
                        self.complete = False
                        return found
                    try:
                        st = os.lstat(full)
                        if os.path.islink(full) or st.st_size > WATCH_MAX_BYTES:
                            found[full] = None  # known, not kept: a link or a big file is removed if new
                            continue
                        with open(full, "rb") as fh:
                            found[full] = (fh.read(), st.st_mode & 0o7777)
                    except OSError:
                        continue
        return found

    def snapshot(self) -> None:
        self.before = self._scan()

    def restore(self) -> list[str]:
        """Put back what changed since ``snapshot``; the paths put back."""
        after = self._scan()
        changed: list[str] = []
        for path, now in after.items():
            was = self.before.get(path, "missing")
            if was == "missing":
                try:
                    os.unlink(path)
                    changed.append(path)
                except OSError:
                    pass
            elif was is not None and now != was and _put_back(path, was):
                changed.append(path)
        for path, was in self.before.items():
            if path not in after and was is not None and _put_back(path, was):
                changed.append(path)
        return sorted(changed)


def _put_back(path: str, was: tuple[bytes, int]) -> bool:
    data, mode = was
    try:
        if os.path.islink(path):
            os.unlink(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(path, mode)
        return True
    except OSError:
        return False
