"""Where ``glob`` and ``grep`` may search (issue 11 §1 c, d, f).

Role: the checked target, the folder opened once as an fd for ``rg`` to start in, and what a
folder-wide search leaves out — protected locations and files that may hold secrets — said to
``rg`` (or the fallback walk) as rules that no ignore file of a repository can undo (``--type-not``
for secret names, ``--glob=!/…`` overrides for paths), decided on names alone before any content is
read; the files are listed and judged one by one only for a rule ``rg`` cannot be told.

Must never: let a search start in a folder reached through a link swapped in after the check,
show a result from a protected location, or search a protected or secret-named file (whether a
pattern matches there must not change what a search returns: finding 13).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import safe_fs
from ._rg import run_rg
from .base import ToolContext, ToolResult, display_path, resolve_path
from .read import precheck


def search_target(path: str | None, ctx: ToolContext, verb: str) -> tuple[Path, ToolResult | None]:
    target = resolve_path(path, ctx.roots) if path else ctx.cwd
    refused = precheck(target, ctx, verb)
    if refused is not None:
        return target, refused
    if not target.exists():
        return target, ToolResult.error(f"Path not found: {display_path(target, ctx.roots)}.", not_found=True)
    try:
        real = safe_fs.resolve_once(target)
    except OSError as exc:
        return target, ToolResult.error(f"Cannot search {display_path(target, ctx.roots)}: {exc.strerror or exc}.")
    if target.is_dir() and any(real == top or real.startswith(top + "/") for top in _NO_FOLDER_SEARCH):
        return target, ToolResult.error(
            f"Refused: `{verb}` does not search inside {real} folder-wide (process and device files); "
            "name one regular file as `path`.", refused="not_regular")
    return target, None


#: Folders never searched folder-wide: their entries are processes' secrets or devices.
_NO_FOLDER_SEARCH = ("/proc", "/dev", "/sys")


def open_folder(folder: Path, ctx: ToolContext) -> tuple[int, str]:
    """An fd of ``folder`` (resolved once, opened without following links afterwards) and its
    resolved text; ``rg`` starts in that fd, so a link swapped in later changes nothing."""
    return ctx.access.open_folder(folder)


class LeftOut:
    """``left_out(rel)``: whether a search result under the resolved folder ``real`` is refused to
    the file tools (a protected credential store, a ``/proc`` entry) — decided on the text of the
    path, as searches do not follow links below their folder; counts what it hid."""

    def __init__(self, ctx: ToolContext, real: str) -> None:
        self.access = ctx.access
        self.base = real.rstrip("/") + "/"
        self.count = 0
        self.active = self.access.may_meet_protected(real) or real == "/" or real.startswith("/proc")

    def __call__(self, rel: str) -> bool:
        if not self.active:
            return False
        path = self.base + rel
        if self.access.refusal(path, path) is None:
            return False
        self.count += 1
        return True

    def top(self, rel: str) -> str:
        """The outermost folder of ``rel`` (a path ``left_out`` refused) that is refused itself, or
        ``rel``: what a search excludes whole."""
        parts = rel.split("/")
        for n in range(1, len(parts)):
            path = self.base + "/".join(parts[:n])
            if self.access.refusal(path, path) is not None:
                return "/".join(parts[:n])
        return rel

    def note(self) -> str:
        if not self.count:
            return ""
        return (f"\n[{self.count} result(s) in protected locations (credential stores, agent-server state, "
                "process files) were left out; the file tools never open them]")


#: Most bytes of exclusion arguments one search passes when the files are listed and judged one
#: by one (an argument each); Linux's limit on a command line with its environment is 2 MiB.
MAX_EXCLUDED_BYTES = 1_000_000
#: What a search from ``/`` leaves out whole: process and device files (``search_target``).
_ROOT_SKIPS = ("proc", "dev", "sys")
_WILD = re.compile(r"[*?]")


def _below(path: str, folder: str) -> str | None:
    """``path`` relative to ``folder`` when it lies strictly below it, in any case (as policy
    compares: a case-folding filesystem), else ``None``."""
    base = folder.rstrip("/") + "/"
    return path[len(base):] if path[:len(base)].casefold() == base.casefold() and len(path) > len(base) else None


@dataclass
class Exclusions:
    """What a folder-wide search below the resolved ``real`` leaves out by rule, relative to it:
    ``protected`` (files and folders, whole), ``secret_names`` (name globs, any case, files
    only), ``secret_paths`` (files or folders), ``secret_globs`` (path globs, ``SecretMatcher``
    syntax). ``listed``: some rule cannot be said this way (a callable ``is_secret``, a protected
    test with no list of paths, a secret rule covering the folder itself): the files are listed
    and judged one by one."""

    protected: list[str] = field(default_factory=list)
    secret_names: tuple[str, ...] = ()
    secret_paths: list[str] = field(default_factory=list)
    secret_globs: list[str] = field(default_factory=list)
    listed: bool = False

    def args(self, rg: bool) -> list[str]:
        """The exclusions as ``rg`` arguments (the type filter and override globs, any case: the highest
        precedence, no ``.gitignore``/``.ignore``/``.rgignore`` brings a file back) or the
        fallback's (``-t NAME``, ``-x REL``, ``-g GLOB``)."""
        if not rg:
            return ([a for n in self.secret_names for a in ("-t", n)]
                    + [a for r in self.protected + self.secret_paths for a in ("-x", r)]
                    + [a for g in self.secret_globs for a in ("-g", g)])
        out = [f"--type-add=secret:{any_case_glob(n)}" for n in self.secret_names]
        if self.secret_names:
            out.append("--type-not=secret")
        out += ["--iglob=!/" + _GLOB_SPECIAL.sub(r"\\\g<0>", rel) for rel in self.protected + self.secret_paths]
        out += ["--iglob=!/" + _RG_PATH_SPECIAL.sub(r"\\\g<0>", glob) for glob in self.secret_globs]
        return out

    def candidates(self, rg: bool) -> list[str]:
        """Arguments that list only the files ``secret_names`` leaves out (as the search would meet
        them: the same ignore rules; nothing protected or secret by path)."""
        if not rg:
            return ["-T", *self.args(False)]
        out = self.args(True)
        return [a for a in out if a != "--type-not=secret"] + ["--type=secret"]


