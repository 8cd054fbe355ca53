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
import stat
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Entries of a workspace root that editors execute or obey (see the module docstring); Vim's rc
#: files (sourced with 'exrc'), Helix's ``.helix/`` (``languages.toml`` names language servers) and
#: dev containers (``initializeCommand`` runs on the host) too (issue 32 §4).
EDITOR_CONFIG = (".vscode", ".idea", ".zed", ".nvim.lua", ".nvimrc", ".exrc", ".vimrc", "_vimrc", ".gvimrc",
                 ".helix", ".devcontainer", ".devcontainer.json")
#: Folders an editor obeys wherever they are (a sub-folder opened as a workspace, a multi-root one);
#: AI editors' project folders too (``.cursor/mcp.json`` starts MCP servers, ``.claude/settings.json``
#: runs hooks) — these, like the names below that ``EDITOR_CONFIG`` lacks, are held at the root by
#: the watch (put back, then asked), not by a mount.
CONFIG_FOLDERS = frozenset({".vscode", ".idea", ".zed", ".helix", ".devcontainer", ".cursor", ".claude",
                            ".windsurf"})
#: File names an editor obeys wherever they are (Emacs's ``.dir-locals.el`` can set a
#: ``compile-command``; ``.mcp.json`` names MCP servers to start); and ``WORKSPACE_SUFFIXES``.
CONFIG_FILES = frozenset({".nvim.lua", ".nvimrc", ".exrc", ".vimrc", "_vimrc", ".gvimrc", ".devcontainer.json",
                          "devcontainer.json", ".dir-locals.el", ".dir-locals-2.el", ".mcp.json"})
#: Project files an editor opens as a workspace (VS Code's tasks and settings, Sublime's build systems).
WORKSPACE_SUFFIXES = (".code-workspace", ".sublime-project")
#: Folders the watch does not enter (as the secret scan: dependencies, caches, ``.git``).
WATCH_SKIP = frozenset({".git", "node_modules", ".venv", "venv", "site-packages", "__pycache__", ".tox", ".nox",
                        ".mypy_cache", ".pytest_cache", ".ruff_cache"})
