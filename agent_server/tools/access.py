"""What the file tools may open, decided on the path resolved once (issue 11 §1 a, c, d, f).

Role: ``FileAccess`` is shared by the tools (``read``/``grep``/``glob``/``write``/``edit``) and
the disk backend of the workspace-file seam, so the decision the tool reports and the open the
backend does use the same rules: ``check_read`` (no NUL byte; not a refused ``/proc`` entry; not
a protected credential store), ``write_anchor`` (the root a write is opened beneath — a write
outside every root is refused unless the session allows writing anywhere) and ``hidden`` (what a
folder-wide search leaves out).

``protected`` is policy's credential-store test (``policy.paths.CredentialStores.match``: the
config folder, keyrings, the state folder except this session's spill folder, ``~/.ssh`` …);
this package is a leaf and only receives it as a callable.

Must never: decide on a path that is then opened by following links again — callers open the
``resolved`` path with ``safe_fs`` (no link-following).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .safe_fs import PathRefused, proc_refusal, resolve_once

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


class FileAccess:
    """The file tools' access rules for one session.

    ``roots``: the workspace roots (absolute). ``protected``: see ``Protected`` (``None``: nothing
    protected beyond ``/proc``). ``write_outside``: whether a write may land outside every root
    right now (danger-full-access; policy decides the mode — ``None``: yes, as in unit tests
    without a policy). ``protected_paths``: every path ``protected`` refuses beneath (its folders
    and files), so a folder-wide search that cannot meet one skips the per-result check; empty:
    unknown, every result is checked.
    """

    def __init__(self, roots: Sequence[Path | str] = (), *, protected: Protected | None = None,
                 write_outside: Callable[[], bool] | None = None, protected_paths: Sequence[str] = ()) -> None:
        self.roots = tuple(os.path.abspath(r) for r in roots)
        self.protected = protected
        self.write_outside = write_outside
        self.protected_paths = tuple(protected_paths)

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

    def check(self, path: Path | str) -> str:
        """``path`` resolved once, if the tools may open it; raises ``PathRefused`` otherwise."""
        lexical = os.fspath(path)
        resolved = resolve_once(lexical)
        reason = self.refusal(os.path.normpath(lexical), resolved)
        if reason:
            raise PathRefused(lexical, reason)
        return resolved

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
