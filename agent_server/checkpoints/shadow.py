"""A shadow git repository: snapshots of a workspace's working tree, kept outside it.

Role: ``ShadowRepo(git_dir, root, index=…).snapshot()`` records the working tree as a git tree object
in a repository of its own under the state folder (no user or system git config; raw bytes: no
end-of-line conversion or filter of the workspace's ``.gitattributes``), leaving out ``.git``, what
the workspace's ``.gitignore`` files ignore, every secret file and every file over the size limit
(those are named by size, mtime and inode instead), with the permission bits a git tree cannot keep
(learnt by one walk at a session's first snapshot, then kept up from what git lists as changed);
``changes(before, after)`` lists the files that differ between two snapshots, in bytes or mode, their
bytes put into a ``BlobStore``. Used around each shell call. Works for a plain folder as well (the
caller keeps it within a budget).

Must never: write the user's ``.git`` (its objects are only borrowed, read-only), let a secret file's
bytes or a big file into the shadow objects (secret paths and big files are checked for every path
that changed and kept out of the index), or do per-file work over the whole tree in Python after a
session's first snapshot.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from agent_server.checkpoints.blobs import LINK_MODE, BlobStore, FileState

_GIT_MODES = {"100644": 0o644, "100755": 0o755, "120000": LINK_MODE}


def exclude_text(name_patterns: tuple[str, ...]) -> str:
    """``info/exclude`` of a shadow repository: ``.git`` and the secret name globs, each in any case
    (``.ENV``, ``ID_RSA``, ``.Git``: git matches its exclude patterns case-sensitively unless
    ``core.ignorecase``, yet a case-folding filesystem opens ``.ENV`` as ``.env``, and policy judges
    names in any case)."""
    from agent_server.tools._scope import any_case_glob  # deferred: the tools' search module

    return "".join(f"{line}\n" for line in ("/" + any_case_glob(".git"), *map(any_case_glob, name_patterns)))


class ShadowError(RuntimeError):
    """git failed or is missing; ``str()`` says which command and why."""


@dataclass(frozen=True)
class ShadowChange:
    """One file that differs between two snapshots: ``path`` (absolute), ``before`` / ``after``
    (``None``: absent, or not a regular file)."""

    path: Path
    before: FileState | None
    after: FileState | None


#: ``info/attributes`` of every shadow repository: raw bytes in, raw bytes out (no end-of-line
#: conversion, no filter, no working-tree encoding), whatever the workspace's ``.gitattributes`` say.
RAW_ATTRIBUTES = "* -text -eol -filter -ident -working-tree-encoding\n"
#: git compares an index entry's ctime by the second (unless built with ``USE_NSEC``; Debian's is
#: not): a ``chmod`` in the second its file was recorded in is no change to it. A file recorded
#: (or an index written) less than this long before a snapshot began is stat'ed again by it.
RACY_NS = 2_000_000_000
#: Untracked files walked inside nested repositories per snapshot, at most.
NESTED_BUDGET = 5000


@dataclass
class Snapshot:
    """One snapshot: ``tree`` (the shadow tree's id); ``big`` (files over the size limit, left out
    of the tree: relative path → ``(size, mtime_ns, inode, mode)``); ``nested`` (nested repositories
    whose untracked files could not all be walked: relative folder names)."""

    tree: str
    big: dict[str, tuple[int, int, int, int]] = field(default_factory=dict)
    nested: list[str] = field(default_factory=list)
    #: regular files whose permission bits git's tree cannot tell (neither the umask's plain nor
    #: executable mode): relative path → ``mode & 0o7777``; every other file has the plain or the
    #: executable mode of ``usual`` as its tree entry says; ``None``: not known (the walk failed).
    modes: dict[str, int] | None = field(default_factory=dict)
    usual: tuple[int, int] = (0o644, 0o755)


class ShadowRepo:
    """Snapshots of ``root`` in the repository ``git_dir``, through the index file ``index`` (one per
    session: sessions on one folder never share an index).

    ``is_secret(path)`` says whether an absolute path is a secret file (e.g. ``SecretMatcher.match``);
    ``name_patterns`` are secret name globs (no ``/``) written to ``info/exclude``; ``max_file_bytes``:
    larger files are recorded by size, mtime and inode, never copied; ``memo``: kept between the
    snapshots of one session (the last tree written, by the index file's identity).

    A snapshot costs one walk of the tree by git (``diff-files`` against the index's stat cache,
    ``ls-files --others`` with the untracked cache) plus work for the paths that changed since the
    last snapshot only: the
    secret patterns and the size limit are checked for those paths, and only they are hashed
    (``update-index --stdin``). When the workspace is a git repository, its object folder is borrowed
    read-only (``objects/info/alternates``): files it already holds are not copied again.
    """

    def __init__(self, git_dir: Path, root: Path, *, index: Path | None = None,
                 is_secret: Callable[[Path], object] = lambda p: None, name_patterns: tuple[str, ...] = (),
                 max_file_bytes: int | None = None, memo: dict | None = None, git: str = "git") -> None:
        self.git_dir = Path(git_dir)
        self.root = Path(root)
        self.index = Path(index) if index is not None else self.git_dir / "index"
        self.is_secret = is_secret
        self.name_patterns = name_patterns
        self.max_file_bytes = max_file_bytes
        self.memo = memo if memo is not None else {}
        self.git = git

    @staticmethod
    def is_git_workspace(root: Path) -> bool:
        """Whether ``root`` is (inside) a git working tree: a ``.git`` in it or above it."""
        here = Path(root).resolve()
        return any((folder / ".git").exists() for folder in (here, *here.parents))

    def _run(self, *args: str, input: bytes | None = None, bound: bool = True, git_dir: bool = False) -> bytes:
        try:
            proc = subprocess.run([self.git, *args], cwd=self.root, env=self._env(bound, git_dir), input=input,
                                  capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ShadowError(f"git {args[0]}: {exc}") from None
        if proc.returncode != 0:
            raise ShadowError(f"git {' '.join(args[:2])}: {proc.stderr.decode(errors='replace').strip()[:500]}")
        return proc.stdout

    def _run_both(self, first: tuple[str, ...], second: tuple[str, ...]) -> tuple[bytes, bytes]:
        """Two read-only git commands at once (each reads the index; neither writes it)."""
        try:
            started = subprocess.Popen([self.git, *second], cwd=self.root, env=self._env(True, False),
                                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as exc:
            raise ShadowError(f"git {second[0]}: {exc}") from None
        with started:
            try:
                out = self._run(*first)
            finally:
                try:
                    later, err = started.communicate(timeout=120)
                except subprocess.TimeoutExpired:
                    started.kill()
                    raise ShadowError(f"git {second[0]}: timed out") from None
        if started.returncode != 0:
            raise ShadowError(f"git {' '.join(second[:2])}: {err.decode(errors='replace').strip()[:500]}")
        return out, later

    def _env(self, bound: bool, git_dir: bool) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": str(self.git_dir),
               "GIT_AUTHOR_NAME": "agent-server", "GIT_AUTHOR_EMAIL": "agent-server@localhost",
               "GIT_COMMITTER_NAME": "agent-server", "GIT_COMMITTER_EMAIL": "agent-server@localhost",
               "GIT_LITERAL_PATHSPECS": "1", "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
        if bound:  # the shadow repository with the workspace as its work tree
            env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.root), GIT_INDEX_FILE=str(self.index))
        elif git_dir:  # the shadow repository alone
            env.update(GIT_DIR=str(self.git_dir))
        return env

    def _ensure(self) -> None:
        if not (self.git_dir / "HEAD").exists():
            self.git_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            self._run("init", "--quiet", "--bare", str(self.git_dir), bound=False)
            for key, value in (("core.bare", "false"), ("core.autocrlf", "false"), ("core.symlinks", "true"),
                               ("core.untrackedCache", "true"), ("core.fsmonitor", "false"), ("gc.auto", "0")):
                self._run("config", key, value)
        info = self.git_dir / "info"
        info.mkdir(mode=0o700, parents=True, exist_ok=True)
        _write_if_changed(info / "attributes", RAW_ATTRIBUTES)
        _write_if_changed(info / "exclude", exclude_text(self.name_patterns))
        objects = self._workspace_objects()
        if objects is not None:
            _write_if_changed(self.git_dir / "objects" / "info" / "alternates", f"{objects}\n")
        self.index.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if objects is not None and not self.index.exists():
            self._seed(Path(objects).parent / "index")

    def _seed(self, user_index: Path) -> None:
        """Start this session's index as a copy of the workspace's own (read, never written): its
        stat cache makes the first snapshot look at what differs from it only, not at every file."""
        try:
            with open(user_index, "rb") as fh:  # the bytes and the mtime of one version of it
                written, raw = os.fstat(fh.fileno()), fh.read()
        except OSError:
            return
        if raw[:4] != b"DIRC":
            return
        tmp = self.index.with_name(f".{self.index.name}.{os.getpid()}.tmp")
        tmp.write_bytes(raw)
        os.chmod(tmp, 0o600)
        # its own mtime kept: git tells racily clean entries by it, and a snapshot whether an entry's
        # ctime may hide a chmod (``RACY_NS``)
        os.utime(tmp, ns=(written.st_atime_ns, written.st_mtime_ns))
        os.replace(tmp, self.index)
        try:  # a split or sparse index, or one this git cannot read: start empty instead
            staged = self._run("ls-files", "--stage", "-z").split(b"\0")
            # submodules: out of the index, so that their files are walked like a nested repository's
            gitlinks = [entry.split(b"\t", 1)[1] for entry in staged if entry.startswith(b"160000 ")]
            if gitlinks:
                self._run("update-index", "--force-remove", "-z", "--stdin", input=b"\0".join(gitlinks) + b"\0")
        except (ShadowError, IndexError):
            self.index.unlink(missing_ok=True)

    def _workspace_objects(self) -> str | None:
        """The object folder of the workspace's own repository (borrowed read-only), if it has one."""
        here = self.root.resolve()
        for folder in (here, *here.parents):
            objects = folder / ".git" / "objects"
            if objects.is_dir():
                return str(objects)
            if (folder / ".git").exists():
                return None
        return None

    def snapshot(self, *, fresh: bool = False) -> Snapshot:
        """Record the working tree now. Raises ``ShadowError``."""
        self._ensure()
        started = time.time_ns()
        index_before = _lstat(self.index)
        # the indexed files whose stat differs from the index's (``ls-files --modified`` would compare
        # the bytes of those and leave out a chmod alone: only its ctime changed), then the others
        dirty, others = self._run_both(("diff-files", "--name-only", "-z"), ("ls-files", "-z", "--others", "--exclude-standard"))
        listed = [b"C " + name for name in dirty.split(b"\0") if name] + [b"? " + name for name in others.split(b"\0")]
        changed: list[bytes] = []
        drop: list[bytes] = []
        big: dict[str, tuple[int, int, int, int]] = {}
        nested: list[str] = []
        walked = 0
        seen: set[bytes] = set()
        tracked: set[bytes] = set()
        for tagged in listed:
            name = tagged[2:]
            if not name or name in seen:
                continue
            seen.add(name)
            if tagged[:1] != b"?":
                tracked.add(name)
            if name.endswith(b"/"):  # a nested repository: git lists its folder, not its files
                found, complete = _walk_nested(self.root / os.fsdecode(name), NESTED_BUDGET - walked)
                walked += len(found)
                if not complete:
                    nested.append(os.fsdecode(name))
                names = [name + os.fsencode(f) for f in found]
            else:
                names = [name]
            for entry in names:
                path = self.root / os.fsdecode(entry)
                if self.is_secret(path):
                    if entry in tracked:
                        drop.append(entry)
                    continue
                st = _lstat(path)
                if st is not None and self.max_file_bytes is not None and stat.S_ISREG(st.st_mode) \
                        and st.st_size > self.max_file_bytes:
                    big[os.fsdecode(entry)] = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode & 0o7777)
                    if entry in tracked:
                        drop.append(entry)
                    continue
                changed.append(entry)
        if drop:  # left out of the tree
            self._run("update-index", "--force-remove", "-z", "--stdin", input=b"\0".join(drop) + b"\0")
        if changed:
            self._run("update-index", "--add", "--remove", "-z", "--stdin", input=b"\0".join(changed) + b"\0")
        usual = _usual_modes()
        modes = self._modes(usual, started, index_before, [os.fsdecode(e) for e in changed])
        known = self.memo.get("tree")
        if known is not None and known[0] == _signature(self.index):  # the index did not change: same tree
            self._settle()
            return Snapshot(known[1], big, nested, modes, usual)
        try:
            tree = self._run("write-tree").decode().strip()
        except ShadowError:  # an object the index names is gone (the user's gc): start the index afresh
            if fresh:
                raise
            self.index.unlink(missing_ok=True)
            self.memo.pop("perm", None)
            return self.snapshot(fresh=True)
        self.memo["tree"] = (_signature(self.index), tree)
        self._settle()
        return Snapshot(tree, big, nested, modes, usual)

    def _modes(self, usual: tuple[int, int], started: int, index_before: os.stat_result | None,
               looked_at: list[str]) -> dict[str, int] | None:
        """The regular files whose permission bits are neither of ``usual`` (git's tree keeps only the
        executable bit). The session's first snapshot walks the tree (``_walk_modes``); a later one
        stats only the paths git listed as changed (``looked_at``: a ``chmod`` changes the ctime git's
        index compares) and those recorded less than ``RACY_NS`` before it. ``None``: not known (the
        walk failed): a guess could loosen a private file on /undo."""
        key = (str(self.root), str(self.index), usual)
        perm = self.memo.get("perm")
        if perm is None or perm["key"] != key or perm["signature"] != _identity(index_before) \
                or started < perm["walk_until"]:
            walked = self._walk_modes(usual)
            if walked is None:
                self.memo.pop("perm", None)
                return None
            # entries of an index written less than RACY_NS ago may hide a chmod in their second
            until = (index_before.st_mtime_ns if index_before is not None else 0) + RACY_NS
            perm = {"key": key, "modes": walked, "recent": {}, "walk_until": until, "signature": None}
            self.memo["perm"] = perm
        else:
            modes = perm["modes"]
            for name in {*looked_at, *perm["recent"]}:
                st = _lstat(self.root / name)
                bits = st.st_mode & 0o7777 if st is not None and stat.S_ISREG(st.st_mode) else None
                if bits is None or bits in usual:
                    modes.pop(name, None)
                else:
                    modes[name] = bits
        now = time.time_ns()  # after the stats: a chmod later than them in this second is seen next time
        perm["recent"] = {name: at for name, at in perm["recent"].items() if started < at + RACY_NS}
        perm["recent"].update(dict.fromkeys(looked_at, now))
        return dict(perm["modes"])

    def _settle(self) -> None:
        """Remember the index as this snapshot left it: written by anyone else, the modes are walked again."""
        perm = self.memo.get("perm")
        if perm is not None:
            perm["signature"] = _signature(self.index)

    def _walk_modes(self, usual: tuple[int, int]) -> dict[str, int] | None:
        """Every regular file's permission bits that are neither of ``usual``, by one walk in Python
        (``find -printf`` is not everywhere: busybox and macOS have none), the folders git ignores
        (a virtualenv, node_modules: never in a snapshot) and every ``.git`` left out. ``None`` when a
        folder could not be read."""
        ignored = {os.fsdecode(entry[:-1]) for entry in self._run(
            "ls-files", "-z", "--others", "--ignored", "--exclude-standard", "--directory").split(b"\0")
            if entry.endswith(b"/")}
        modes: dict[str, int] = {}
        folders = [""]
        try:
            while folders:
                rel = folders.pop()
                with os.scandir(self.root / rel if rel else self.root) as entries:
                    for entry in entries:
                        name = rel + entry.name
                        if entry.is_dir(follow_symlinks=False):
                            if entry.name != ".git" and name not in ignored:
                                folders.append(name + "/")
                            continue
                        mode = entry.stat(follow_symlinks=False).st_mode
                        if stat.S_ISREG(mode) and mode & 0o7777 not in usual:
                            modes[name] = mode & 0o7777
        except OSError:
            return None
        return modes

    def size_bytes(self) -> int:
        """The repository's objects on disk (loose and packed), in bytes. Raises ``ShadowError``."""
        if not (self.git_dir / "HEAD").exists():
            return 0
        fields = dict(line.split(": ", 1) for line in self._run("count-objects", "-v", bound=False,
                                                                  git_dir=True).decode().splitlines() if ": " in line)
        return (int(fields.get("size", 0)) + int(fields.get("size-pack", 0)) + int(fields.get("size-garbage", 0))) * 1024

    def prune(self, indexes: list[Path], expire: str = "1.hour.ago") -> None:
        """Keep only the objects some live session's index needs (``indexes``: every session's index
        file; one that belongs to another shadow repository is skipped), pack them, and remove the
        rest — loose objects younger than ``expire`` stay (a snapshot may be running in another
        process). Raises ``ShadowError``."""
        if not (self.git_dir / "HEAD").exists():
            return
        lines = [f"delete {ref}" for ref in self._run("for-each-ref", "--format=%(refname)", "refs/keep/",
                                                        bound=False, git_dir=True).decode().split()]
        copy = self.git_dir / f"prune-index.{os.getpid()}"
        for n, index in enumerate(indexes):
            try:  # a copy: write-tree locks the index it reads, and the live session owns its own
                copy.write_bytes(index.read_bytes())
                tree = ShadowRepo(self.git_dir, self.root, index=copy, git=self.git)._run("write-tree").decode().strip()
            except (OSError, ShadowError):
                continue
            finally:
                copy.unlink(missing_ok=True)
            lines.append(f"update refs/keep/{n} {tree}")
        self._run("update-ref", "--stdin", input="".join(f"{line}\n" for line in lines).encode(), bound=False,
                  git_dir=True)
        self._run("repack", "-a", "-d", "-l", "-q", bound=False, git_dir=True)
        self._run("prune", f"--expire={expire}", bound=False, git_dir=True)

    def changes(self, before: str | Snapshot, after: str | Snapshot, blobs: BlobStore) -> list[ShadowChange]:
        """Files that differ between snapshots (or trees) ``before`` and ``after`` — in bytes, or in
        permission bits alone (snapshots only: a tree keeps just the executable bit) — regular files,
        and symbolic links as their target text with ``LINK_MODE``, their bytes kept in ``blobs``.
        Raises ``ShadowError``."""
        old_tree, new_tree = (s.tree if isinstance(s, Snapshot) else s for s in (before, after))
        modes = (before.modes, before.usual, after.modes, after.usual) \
            if isinstance(before, Snapshot) and isinstance(after, Snapshot) \
            and before.modes is not None and after.modes is not None else None
        rows: list[tuple[Path, str, str, str, str]] = []
        if old_tree != new_tree:
            out = self._run("diff-tree", "-r", "-z", "--no-renames", old_tree, new_tree).split(b"\0")
            for i in range(0, len(out) - 1, 2):
                meta, name = out[i].decode(), os.fsdecode(out[i + 1])
                if not meta.startswith(":"):
                    continue
                old_mode, new_mode, old_id, new_id, _status = meta[1:].split(" ")
                rows.append((self.root / name, old_mode, new_mode, old_id, new_id))
        if modes is not None:  # the same bytes and executable bit, other permission bits
            named = {os.path.relpath(row[0], self.root) for row in rows}
            odd = sorted(name for name in set(modes[0]) | set(modes[2])
                         if name not in named and modes[0].get(name) != modes[2].get(name))
            if odd:  # their tree entries (a few by name, else the whole tree): the ignored left out
                listed = self._run("ls-tree", "-r", "-z", "--full-tree", new_tree,
                                   *(("--", *odd) if len(odd) <= 1000 else ())).split(b"\0")
                wanted_names = set(odd)
                for entry in listed:
                    meta, _, raw_name = entry.partition(b"\t")
                    name = os.fsdecode(raw_name)
                    if name not in wanted_names:
                        continue
                    mode, kind, object_id = meta.decode().split(" ")
                    if kind == "blob" and mode in ("100644", "100755") \
                            and _bits(modes[0], modes[1], name, mode) != _bits(modes[2], modes[3], name, mode):
                        rows.append((self.root / name, mode, mode, object_id, object_id))
        rows = [row for row in rows if not self.is_secret(row[0])]
        wanted = sorted({oid for _, om, nm, o, n in rows for oid, m in ((o, om), (n, nm))
                         if m in _GIT_MODES and set(oid) != {"0"}})
        contents = self._cat(wanted)
        found: list[ShadowChange] = []
        for path, old_mode, new_mode, old_id, new_id in rows:
            if modes is not None:  # the permission bits each snapshot saw
                name = os.path.relpath(path, self.root)
                old_bits: int | None = _bits(modes[0], modes[1], name, old_mode)
                new_bits: int | None = _bits(modes[2], modes[3], name, new_mode)
            else:
                # git keeps only 644/755; the file's real permission bits are taken from the disk
                # (for the state before too, unless the call itself switched the executable bit)
                new_bits = _real_mode(path)
                old_bits = new_bits if old_mode == new_mode else None
            before_state = _state(old_mode, contents.get(old_id), blobs, old_bits)
            after_state = _state(new_mode, contents.get(new_id), blobs, new_bits)
            if before_state is None and after_state is None:
                continue
            found.append(ShadowChange(path, before_state, after_state))
        return found

    def _cat(self, ids: list[str]) -> dict[str, bytes]:
        """The bytes of the blobs ``ids``, read by one ``cat-file --batch``."""
        if not ids:
            return {}
        out = self._run("cat-file", "--batch", input="".join(f"{i}\n" for i in ids).encode())
        found: dict[str, bytes] = {}
        pos = 0
        for object_id in ids:
            end = out.index(b"\n", pos)
            header = out[pos:end].split()
            if len(header) != 3:
                raise ShadowError(f"git cat-file: {header!r}")
            size = int(header[2])
            found[object_id] = out[end + 1:end + 1 + size]
            pos = end + 1 + size + 1
        return found