#: Most bytes of one file the watch keeps to put back.
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
    ``CONFIG_FOLDERS`` folder, or named like ``CONFIG_FILES`` or ``WORKSPACE_SUFFIXES``."""
    parts = [p.casefold() for p in parts]  # any case, as every protected path (a case-folding filesystem)
    if not parts:
        return False
    name = parts[-1]
    return (any(p in CONFIG_FOLDERS for p in parts[:-1]) or name in CONFIG_FOLDERS or name in CONFIG_FILES
            or name.endswith(WORKSPACE_SUFFIXES))


def editor_config_of(resolved: Path, lexical: Path, roots: Iterable[Path]) -> str | None:
    """The editor configuration (a ``root/NAME`` of ``EDITOR_CONFIG``, or a sub-folder's one) that
    ``resolved`` or ``lexical`` is or lies in, else None."""
    roots = list(roots)
    for root in roots:
        for p in (resolved, lexical):
            for base in {os.path.realpath(root), os.path.abspath(root)}:
                rel = _below(str(p), base)
                if rel is not None and is_config_name(rel.split("/")):
                    return str(p)
    for root in roots:
        for name in EDITOR_CONFIG:
            for base in {os.path.realpath(root / name), os.path.join(os.path.abspath(root), name)}:
                for p in (resolved, lexical):
                    if str(p).casefold() == base.casefold() or _below(str(p), base) is not None:
                        return str(Path(root) / name)
    return None


def _below(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder`` when strictly below it, compared in any case (a case-folding
    filesystem opens ``.VSCode/tasks.json`` as ``.vscode/tasks.json``), else ``None``."""
    base = folder.rstrip("/") + "/"
    return path[len(base):] if len(path) > len(base) and path[:len(base)].casefold() == base.casefold() else None


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


#: When the user's home folder lies in a root (a workspace opened on ~, or above it): what the user's
#: shell, git, desktop session and editors run or read from it on their own — watched like editor
#: configuration (put back after a confined command, then asked).
HOME_STARTUP_FILES = (".bashrc", ".bash_profile", ".bash_login", ".bash_logout", ".profile", ".zshrc", ".zshenv",
                      ".zprofile", ".zlogin", ".zlogout", ".xprofile", ".xsessionrc", ".xinitrc", ".pam_environment",
                      ".gitconfig", ".config/git/config", ".config/fish/config.fish", ".vimrc", ".gvimrc",
                      ".config/nvim/init.lua", ".config/nvim/init.vim", ".emacs", ".emacs.d/init.el",
                      ".config/emacs/init.el", ".inputrc", ".tmux.conf", ".config/tmux/tmux.conf")
HOME_STARTUP_FOLDERS = (".config/autostart", ".config/systemd/user", ".config/environment.d", ".local/bin", "bin")

MISSING = "missing"
"""A path that did not exist (as ``Change.before`` / ``Change.after``)."""

#: Most bytes of editor configuration kept in all, to put back (beyond: known by identity only).
WATCH_MAX_TOTAL = 64 << 20
#: A folder or file whose ctime is this close to when it was looked at is looked at again next time
#: (the kernel's timestamps are coarse: a change within the same tick would keep the identity).
RACY_NS = 50_000_000

State = "tuple[bytes, int] | tuple[str, str] | tuple[str, tuple[int, ...]] | str"
"""What a path held: ``(bytes, mode)`` (a regular file, kept); ``("link", target)``; ``("unkept",
identity)`` (a special file, or a file over ``WATCH_MAX_BYTES`` or the total: known by its device,
inode, size, ctime, mtime and mode only); ``MISSING``."""


def kept(state: Any) -> bool:
    """Whether ``state`` can be made again (``MISSING``, a kept file or a link)."""
    return state == MISSING or (isinstance(state, tuple) and state[0] != "unkept")


@dataclass(frozen=True)
class Change:
    """One editor-configuration path a command created, changed or removed: ``before`` and ``after``
    (``State``); ``put_back``: it is as ``before`` again (a path not kept before cannot be)."""

    path: str
    before: Any
    after: Any
    put_back: bool
    saved: str | None = None
    """Where the ``before`` bytes were saved when they could not be put back (``rescue``)."""

    @property
    def keepable(self) -> bool:
        """Whether the command's version can be restored on the user's word (it was kept)."""
        return self.put_back and kept(self.after)


class ConfigIndex:
    """The editor configuration below the roots that a read-only mount cannot hold (sub-folders'
    and ``*.code-workspace``), found incrementally: the folder tree is listed once, then a folder is
    listed again only when its identity (inode, ctime — which no program can set back — and mtime)
    changed, and a file read again only when its own did; a look costs one ``lstat`` per folder and
    per configuration file. Shared by the confined commands of one session (a lock).
    ``listed``: folders listed so far; ``read``: files read so far."""

    def __init__(self, roots: Iterable[Path | str], home: str | None = None) -> None:
        self.roots = [os.path.realpath(r) for r in roots]
        home = os.path.realpath(home or os.path.expanduser("~"))
        self.home_files: list[str] = []
        self.home_folders: list[str] = []
        if any(home == r or home.startswith(r.rstrip("/") + "/") for r in self.roots):
            self.home_files = [os.path.join(home, n) for n in HOME_STARTUP_FILES]
            self.home_folders = [os.path.join(home, n) for n in HOME_STARTUP_FOLDERS]
        self._lock = threading.Lock()
        self._dirs: dict[str, tuple[tuple[int, ...], bool, list[str], list[str], bool]] = {}
        self._files: dict[str, tuple[tuple[int, ...], bool, Any]] = {}
        self.listed = 0
        self.read = 0
        self.nested_gits: list[str] = []
        """The ``.git`` entries (folders or link files) of repositories nested below the roots, as
        of the last look (git runs their hooks and obeys their config as it does the root's)."""

    def look(self) -> dict[str, Any]:
        """Every such path now, with its ``State``."""
        with self._lock:
            now = time.time_ns()
            dirs: dict[str, tuple[tuple[int, ...], bool, list[str], list[str], bool]] = {}
            paths: list[str] = []
            gits: list[str] = []
            stack = [(r, r) for r in self.roots]
            while stack:
                folder, root = stack.pop()
                if folder in dirs:
                    continue
                try:
                    st = os.lstat(folder)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    continue
                ident = (st.st_dev, st.st_ino, st.st_ctime_ns, st.st_mtime_ns)
                known = self._dirs.get(folder)
                if known is not None and known[0] == ident and known[1]:
                    subdirs, names, git = known[2], known[3], known[4]
                else:
                    subdirs, names, git = self._list(folder, root)
                dirs[folder] = (ident, now - st.st_ctime_ns > RACY_NS, subdirs, names, git)
                stack.extend((os.path.join(folder, d), root) for d in subdirs)
                paths.extend(os.path.join(folder, n) for n in names)
                if git:
                    gits.append(os.path.join(folder, ".git"))
            self._dirs = dirs
            self.nested_gits = sorted(gits)
            paths += [p for p in self.home_files if os.path.lexists(p)]  # the home folder is in a root
            for folder in self.home_folders:
                try:
                    paths += [e.path for e in os.scandir(folder) if not e.is_dir(follow_symlinks=False)][:1000]
                except OSError:
                    pass
            paths = list(dict.fromkeys(paths))
            files: dict[str, tuple[tuple[int, ...], bool, Any]] = {}
            total = 0
            for path in paths:
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                ident = (st.st_dev, st.st_ino, st.st_size, st.st_ctime_ns, st.st_mtime_ns, st.st_mode)
                kept_file = self._files.get(path)
                if kept_file is not None and kept_file[0] == ident and kept_file[1] and \
                        (kept_file[2][0] in ("link", "unkept") or total + len(kept_file[2][0]) <= WATCH_MAX_TOTAL):
                    state = kept_file[2]
                else:
                    state = self._read(path, st, ident, WATCH_MAX_TOTAL - total)
                if isinstance(state[0], bytes):
                    total += len(state[0])
                files[path] = (ident, now - st.st_ctime_ns > RACY_NS, state)
            self._files = files
            return {p: v[2] for p, v in files.items()}

    def _list(self, folder: str, root: str) -> tuple[list[str], list[str], bool]:
        self.listed += 1
        rel = os.path.relpath(folder, root)
        parts = [] if rel == "." else rel.split(os.sep)
        subdirs: list[str] = []
        names: list[str] = []
        git = False
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    if not parts and entry.name in EDITOR_CONFIG:
                        continue  # mounted read-only
                    if parts and entry.name == ".git":
                        git = True  # a nested repository (the root's own .git is mounted read-only)
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                    except OSError:
                        continue
                    if is_dir:
                        if entry.name not in WATCH_SKIP:
                            subdirs.append(entry.name)
                    elif is_config_name([*parts, entry.name]):
                        names.append(entry.name)
        except OSError:
            pass
        return subdirs, names, git

    def _read(self, path: str, st: os.stat_result, ident: tuple[int, ...], room: int) -> Any:
        """A regular file's ``(bytes, mode)`` (opened without following a link or blocking on a
        FIFO), a link's ``("link", target)``, else ``("unkept", ident)``."""
        unkept = ("unkept", ident)
        if stat.S_ISLNK(st.st_mode):
            try:
                return "link", os.readlink(path)
            except OSError:
                return unkept
        if not stat.S_ISREG(st.st_mode) or st.st_size > min(WATCH_MAX_BYTES, room):
            return unkept
        self.read += 1
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
        except OSError:
            return unkept
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return unkept
            chunks, size = [], 0
            while size <= WATCH_MAX_BYTES:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            if size > min(WATCH_MAX_BYTES, room):
                return unkept
            return b"".join(chunks), st.st_mode & 0o7777
        except OSError:
            return unkept
        finally:
            os.close(fd)


class ConfigWatch:
    """One confined command's look at editor configuration (``ConfigIndex``): ``snapshot()``
    before it, ``restore()`` after it puts back what it created, changed or removed there and
    returns those paths; ``changes`` holds what each was and became. Root-level ``EDITOR_CONFIG``
    names are left to the mounts."""

    def __init__(self, index: "ConfigIndex | Iterable[Path | str]", rescue: Path | None = None) -> None:
        self.index = index if isinstance(index, ConfigIndex) else ConfigIndex(index)
        self.rescue = rescue
        """A folder the commands cannot see (the session's): a file's bytes that could not be put
        back (a folder on its way swapped for a link) are saved there, never lost."""
        self.before: dict[str, Any] = {}
        self.changes: list[Change] = []

    def snapshot(self) -> None:
        self.before = self.index.look()

    def restore(self) -> list[str]:
        """Put back what changed since ``snapshot``; the paths that changed (put back or not)."""
        after = self.index.look()
        changes: list[Change] = []
        for path in sorted(set(after) | set(self.before)):
            was, now = self.before.get(path, MISSING), after.get(path, MISSING)
            if was == now:
                continue
            done = _set(path, was, self.index.roots)
            saved = None if done else self._save(path, was)
            changes.append(Change(path, was, now, done, saved))
        self.changes = changes
        return [c.path for c in changes]

    def _save(self, path: str, state: Any) -> str | None:
        if self.rescue is None or not (isinstance(state, tuple) and isinstance(state[0], bytes)):
            return None
        root = next((r for r in self.index.roots if path.startswith(r.rstrip("/") + "/")), "/")
        target = self.rescue / time.strftime("%Y%m%d-%H%M%S") / os.path.relpath(path, root)
        try:
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            target.write_bytes(state[0])
            return str(target)
        except OSError:
            return None

    def reapply(self, changes: Iterable[Change]) -> list[str]:
        """Make each keepable change again (the user kept the command's version); the paths done."""
        done = []
        for change in changes:
            if change.keepable and _set(change.path, change.after, self.index.roots):
                done.append(change.path)
        return done


def _set(path: str, state: Any, roots: list[str]) -> bool:
    """Make ``path`` hold ``state`` (``MISSING``: remove it), every folder on the way opened beneath
    its root without following a link (a folder the command swapped for a link is not followed out
    of the tree); an ``unkept`` state cannot be set."""
    if not kept(state):
        return False
    root = next((r for r in roots if path.startswith(r.rstrip("/") + "/")), None)
    if root is None:
        return False
    parts = os.path.relpath(path, root).split(os.sep)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(root, flags)
    except OSError:
        return False
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                if state == MISSING:
                    return True
                os.mkdir(part, 0o755, dir_fd=fd)
                nxt = os.open(part, flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        name = parts[-1]
        try:
            st = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            st = None
        if st is not None and (state == MISSING or not stat.S_ISREG(st.st_mode) or st.st_nlink > 1):
            if stat.S_ISDIR(st.st_mode):
                return False  # a folder now stands there: never removed wholesale
            os.unlink(name, dir_fd=fd)
        if state == MISSING:
            return True
        if state[0] == "link":
            if st is not None and stat.S_ISREG(st.st_mode):
                os.unlink(name, dir_fd=fd)
            os.symlink(state[1], name, dir_fd=fd)
            return True
        data, mode = state
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=fd)
        with os.fdopen(out, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