def exclusions(ctx: ToolContext, real: str) -> Exclusions:
    """What a folder-wide search below the resolved ``real`` leaves out (``Exclusions``)."""
    out = Exclusions()
    access = ctx.access
    if access.protected is not None:
        out.listed = not access.protected_paths
        out.protected = sorted({rel for p in access.protected_paths if (rel := _below(p, real)) is not None})
    if real == "/":
        out.protected += [d for d in _ROOT_SKIPS if d not in out.protected]
    rules = ctx.secret_rules
    if rules is None:
        out.listed = out.listed or ctx.is_secret is not None
        return out
    out.secret_names = rules.names
    out.listed = out.listed or any(":" in name for name in rules.names)  # ``--type-add`` takes no colon in a glob
    for path in rules.exact:
        rel = _below(path, real)
        if rel is not None:
            out.secret_paths.append(rel)
        elif path == real or _below(real, path) is not None:
            out.listed = True  # the folder itself is secret (the user allowed searching it)
    for pattern in rules.paths:
        parts = pattern.split("/")
        first = next((i for i, part in enumerate(parts) if _WILD.search(part)), len(parts))
        literal = "/".join(parts[:first]) or "/"
        if literal == real or _below(literal, real) is not None:
            rel = pattern[len(real.rstrip("/")) + 1:]
            if any("**" in part and part != "**" for part in rel.split("/")):
                out.listed = True  # ``rg`` takes ``**`` only as a whole name
            elif first == len(parts):
                out.listed = out.listed or not rel  # the folder itself is secret
                out.secret_paths += [rel] if rel else []
            else:
                out.secret_globs.append(rel)
        elif _below(real, literal) is not None:
            out.listed = True  # the search starts below the pattern's fixed part
    return out


def any_case_glob(name: str) -> str:
    """The ``fnmatch`` name glob ``name`` as a ``rg`` glob matching in any case (``.env*`` →
    ``.[eE][nN][vV]*``): ``rg``'s file types have no case-insensitive form."""
    out: list[str] = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "[" and (end := _class_end(name, i)) > 0:
            body = name[i + 1:end]
            neg = body[:1] == "!"
            body = body[1:] if neg else body
            extra = ""
            for k, ch in enumerate(body):
                if ch.isalpha() and len(ch.swapcase()) == 1:
                    is_range = k + 2 < len(body) and body[k + 1] == "-" and body[k + 2].isalpha()
                    extra += f"{ch.swapcase()}-{body[k + 2].swapcase()}" if is_range else ch.swapcase()
            body = (body + extra).replace("\\", "\\\\")
            out.append("[" + ("!" if neg else "") + body + "]")
            i = end + 1
            continue
        if c in "*?":
            out.append(c)
        elif c.isalpha() and len(c.swapcase()) == 1 and c.swapcase() != c:
            out.append(f"[{c}{c.swapcase()}]")
        else:
            out.append(_GLOB_SPECIAL.sub(r"\\\g<0>", c))
        i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """Where the ``fnmatch`` class opened at ``start`` closes (``]`` first or after ``!`` is a
    member), or ``-1``: the ``[`` is a plain character."""
    j = start + 1
    if j < len(pattern) and pattern[j] == "!":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    end = pattern.find("]", j)
    return end


