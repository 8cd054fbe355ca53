"""A shadow git repository: snapshots of a git workspace's working tree, kept outside it.

Role: ``ShadowRepo(git_dir, root).snapshot()`` records the working tree as a git tree object in a
repository of its own under the state folder (its own index, no user or system git config), leaving
out ``.git``, what the workspace's ``.gitignore`` files ignore, and every secret file;
``changes(before, after)`` lists the files that differ between two snapshots with their bytes put
into a ``BlobStore``. Used around each shell call, so edits the user makes in the editor during a
turn are never attributed to the agent.

Must never: read or write the user's ``.git``, or let a secret file's bytes into the shadow objects
(name patterns go to ``info/exclude``; anything that still matches is dropped from the index before
the tree is written).
"""

from __future__ import annotations

import os
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent_server.checkpoints.blobs import BlobStore, FileState

_GIT_MODES = {"100644": 0o644, "100755": 0o755}


class ShadowError(RuntimeError):
    """git failed or is missing; ``str()`` says which command and why."""


@dataclass(frozen=True)
class ShadowChange:
    """One file that differs between two snapshots: ``path`` (absolute), ``before`` / ``after``
    (``None``: absent, or not a regular file)."""

    path: Path
    before: FileState | None
    after: FileState | None


class ShadowRepo:
    """Snapshots of ``root`` in the repository ``git_dir``.

    ``is_secret(path)`` says whether an absolute path is a secret file (e.g. ``SecretMatcher.match``);
    ``name_patterns`` are secret name globs (no ``/``) written to ``info/exclude``.
    """

    def __init__(self, git_dir: Path, root: Path, *, is_secret: Callable[[Path], object] = lambda p: None,
                 name_patterns: tuple[str, ...] = (), git: str = "git") -> None:
        self.git_dir = Path(git_dir)
        self.root = Path(root)
        self.is_secret = is_secret
        self.name_patterns = name_patterns
        self.git = git

    @staticmethod
    def is_git_workspace(root: Path) -> bool:
        """Whether ``root`` is (inside) a git working tree: a ``.git`` in it or above it."""
        here = Path(root).resolve()
        return any((folder / ".git").exists() for folder in (here, *here.parents))

    def _run(self, *args: str, input: bytes | None = None, bound: bool = True) -> bytes:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "HOME": str(self.git_dir),
               "GIT_AUTHOR_NAME": "agent-server", "GIT_AUTHOR_EMAIL": "agent-server@localhost",
               "GIT_COMMITTER_NAME": "agent-server", "GIT_COMMITTER_EMAIL": "agent-server@localhost",
               "LC_ALL": "C"}
        if bound:  # the shadow repository with the workspace as its work tree
            env.update(GIT_DIR=str(self.git_dir), GIT_WORK_TREE=str(self.root),
                       GIT_INDEX_FILE=str(self.git_dir / "index"))
        try:
            proc = subprocess.run([self.git, *args], cwd=self.root, env=env, input=input,
                                  capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ShadowError(f"git {args[0]}: {exc}") from None
        if proc.returncode != 0:
            raise ShadowError(f"git {' '.join(args[:2])}: {proc.stderr.decode(errors='replace').strip()[:500]}")
        return proc.stdout

    def _ensure(self) -> None:
        if (self.git_dir / "HEAD").exists():
            return
        self.git_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._run("init", "--quiet", "--bare", str(self.git_dir), bound=False)
        self._run("config", "core.bare", "false")
        self._run("config", "core.autocrlf", "false")
        self._run("config", "core.symlinks", "true")
        self._run("config", "gc.auto", "0")
        exclude = self.git_dir / "info" / "exclude"
        exclude.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        exclude.write_text("/.git\n" + "".join(f"{p}\n" for p in self.name_patterns), encoding="utf-8")

    def snapshot(self) -> str:
        """Record the working tree now; returns the tree's id. Raises ``ShadowError``."""
        self._ensure()
        self._run("add", "--all", "--ignore-errors", "--", ".")
        listed = self._run("ls-files", "-z").split(b"\0")
        secret = [name for name in listed if name and self.is_secret(self.root / os.fsdecode(name))]
        if secret:
            self._run("rm", "--cached", "--quiet", "--", *(os.fsdecode(n) for n in secret))
        return self._run("write-tree").decode().strip()

    def changes(self, before: str, after: str, blobs: BlobStore) -> list[ShadowChange]:
        """Files that differ between trees ``before`` and ``after`` (regular files only; links and
        submodules are left out), their bytes kept in ``blobs``. Raises ``ShadowError``."""
        if before == after:
            return []
        out = self._run("diff-tree", "-r", "-z", "--no-renames", before, after).split(b"\0")
        found: list[ShadowChange] = []
        for i in range(0, len(out) - 1, 2):
            meta, name = out[i].decode(), os.fsdecode(out[i + 1])
            if not meta.startswith(":"):
                continue
            old_mode, new_mode, old_id, new_id, _status = meta[1:].split(" ")
            path = self.root / name
            if self.is_secret(path):
                continue
            # git keeps only 644/755; the file's real permission bits are taken from the disk
            # (for the state before too, unless the call itself switched the executable bit)
            real = _real_mode(path)
            before_state = self._state(old_mode, old_id, blobs, real if old_mode == new_mode else None)
            after_state = self._state(new_mode, new_id, blobs, real)
            if before_state is None and after_state is None:
                continue
            found.append(ShadowChange(path, before_state, after_state))
        return found

    def _state(self, mode: str, object_id: str, blobs: BlobStore, real_mode: int | None) -> FileState | None:
        if mode not in _GIT_MODES or set(object_id) == {"0"}:
            return None
        return FileState(blobs.put(self._run("cat-file", "blob", object_id)), real_mode or _GIT_MODES[mode])


def _real_mode(path: Path) -> int | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_mode & 0o7777 if stat.S_ISREG(st.st_mode) else None
