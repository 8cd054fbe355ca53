"""The ``glob`` and ``grep`` tools: find files and lines, ``.gitignore`` respected, bounded.

Role: ``glob`` lists files matching a pattern, newest first; ``grep`` lists ``file:line: text``
for lines matching a regex. Both run ripgrep (``rg``, from the ``ripgrep`` wheel) and fall back to
a pure-Python walk (``pathspec`` + ``re``, ``_walk.py``) when ``rg`` is missing — as a child
process in ``rg``'s place, never in the server (a backtracking regex would hold every session). Paths in results are relative
to the workspace folder (``roots[0]``) when inside it — ready to pass to ``read`` — else absolute.

Must never: return an unbounded result — at most ``MAX_FILES`` paths / ``MAX_MATCHES`` lines of at
most ``MAX_LINE_CHARS`` characters, and always say what was left out.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from . import _walk
from ._globmatch import compile_glob
from ._rg import RECORD_LIMIT, RG_COMMON, find_rg, run_rg
from ._scope import (MAX_EXCLUDED_BYTES, LeftOut, Unsearched, exclusion_args, exclusions, open_folder, search_target,
                     secret_candidates)
from ._scope import unsearched as find_unsearched
from .read import file_error as read_file_error
from .base import PathText, Tool, ToolArgs, ToolContext, ToolResult, display_path, one_line, resolve_path

MAX_FILES = 200
MAX_MATCHES = 200
MAX_LINE_CHARS = 500
#: Files collected (and sorted by time) before ``glob`` stops counting.
MAX_COLLECT = 100_000
#: Matching lines counted before ``grep`` stops counting.
MAX_SCAN = 10_000

Backend = Literal["auto", "rg", "python"]


class GlobArgs(ToolArgs):
    """Arguments of ``glob``: ``pattern`` and an optional folder ``path``."""

    pattern: str = Field(
        min_length=1,
        description=(
            "Glob pattern matched against paths relative to `path`, gitignore-style: `*.py` "
            "(any depth), `src/**/*.ts`, `tests/test_*.py`, `*.{js,ts}`."
        ),
    )
    path: PathText | None = Field(default=None, description="Folder to search (default: the workspace folder).")


class GrepArgs(ToolArgs):
    """Arguments of ``grep``: regex ``pattern``, optional ``path``, ``glob`` filter, ``ignore_case``."""

    pattern: str = Field(
        min_length=1,
        description="Regular expression (Rust regex syntax: like PCRE without look-around or backreferences).",
    )
    path: PathText | None = Field(default=None, description="File or folder to search (default: the workspace folder).")
    glob: PathText | None = Field(
        default=None, description="Only search files matching this glob, e.g. `*.py` or `src/**/*.ts`."
    )
    ignore_case: bool = Field(default=False, description="Match case-insensitively (default false).")


def _pick_backend(backend: Backend) -> str | None:
    """The ``rg`` path to use, or ``None`` for the Python fallback."""
    if backend == "python":
        return None
    return find_rg()


def _relative_pattern(pattern: str, folder: Path) -> str:
    """Read a pattern the way the model meant it: ``./x`` is ``x``; an absolute pattern inside
    ``folder`` is made relative to it."""
    if pattern.startswith("./"):
        return pattern[2:]
    prefix = str(folder).rstrip("/") + "/"
    if pattern.startswith(prefix):
        return pattern[len(prefix):]
    return pattern


class GlobTool(Tool):
    """``glob(pattern, path?)``. ``backend``: ``"auto"`` (``rg`` if found), ``"rg"``, ``"python"``."""

    name = "glob"
    description = (
        "Find files by name pattern (e.g. `**/*.py`, `src/**/test_*.ts`), skipping files ignored "
        f"by .gitignore. Returns paths, most recently modified first, at most {MAX_FILES}."
    )
    Args = GlobArgs
    kind = "search"
    concurrency_safe = True
    default_timeout = 60.0

    def __init__(self, backend: Backend = "auto") -> None:
        self.backend = backend

    def title(self, args: GlobArgs, ctx: ToolContext) -> str:
        where = f" in {display_path(resolve_path(args.path, ctx.roots), ctx.roots)}" if args.path else ""
        return f"Find `{one_line(args.pattern, 80)}`{where}"

    async def precondition(self, args: GlobArgs, ctx: ToolContext) -> ToolResult | None:
        """A folder that cannot be searched (missing, refused, ``/proc``): no question about it."""
        return search_target(args.path, ctx, "glob")[1]

    async def execute(self, args: GlobArgs, ctx: ToolContext) -> ToolResult:
        folder, error = search_target(args.path, ctx, "glob")
        if error:
            return error
        if not folder.is_dir():
            return ToolResult.error(f"{display_path(folder, ctx.roots)} is a file; `glob` searches folders.")
        pattern = _relative_pattern(args.pattern, folder)
        if pattern.startswith("!"):
            return ToolResult.error("A glob pattern cannot start with `!` (exclusions are not supported).")
        rg = _pick_backend(self.backend)
        found: list[str] = []
        capped = False
        note = ""
        try:
            dirfd, real = open_folder(folder, ctx)
        except OSError as exc:
            return ToolResult.error(f"Cannot search {display_path(folder, ctx.roots)}: {exc.strerror or exc}.")
        left_out = LeftOut(ctx, real)
        try:
            matches = compile_glob(pattern)

            def collect(line: bytes) -> bool:
                nonlocal capped
                rel = os.fsdecode(line)
                if matches(rel) and not left_out(rel):
                    found.append(rel)
                    capped = len(found) >= MAX_COLLECT
                return not capped

            program, argv = (rg, [*RG_COMMON, "--files", "--null"]) if rg else _fallback("files")
            try:  # NUL-separated: a file name may hold a newline
                run = await run_rg(program, argv, cwd=dirfd, on_line=collect, env=ctx.env, null_separated=True)
            except OSError as exc:
                return ToolResult.error(f"Could not run {'ripgrep' if rg else 'the file walk'}: {exc.strerror or exc}.")
            if run.exit_code == 2:
                if not found:
                    return ToolResult.error(f"glob failed: {run.stderr.strip() or 'ripgrep error'}")
                note = f"\n[some folders could not be searched: {one_line(run.stderr, 300)}]"
        finally:
            os.close(dirfd)
        note += left_out.note()
        paths = await asyncio.to_thread(_newest_first, folder, found)
        total = len(paths)
        if not paths:
            hint = ""
            if pattern.startswith("/"):
                hint = (" A pattern starting with `/` is anchored at the searched folder; to search "
                        "another folder, pass it as `path`.")
            return ToolResult(f"No files match `{args.pattern}` in {display_path(folder, ctx.roots)}.{hint}{note}",
                              meta={"count": 0})
        shown = [listed_path(display_path(folder / p, ctx.roots)) for p in paths[:MAX_FILES]]
        text = "\n".join(shown)
        if total > MAX_FILES:
            count = f"more than {total:,}" if capped else f"{total:,}"
            text += (f"\n[{count} files match; showing the {MAX_FILES} most recently modified. "
                     "Narrow the pattern or the path to see others.]")
        return ToolResult(text + note + quoted_note(shown), meta={"count": total, "capped": capped})


def _newest_first(folder: Path, rel_paths: list[str]) -> list[str]:
    def key(rel: str) -> tuple[int, str]:
        try:
            return -os.stat(folder / rel).st_mtime_ns, rel
        except OSError:
            return 0, rel

    return sorted(rel_paths, key=key)


def _fallback(mode: str, *args: str) -> tuple[str, list[str]]:
    """The program and arguments of the Python fallback (``_walk.py`` as a child, in ``rg``'s place)."""
    return sys.executable, ["-I", _walk.__file__, mode, *args]


class GrepTool(Tool):
    """``grep(pattern, path?, glob?, ignore_case?)``. ``backend`` as for ``GlobTool``."""

    name = "grep"
    description = (
        "Search file contents with a regular expression, skipping files ignored by .gitignore. "
        f"Returns `file:line: text` lines (at most {MAX_MATCHES}, each cut to {MAX_LINE_CHARS} "
        "characters around the match — also inside very long minified lines). Filter files with "
        "`glob` (e.g. `*.py`)."
    )
    Args = GrepArgs
    kind = "search"
    concurrency_safe = True
    default_timeout = 60.0

    def __init__(self, backend: Backend = "auto") -> None:
        self.backend = backend

    def title(self, args: GrepArgs, ctx: ToolContext) -> str:
        title = f"Search `{one_line(args.pattern, 80)}`"
        if args.path:
            title += f" in {display_path(resolve_path(args.path, ctx.roots), ctx.roots)}"
        if args.glob:
            title += f" ({one_line(args.glob, 40)})"
        return title

    def locations(self, args: GrepArgs, ctx: ToolContext) -> list[dict[str, Any]]:
        return [{"path": str(resolve_path(args.path, ctx.roots))}] if args.path else []

    async def precondition(self, args: GrepArgs, ctx: ToolContext) -> ToolResult | None:
        """A path that cannot be searched (missing, refused, ``/proc`` folder-wide): no question."""
        return search_target(args.path, ctx, "grep")[1]

    async def execute(self, args: GrepArgs, ctx: ToolContext) -> ToolResult:
        target, error = search_target(args.path, ctx, "grep")
        if error:
            return error
        folder, name = (target.parent, target.name) if target.is_file() else (target, None)
        rows: list[str] = []
        total = 0
        capped = False

        selected = compile_glob(_relative_pattern(args.glob, folder)) if args.glob else None
        try:  # a single file is opened here (regular, no link followed) and given to rg as stdin
            fd = ctx.access.open_read(target)[0] if name is not None else None
            dirfd, real = open_folder(folder, ctx) if name is None else (-1, "")
        except OSError as exc:
            return read_file_error(exc, target, ctx, "grep")
        left_out = LeftOut(ctx, real) if name is None else None
        rg = _pick_backend(self.backend)
        unsearched = Unsearched()
        excluded: list[str] = []
        candidates: asyncio.Task[Unsearched] | None = None
        rules = exclusions(ctx, real) if name is None else None
        if rules is not None and rules.listed:  # a rule rg cannot be told: every file listed and judged
            try:
                listing = (rg, [*RG_COMMON, "--files", "--null"]) if rg else _fallback("files")
                unsearched = await find_unsearched(listing, dirfd, ctx, folder, real, left_out, selected)
            except OSError as exc:
                os.close(dirfd)
                return ToolResult.error(f"grep failed: {exc.strerror or exc}")
            excluded = exclusion_args(unsearched.excluded, rg is not None)
        elif rules is not None:  # said to rg as rules; what they leave out is listed beside the search, for the note
            excluded = rules.args(rg is not None)
            listing = ((rg, [*RG_COMMON, "--files", "--null", *rules.candidates(True)]) if rg
                       else _fallback("files", *rules.candidates(False)))
            candidates = asyncio.ensure_future(secret_candidates(listing, dirfd, ctx, rules, real, selected))

        is_secret = ctx.is_secret_resolved or ctx.is_secret  # the search follows no link below ``real``
        secret_base = Path(real) if ctx.is_secret_resolved else folder
        if is_secret is None and ctx.secret_rules is not None:
            rules_of = ctx.secret_rules
            is_secret, secret_base = (lambda p: rules_of.match(str(p))), Path(real)

        def add(rel: str, line_no: int, text: Callable[[], str], first: int, count: int) -> bool:
            nonlocal total, capped
            if name is not None:
                rel = name
            elif selected is not None and not selected(rel):
                return True
            elif left_out is not None and left_out(rel):  # (excluded already: a file made since the listing)
                return True
            if name is None and is_secret is not None and is_secret(secret_base / rel):  # (left out already)
                return True
            total += 1
            if len(rows) < MAX_MATCHES:
                rows.append(format_match(listed_path(display_path(folder / rel, ctx.roots)), line_no, text(),
                                         first, count))
            capped = total >= MAX_SCAN
            return not capped

        note = ""
        dropped = 0
        try:
            if sum(len(arg) + 1 for arg in excluded) > MAX_EXCLUDED_BYTES:
                return ToolResult.error(
                    f"Refused: {len(unsearched.excluded):,} files or folders below {display_path(folder, ctx.roots)} "
                    "may hold secrets or are protected, too many to leave out of one search; search a narrower "
                    "`path`.", refused="too_many_secrets")
            if unsearched.searchable == 0:  # nothing left to search (``rg`` would call that an error)
                return ToolResult(f"No matches for `{args.pattern}` in {display_path(target, ctx.roots)}."
                                  f"{unsearched.note(folder, ctx)}", meta={"count": 0})
            argv = [*RG_COMMON, "--json", "--sort=path"] if rg else []
            if args.ignore_case:
                argv.append("--ignore-case" if rg else "-i")
            argv += ["-e", args.pattern, *excluded]
            if name is not None:
                argv += ["--", "-"]
            program, argv = (rg, argv) if rg else _fallback("grep", *argv)
            try:
                run = await run_rg(program, argv, cwd=dirfd if name is None else folder, stdin=fd, env=ctx.env,
                                   on_line=lambda line: _on_json(line, add))
                if candidates is not None:
                    unsearched = await candidates
            except (OSError, ValueError) as exc:
                return ToolResult.error(f"grep failed: {exc}")
            if run.exit_code == 2 and total == 0 and run.stderr.startswith("rg: No files were searched"):
                run.exit_code = 1  # every file was left out: nothing matched
            dropped = run.too_long
            if dropped:
                note += (f"\n[{dropped:,} matching line(s) too long to read were left out: ripgrep "
                         f"wrote over {RECORD_LIMIT // 2**20} MiB for each. To find the matches in such a "
                         "line, run e.g. `grep -ob PATTERN FILE | head` with `bash`]")
            if run.exit_code == 2:
                if total == 0 and not dropped:
                    return ToolResult.error(f"grep failed: {run.stderr.strip() or 'ripgrep error'}")
                note += f"\n[some files could not be searched: {one_line(run.stderr, 300)}]"
        finally:
            if candidates is not None:  # (done already, or stopped with the search)
                candidates.cancel()
                await asyncio.gather(candidates, return_exceptions=True)
            for open_fd in (fd, dirfd):
                if open_fd is not None and open_fd >= 0:
                    os.close(open_fd)
        where = display_path(target, ctx.roots)
        note += unsearched.note(folder, ctx)
        if total == 0 and not dropped:
            return ToolResult(f"No matches for `{args.pattern}` in {where}.{note}", meta={"count": 0})
        text = "\n".join(rows) if rows else f"No line shown for `{args.pattern}` in {where}."
        if total > len(rows):
            count = f"more than {total:,}" if capped else f"{total:,}"
            text += (f"\n[{count} matching lines; showing the first {len(rows)}. Narrow the "
                     "pattern, the path or the glob to see others.]")
        return ToolResult(text + note + quoted_note(rows), meta={"count": total, "capped": capped})


#: Where the submatches start in a ``match`` record (rg writes the fields in this order). Inside a
#: JSON string a quote is always escaped, so this cannot occur in a path or a line's text.
_SUBMATCHES = b',"submatches":['
_SUBMATCH = b'{"match":'
_START = re.compile(rb'"start":(\d+)')


def _on_json(line: bytes, add: Callable[[str, int, Callable[[], str], int, int], bool]) -> bool:
    """Handle one ``rg --json`` line; only ``match`` events count. Linear in the line's length
    and never a Python object per submatch (a 14 MB minified line holds 800,000 of them): the
    submatches are counted in the bytes, only the first one's offset is read and turned into
    characters, and the line's text is decoded only when the result shows it."""
    cut = line.find(_SUBMATCHES)
    try:
        event = json.loads(line if cut < 0 else line[:cut] + b"}}")
    except ValueError:
        return True
    if event.get("type") != "match":
        return True
    data = event["data"]
    rel = _json_text(data["path"])
    lines = data["lines"]
    raw = lines["text"].encode("utf-8", "surrogatepass") if "text" in lines else base64.b64decode(lines["bytes"])
    if cut < 0:
        count, start = 0, None
    else:
        count = line.count(_SUBMATCH, cut)
        found = _START.search(line, cut)
        start = int(found.group(1)) if found else None
    first = len(raw[:start].decode("utf-8", "ignore")) if start is not None else 0

    def text() -> str:
        return raw.decode("utf-8", "replace").removesuffix("\n").removesuffix("\r")

    return add(rel, int(data["line_number"]), text, first, count)


def _json_text(value: dict[str, str]) -> str:
    if "text" in value:
        return value["text"]
    return os.fsdecode(base64.b64decode(value["bytes"]))


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def listed_path(shown: str) -> str:
    """``shown`` (a path) as it goes into a listing of one path per line: as is, or, when it holds a
    control character (a newline would split the listing), as a JSON string — the form the model
    writes it back in a tool call's arguments."""
    return json.dumps(shown, ensure_ascii=False) if _CONTROL.search(shown) else shown


def quoted_note(lines: list[str]) -> str:
    """The line saying how quoted names are written, when one of ``lines`` starts with one."""
    if any(line.startswith('"') for line in lines):
        return "\n[a name in double quotes holds a control character such as a newline: it is written as a JSON string]"
    return ""


def format_match(shown: str, line_no: int, text: str, first: int, count: int) -> str:
    """``path:line: text``; a line over ``MAX_LINE_CHARS`` shows a window around its first match
    (``first``: its offset in characters) and says where in the line it is and how many of the
    line's ``count`` matches are not shown."""
    if len(text) <= MAX_LINE_CHARS:
        return f"{shown}:{line_no}: {text}"
    begin = max(0, first - 150)
    end = min(len(text), begin + MAX_LINE_CHARS)
    begin = max(0, end - MAX_LINE_CHARS)
    window = ("…" if begin else "") + text[begin:end] + ("…" if end < len(text) else "")
    more = f"; {count - 1:,} more matches in this line" if count > 1 else ""
    return (f"{shown}:{line_no}: {window} [long line: {len(text):,} characters, showing "
            f"{begin + 1:,}-{end:,}{more}]")