@dataclass
class Unsearched:
    """What a folder-wide ``grep`` does not search (finding 13: a note that depended on whether the
    pattern matched inside them read a key out a character at a time): ``secrets`` (files that
    may hold secrets, named), ``secret_globs`` (path globs of the same), ``protected`` (protected
    files and folders). Decided from names alone, before any content is read."""

    secrets: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    secret_globs: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)
    """Files and folders a listing judged one by one found (``Exclusions.listed``)."""
    searchable: int = -1
    """Files left to search (``-1``: not listed)."""

    def note(self, folder: Path, ctx: ToolContext) -> str:
        """The same words whatever the pattern: what was not searched."""
        note = ""
        if self.protected:
            listed = ", ".join(display_path(folder / p, ctx.roots) for p in self.protected[:5])
            more = f" and {len(self.protected) - 5:,} more" if len(self.protected) > 5 else ""
            note += (f"\n[not searched: protected locations ({listed}{more}: credential stores, agent-server "
                     "state, process files); the file tools never open them]")
        if self.secrets or self.secret_globs:
            shown = [display_path(folder / s, ctx.roots) for s in self.secrets[:5]]
            more = f" and {len(self.secrets) - 5:,} more" if len(self.secrets) > 5 else ""
            globs = "".join(f", and any file matching {display_path(folder / g, ctx.roots)}" for g in self.secret_globs)
            note += (f"\n[not searched: {len(self.secrets):,} file(s) that may hold secrets ({', '.join(shown)}{more}"
                     f"{globs}); to search one, name it as `path` — that asks the user first]")
        return note


async def secret_candidates(listing: tuple[str, list[str]], dirfd: int, ctx: ToolContext, ex: Exclusions,
                            real: str, selected: Callable[[str], bool] | None) -> Unsearched:
    """What a search excluded by ``ex`` leaves out, for its note: the files ``ex.secret_names``
    leaves out, listed alone (``Exclusions.candidates``: ``rg`` walks, but hands over only those),
    the secret and protected paths that exist. ``selected``: the search's own glob (a secret it
    would not have searched anyway is not named)."""
    out = Unsearched(protected=[p for p in ex.protected if os.path.lexists(os.path.join(real, p))])
    names: list[str] = []

    def keep(line: bytes) -> bool:
        rel = os.fsdecode(line)
        if selected is None or selected(rel):
            names.append(rel)
        return True

    if ex.secret_names:
        await run_rg(*listing, cwd=dirfd, on_line=keep, env=ctx.env, null_separated=True)
    names += [p for p in ex.secret_paths if os.path.lexists(os.path.join(real, p)) and (selected is None or selected(p))]
    out.secrets = sorted(set(names))
    out.secret_globs = list(ex.secret_globs)
    return out


async def unsearched(listing: tuple[str, list[str]], dirfd: int, ctx: ToolContext, folder: Path, real: str,
                     left_out: LeftOut | None, selected: Callable[[str], bool] | None) -> Unsearched:
    """List every file a folder-wide search would read (``rg --files``, the same ignore rules) and
    pick out those it must not: a protected location, a file that may hold secrets — for rules
    that cannot be said to ``rg`` (``Exclusions.listed``). ``real``: the folder resolved (the
    fd's path)."""
    out = Unsearched()
    protected: set[str] = set()
    out.searchable = 0
    # the walk follows no link below the folder: its resolved path plus ``rel`` is each file's real path
    is_secret = ctx.is_secret_resolved or ctx.is_secret
    base = Path(real) if ctx.is_secret_resolved else folder
    if is_secret is None and ctx.secret_rules is not None:
        rules = ctx.secret_rules
        is_secret, base = (lambda p: rules.match(str(p))), Path(real)

    def sort(line: bytes) -> bool:
        rel = os.fsdecode(line)
        if left_out is not None and left_out(rel):
            protected.add(left_out.top(rel))
        elif is_secret is not None and is_secret(base / rel):
            out.excluded.append(rel)
            if selected is None or selected(rel):
                out.secrets.append(rel)
        else:
            out.searchable += 1
        return True

    await run_rg(*listing, cwd=dirfd, on_line=sort, env=ctx.env, null_separated=True)
    out.secrets.sort()
    out.protected = sorted(protected)
    out.excluded += out.protected
    return out


def exclusion_args(excluded: list[str], rg: bool) -> list[str]:
    """``rg``'s override globs (highest precedence: no ``.gitignore`` of a cloned repository
    brings a file back) or the fallback's ``-x`` arguments for ``excluded``."""
    if rg:
        return ["--glob=!/" + _GLOB_SPECIAL.sub(r"\\\g<0>", rel) for rel in excluded]
    return [arg for rel in excluded for arg in ("-x", rel)]


_GLOB_SPECIAL = re.compile(r"[\\*?\[\]{}!]")
#: What a secret path glob (``*``, ``?``, ``**`` its only wildcards) escapes for ``rg``.
_RG_PATH_SPECIAL = re.compile(r"[\\\[\]{}!]")

