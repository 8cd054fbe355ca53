"""What the file tools may open, decided on the path resolved once (issue 11 §1 a, c, d, f).

Role: ``FileAccess`` is shared by the tools (``read``/``grep``/``glob``/``write``/``edit``) and
the disk backend of the workspace-file seam, so the decision the tool reports and the open the
backend does use the same rules: ``check_read`` (no NUL byte; not a refused ``/proc`` entry; not
a protected credential store), ``write_anchor`` (the root a write is opened beneath — a write
outside every root is refused unless the session allows writing anywhere), ``hidden`` (what a
folder-wide search leaves out) and ``gate``: the open must reach the path policy's guard judged
for the call (``SessionPolicy.open_refusal``), on this resolution and on the opened descriptor's
own path (``open_read``, ``open_folder``).

Must never: decide on a path that is then opened by following links again — callers open the
``resolved`` path with ``safe_fs`` (no link-following) — nor read from a descriptor whose own
path the gate did not accept (a link swapped in after the decision: an outside file, a secret,
``.git``).

``protected`` is policy's credential-store test (``policy.paths.CredentialStores.match``: the
config folder, keyrings, the state folder except this session's spill folder, ``~/.ssh`` …);
this package is a leaf and only receives it as a callable.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .safe_fs import PathChangedError, PathRefused, fd_path, open_dir_beneath, open_regular, proc_refusal, resolve_once

@dataclass(frozen=True)
class SecretRules:
    """Which files may hold secrets, as rules a search can hand to ``rg`` instead of asking about
    each file it lists: ``names`` (``fnmatch`` globs of a file's name, any case: ``.env*``,
    ``*.pem``), ``paths`` (absolute path globs: ``*`` and ``?`` within a name, ``**`` any depth),
    ``exact`` (absolute paths, resolved: a file, or a folder and all below it — what a
    credential-path variable points to); all in any case. Policy's ``SecretMatcher`` says the same
    file by file."""

    names: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    exact: tuple[str, ...] = ()

    def match(self, resolved: str) -> bool:
        """Whether the resolved path ``resolved`` is secret by these rules (what a search that lists
        its files asks when no ``is_secret`` was given)."""
        import fnmatch
        import re

        from ._walk import path_glob

        name = os.path.basename(resolved)
        if any(fnmatch.fnmatch(name.lower(), n.lower()) for n in self.names):
            return True
        folded = resolved.casefold()
        if any(folded == e.casefold() or folded.startswith(e.casefold().rstrip("/") + "/") for e in self.exact):
            return True
        for pattern in self.paths:
            if re.match(path_glob(pattern) + r"\Z", resolved, re.IGNORECASE) or \
                    (pattern.endswith("/**") and folded == pattern[:-3].casefold()):
                return True
        return False


Protected = Callable[[str, str], "str | None"]
"""``(lexical, resolved) -> reason | None``: why a path is a protected credential store."""

Gate = Callable[[str, str], "str | None"]
"""``(kind, resolved) -> reason | None``: why the open of ``resolved`` (``kind``: ``"read"``,
``"write"``, or ``"list"``: a folder's names only) is not what policy decided for the call in
progress (``None``: it is, or no call)."""


class FileAccess:
    """The file tools' access rules for one session.

    ``roots``: the workspace roots (absolute). ``protected``: see ``Protected`` (``None``: nothing
    protected beyond ``/proc``). ``write_outside``: whether a write may land outside every root
    right now (danger-full-access; policy decides the mode — ``None``: yes, as in unit tests
    without a policy). ``protected_paths``: every path ``protected`` refuses beneath (its folders
    and files), so a folder-wide search that cannot meet one skips the per-result check; empty:
    unknown, every result is checked. ``gate``: see ``Gate`` (``None``: no policy, unit tests).
    """

    def __init__(self, roots: Sequence[Path | str] = (), *, protected: Protected | None = None,
                 write_outside: Callable[[], bool] | None = None, protected_paths: Sequence[str] = (),
                 gate: Gate | None = None) -> None:
        self.roots = tuple(os.path.abspath(r) for r in roots)
        self.protected = protected
        self.write_outside = write_outside
        self.protected_paths = tuple(protected_paths)
        self.gate = gate

    def may_meet_protected(self, folder: str) -> bool:
        """Whether a search below the resolved ``folder`` (which follows no links) can reach a
        protected path: one lies inside it, or it lies inside one — compared in any case, as
        policy compares (``/Users/Me`` and ``/Users/me`` are one folder on a case-folding filesystem)."""
        if self.protected is None:
            return False
        if not self.protected_paths:
            return True
        folder = folder.casefold()
        base = folder.rstrip("/") + "/"
        return any(p == folder or p.startswith(base) or folder.startswith(p.rstrip("/") + "/")
                   for p in (q.casefold() for q in self.protected_paths))

    def refusal(self, lexical: str, resolved: str) -> str | None:
        """Why a path (as written, and resolved) is refused to every file tool, or ``None``."""
        reason = proc_refusal(resolved)
        if reason:
            return reason
        if self.protected is not None:
            return self.protected(lexical, resolved)
        return None

    def check(self, path: Path | str, kind: str = "read") -> str:
        """``path`` resolved once, if the tools may open it for ``kind`` (``"read"``/``"write"``);
        raises ``PathRefused`` (refused by rule) or ``PathChangedError`` (it no longer leads where
        policy's decision saw it lead) otherwise."""
        lexical = os.fspath(path)
        resolved = resolve_once(lexical)
        reason = self.refusal(os.path.normpath(lexical), resolved)
        if reason:
            raise PathRefused(lexical, reason)
        if self.gate is not None and (why := self.gate(kind, resolved)):
            raise PathChangedError(lexical, why)
        return resolved

    def opened(self, fd: int, resolved: str, lexical: Path | str, kind: str = "read") -> None:
        """Judge the descriptor ``fd`` opened for ``resolved`` by the path it really has (the
        kernel's name of it): when that is not ``resolved`` (a folder on the way renamed between
        the resolution and the open), the rules and the gate are asked again of it. Raises as
        ``check``; the caller closes ``fd``."""
        real = fd_path(fd)
        if real is None or real == resolved:
            return
        reason = self.refusal(real, real)
        if reason:
            raise PathRefused(lexical, reason)
        if self.gate is not None and (why := self.gate(kind, real)):
            raise PathChangedError(lexical, why)

    def open_read(self, path: Path | str) -> tuple[int, str]:
        """A read-only fd of the regular file at ``path`` and its resolution: ``check``, then
        ``safe_fs.open_regular`` (no link followed), then ``opened``."""
        resolved = self.check(path)
        fd = open_regular(resolved)
        try:
            self.opened(fd, resolved, path)
        except BaseException:
            os.close(fd)
            raise
        return fd, resolved

    def open_folder(self, path: Path | str, kind: str = "read") -> tuple[int, str]:
        """A directory fd of the folder at ``path`` (for a search to start in) and its resolution:
        ``check``, the open with no link followed, then ``opened``; ``kind`` ``"list"``: only its
        names are read (the folder of a path that was not found: the gate lets its parent pass)."""
        resolved = self.check(path, kind)
        fd = open_dir_beneath(resolved, [], create=False)
        try:
            self.opened(fd, resolved, path, kind)
        except BaseException:
            os.close(fd)
            raise
        return fd, resolved

    def hidden(self, path: Path | str) -> bool:
        """Whether a folder-wide search must leave ``path`` out (refused, or not resolvable)."""
        try:
            self.check(path)
        except (PathRefused, OSError, ValueError):
            return True
        return False

    def write_anchor(self, resolved: str) -> str:
        """The resolved root that contains ``resolved`` (a write is opened beneath it), else
        ``"/"`` when writing outside the roots is allowed; raises ``PathRefused`` otherwise.

        Containment is textual on resolved paths first, then by identity (device, inode) of the
        nearest existing ancestor, so case-folding or bind-mounted spellings of a root count."""
        best = None
        for root in self.roots:
            real = os.path.realpath(root)
            if resolved == real or resolved.startswith(real.rstrip("/") + "/"):
                if best is None or len(real) > len(best):
                    best = real
        if best is None:
            best = self._anchor_by_identity(resolved)
        if best is not None:
            return best
        if self.write_outside is None or self.write_outside():
            return "/"
        raise PathRefused(resolved, "it is outside the workspace roots")

    def _anchor_by_identity(self, resolved: str) -> str | None:
        ids = {}
        for root in self.roots:
            try:
                st = os.stat(root)
            except OSError:
                continue
            ids[(st.st_dev, st.st_ino)] = root
        if not ids:
            return None
        candidate = resolved
        while True:
            try:
                st = os.lstat(candidate)
                if (st.st_dev, st.st_ino) in ids:
                    return candidate
            except OSError:
                pass
            parent = os.path.dirname(candidate)
            if parent == candidate:
                return None
            candidate = parent
