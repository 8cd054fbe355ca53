"""Where ``glob`` and ``grep`` may search (issue 11 §1 c, d, f).

Role: the checked target, the folder opened once as an fd for ``rg`` to start in, and what a
folder-wide search leaves out — decided from the list of files, before any content is read.

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
    real = ctx.access.check(folder)
    return safe_fs.open_dir_beneath(real, [], create=False), real


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


#: Most files and folders one folder-wide ``grep`` leaves out by name (each is an argument of ``rg``).
MAX_EXCLUDED = 4000


@dataclass
class Unsearched:
    """What a folder-wide ``grep`` does not search (finding 13: a note that depended on whether the
    pattern matched inside them read a key out a character at a time): ``secrets`` (files named
    like secrets), ``protected`` (outermost protected files and folders), ``excluded`` (both, as
    relative paths for ``rg``). Decided from the list of files alone, before any content is read."""

    secrets: list[str] = field(default_factory=list)
    protected: list[str] = field(default_factory=list)
    quiet: list[str] = field(default_factory=list)
    """Secret-named files ``glob`` leaves out anyway: excluded, not named."""
    searchable: int = -1
    """Files left to search (``-1``: not listed)."""

    @property
    def excluded(self) -> list[str]:
        return self.secrets + self.protected + self.quiet

    def note(self, folder: Path, ctx: ToolContext) -> str:
        """The same words whatever the pattern: what was not searched."""
        note = ""
        if self.protected:
            listed = ", ".join(display_path(folder / p, ctx.roots) for p in self.protected[:5])
            more = f" and {len(self.protected) - 5:,} more" if len(self.protected) > 5 else ""
            note += (f"\n[not searched: protected locations ({listed}{more}: credential stores, agent-server "
                     "state, process files); the file tools never open them]")
        if self.secrets:
            listed = ", ".join(display_path(folder / s, ctx.roots) for s in self.secrets[:5])
            more = f" and {len(self.secrets) - 5:,} more" if len(self.secrets) > 5 else ""
            note += (f"\n[not searched: {len(self.secrets):,} file(s) that may hold secrets ({listed}{more}); "
                     "to search one, name it as `path` — that asks the user first]")
        return note


async def unsearched(listing: tuple[str, list[str]], dirfd: int, ctx: ToolContext, folder: Path, real: str,
                     left_out: LeftOut | None, selected: Callable[[str], bool] | None) -> Unsearched:
    """List the files a folder-wide search would read (``rg --files``, the same ignore rules) and
    pick out those it must not: a protected location, a file named like a secret. ``real``: the
    folder resolved (the fd's path)."""
    out = Unsearched()
    if (left_out is None or not left_out.active) and ctx.is_secret is None:
        return out
    protected: set[str] = set()
    out.searchable = 0
    # the walk follows no link below the folder: its resolved path plus ``rel`` is each file's real path
    is_secret = ctx.is_secret_resolved or ctx.is_secret
    base = Path(real) if ctx.is_secret_resolved else folder

    def sort(line: bytes) -> bool:
        rel = os.fsdecode(line)
        if left_out is not None and left_out(rel):
            protected.add(left_out.top(rel))
        elif is_secret is not None and is_secret(base / rel):
            (out.secrets if selected is None or selected(rel) else out.quiet).append(rel)
        else:
            out.searchable += 1
        return True

    await run_rg(*listing, cwd=dirfd, on_line=sort, env=ctx.env, null_separated=True)
    out.secrets.sort()
    out.protected = sorted(protected)
    return out


def exclusion_args(excluded: list[str], rg: bool) -> list[str]:
    """``rg``'s override globs (highest precedence: no ``.gitignore`` of a cloned repository
    brings a file back) or the fallback's ``-x`` arguments for ``excluded``."""
    if rg:
        return ["--glob=!/" + _GLOB_SPECIAL.sub(r"\\\g<0>", rel) for rel in excluded]
    return [arg for rel in excluded for arg in ("-x", rel)]


_GLOB_SPECIAL = re.compile(r"[\\*?\[\]{}!]")