def _state(mode: str, raw: bytes | None, blobs: BlobStore, real_mode: int | None) -> FileState | None:
    if mode not in _GIT_MODES or raw is None:
        return None
    if mode == "120000":
        return FileState(blobs.put(raw), LINK_MODE)
    return FileState(blobs.put(raw), _GIT_MODES[mode] if real_mode is None else real_mode)


def _bits(odd: dict[str, int], usual: tuple[int, int], name: str, git_mode: str) -> int:
    """The permission bits of the file ``name`` in a snapshot: its own (``odd``) or the usual ones
    its tree entry's executable bit names."""
    return odd.get(name, usual[1] if git_mode == "100755" else usual[0])


def _usual_modes() -> tuple[int, int]:
    """The plain and the executable mode a new file gets under this process's umask (read, never
    set: setting it to read it would race the other threads' file creations)."""
    umask = 0o022
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    umask = int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o666 & ~umask, 0o777 & ~umask


def _write_if_changed(path: Path, text: str) -> None:
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _signature(path: Path) -> tuple[int, int, int] | None:
    """What tells one version of a file from the next: inode, size, mtime (an index is replaced by
    rename on every write)."""
    return _identity(_lstat(path))


def _identity(st: os.stat_result | None) -> tuple[int, int, int] | None:
    return None if st is None else (st.st_ino, st.st_size, st.st_mtime_ns)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _walk_nested(folder: Path, budget: int) -> tuple[list[str], bool]:
    """The files under the nested repository ``folder`` (relative, ``/``-separated; its ``.git`` left
    out), at most ``budget``; whether that was all of them."""
    found: list[str] = []
    for here, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != ".git"]
        rel = os.path.relpath(here, folder)
        for name in files:
            if len(found) >= budget:
                return found, False
            found.append(name if rel == "." else f"{rel}/{name}")
    return found, True


def _real_mode(path: Path) -> int | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_mode & 0o7777 if stat.S_ISREG(st.st_mode) else None
