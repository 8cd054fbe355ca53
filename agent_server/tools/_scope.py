"""Where ``glob`` and ``grep`` may search (issue 11 §1 c, d, f).

Role: the checked target, the folder opened once as an fd for ``rg`` to start in, and what a
folder-wide search leaves out.

Must never: let a search start in a folder reached through a link swapped in after the check, or
show a result from a protected location.
"""

from __future__ import annotations

from pathlib import Path

from . import safe_fs
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

    def note(self) -> str:
        if not self.count:
            return ""
        return (f"\n[{self.count} result(s) in protected locations (credential stores, agent-server state, "
                "process files) were left out; the file tools never open them]")


