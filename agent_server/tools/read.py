"""The ``read`` tool: a text file as numbered lines, bounded, recorded in the read ledger.

Role: show the model ``cat -n``-style lines (``     7\\tline``) from an offset, at most 2000
characters a line and 50 KB a call, saying what was cut and the exact ``offset`` to continue with;
refuse binary files; answer a folder with its entries; record the snapshot it showed (invariant 12).

Must never: return an empty result for a non-empty file, or more than ``MAX_OUTPUT_BYTES``.

Long lines (minified code): the arguments are fixed by contract (``offset``/``limit`` count whole
lines), so ``read`` cannot page *inside* a line. A line over 2000 characters shows its first 2000
characters and a ``[line cut …]`` marker; a note at the end gives the line's length and two
read-only ways on: ``grep`` (which shows a window around each match even inside a 276 KB line) and
an exact ``bash`` command (``cut -b`` byte ranges of 6000, starting right after the shown part).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from pydantic import Field

from .base import PathText, Tool, ToolArgs, ToolContext, ToolResult, display_path, resolve_path
from .files import FileTooLargeError, NotTextFileError
from .safe_fs import NotRegularFileError, PathChangedError, PathRefused, file_kind
from .text import NotTextError, TextView, decode_text, replace_surrogates

#: Characters of one line shown before it is cut.
MAX_LINE_CHARS = 2000
#: Bytes (UTF-8) of one ``read`` result, notes included.
MAX_OUTPUT_BYTES = 50 * 1024
#: Lines shown when no ``limit`` is given.
DEFAULT_LIMIT = 2000
#: Byte window suggested for paging a long line with ``cut -b`` (fits the 8192-character trim).
SLICE_BYTES = 6000
_FOOTER_RESERVE = 1536


class ReadArgs(ToolArgs):
    """Arguments of ``read``: ``path``, optional 1-based ``offset`` and ``limit`` (lines)."""

    path: PathText = Field(
        min_length=1,
        description="File to read: absolute, or relative to the workspace folder.",
    )
    offset: int | None = Field(
        default=None, ge=1, description="1-based line number to start from (default 1)."
    )
    limit: int | None = Field(
        default=None,
        ge=1,
        description=f"Number of lines to read (default: up to {DEFAULT_LIMIT}, within 50 KB).",
    )


class ReadTool(Tool):
    """``read(path, offset?, limit?)``."""

    name = "read"
    description = (
        "Read a text file. Returns numbered lines (`line-number<TAB>text`), starting at `offset` "
        f"(1-based) for `limit` lines. At most {MAX_LINE_CHARS} characters are shown per line and "
        "50 KB per call; when more remains, the result ends with the exact `offset` to continue "
        "with. Read a file before you `edit` or `write` it. Binary files are refused; for a folder "
        "use `glob`."
    )
    Args = ReadArgs
    kind = "read"
    concurrency_safe = True
    default_timeout = 30.0
    max_result_chars = MAX_OUTPUT_BYTES

    def title(self, args: ReadArgs, ctx: ToolContext) -> str:
        shown = display_path(resolve_path(args.path, ctx.roots), ctx.roots)
        if args.limit is not None:
            start = args.offset or 1
            return f"Read {shown}:{start}-{start + args.limit - 1}"
        if args.offset is not None and args.offset > 1:
            return f"Read {shown} from line {args.offset}"
        return f"Read {shown}"

    def locations(self, args: ReadArgs, ctx: ToolContext) -> list[dict[str, Any]]:
        return [{"path": str(resolve_path(args.path, ctx.roots)), "line": args.offset or 1}]

    async def precondition(self, args: ReadArgs, ctx: ToolContext) -> ToolResult | None:
        """A path the file tools refuse (``/proc`` entries, devices, FIFOs): no question about it."""
        return precheck(resolve_path(args.path, ctx.roots), ctx, "read")

    async def execute(self, args: ReadArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_path(args.path, ctx.roots)
        shown = display_path(path, ctx.roots)
        refused = precheck(path, ctx, "read")
        if refused is not None:
            return refused
        try:
            snapshot = await ctx.files.read(path)
        except OSError as exc:
            return file_error(exc, path, ctx)
        try:
            view = decode_text(snapshot.raw)
        except NotTextError as exc:
            return not_text_result(shown, exc)
        ctx.reads.record(snapshot)
        result = render(view, path=path, shown=shown, offset=args.offset, limit=args.limit)
        if snapshot.disk_changed and not result.is_error:
            result.text += (f"\n[{shown} has unsaved changes in the editor, and the file on disk changed since the "
                            "editor loaded it: you read the editor's text; the disk holds other text, which "
                            "commands that read the file (tests, builds) see.]")
        result.locations = self.locations(args, ctx)
        return result


def render(
    view: TextView, *, path: Path, shown: str, offset: int | None, limit: int | None
) -> ToolResult:
    """The numbered-lines result for ``view`` (see the module docstring for the bounds)."""
    lines = view.lines()
    total = len(lines)
    start = offset or 1
    if total == 0:
        return ToolResult("(empty file: 0 lines)", meta={"lines": 0})
    if start > total:
        return ToolResult.error(
            f"offset {start} is past the end of {shown}, which has {total} line"
            f"{'s' if total != 1 else ''}. Use an offset between 1 and {total}."
        )
    wanted_end = min(total, start + (limit if limit is not None else DEFAULT_LIMIT) - 1)
    budget = MAX_OUTPUT_BYTES - _FOOTER_RESERVE
    rows: list[str] = []
    used = 0
    long_lines: list[tuple[int, int, int]] = []  # (line number, length, bytes shown)
    last = start - 1
    for number in range(start, wanted_end + 1):
        line = lines[number - 1]
        text = line
        if len(line) > MAX_LINE_CHARS:
            text = line[:MAX_LINE_CHARS]
            shown_bytes = len(text.encode("utf-8", "surrogateescape"))
            if number == 1 and view.bom:
                shown_bytes += 3
            long_lines.append((number, len(line), shown_bytes))
            text += f" … [line cut: {len(line) - MAX_LINE_CHARS:,} more characters]"
        row = f"{number:>6}\t{replace_surrogates(text)}"
        size = len(row.encode("utf-8")) + 1
        if rows and used + size > budget:
            if long_lines and long_lines[-1][0] == number:
                long_lines.pop()
            break
        rows.append(row)
        used += size
        last = number
    notes: list[str] = []
    if long_lines:
        notes.append(_long_line_note(long_lines, shown, single_line_file=total == 1))
    if view.invalid_bytes:
        notes.append(
            f"[{view.invalid_bytes} byte(s) that are not valid UTF-8 are shown as U+FFFD; "
            "edits elsewhere in the file keep them as they are.]"
        )
    if last < total:
        why = " (50 KB per call)" if last < wanted_end else ""
        notes.append(
            f"[Showed lines {start}-{last} of {total}{why}. Continue with offset={last + 1}.]"
        )
    elif start > 1 or limit is not None:
        notes.append(f"[End of file: {total} lines.]")
    text = "\n".join(rows + notes)
    meta = {"lines": total, "first": start, "last": last, "long_lines": len(long_lines)}
    return ToolResult(text, meta=meta)


def _long_line_note(long_lines: list[tuple[int, int, int]], shown: str, *, single_line_file: bool) -> str:
    import shlex  # this module's helpers of rare answers load theirs when they run

    number, length, shown_bytes = long_lines[0]
    quoted = shlex.quote(shown)
    first, last = shown_bytes + 1, shown_bytes + SLICE_BYTES
    if single_line_file:
        command = f"cut -b {first}-{last} {quoted}"
    else:
        command = f"sed -n '{number}p' {quoted} | cut -b {first}-{last}"
    others = ""
    if len(long_lines) > 1:
        listed = ", ".join(str(n) for n, _, _ in long_lines[1:6])
        others = f" Lines {listed}{' …' if len(long_lines) > 6 else ''} were cut the same way."
    return (
        f"[Line {number} is {length:,} characters long; only its first {MAX_LINE_CHARS:,} are shown."
        f"{others} `read` pages by whole lines, so to see more of a long line: `grep` for what you "
        f"need in {quoted} (it shows the text around each match, even inside a long line), or "
        f"page it by bytes with `bash`: `{command}`, then the next {SLICE_BYTES} bytes, and so on.]"
    )


def not_text_result(shown: str, reason: object, verb: str = "read") -> ToolResult:
    """The refusal of a file that is not text (binary, not UTF-8), the same whether ``decode_text``
    refused its bytes or the backend did (``NotTextFileError``: the editor cannot hold it faithfully)."""
    if verb != "read":
        return ToolResult.error(f"Cannot {verb} {shown}: {reason}.")
    import shlex

    return ToolResult.error(
        f"Cannot read {shown}: {reason}. `read` shows text files only; inspect it with "
        f"`bash` (e.g. `file {shlex.quote(shown)}` or `xxd {shlex.quote(shown)} | head`).",
        binary=True,
    )


def precheck(path: Path, ctx: ToolContext, verb: str) -> ToolResult | None:
    """The refusal result when the file tools may not open ``path`` (checked before any backend —
    the editor's included — sees it): a refused ``/proc`` entry or protected credential store
    (``ctx.access``), a path that no longer leads where policy's decision saw it lead (its
    ``gate``), or something other than a regular file or folder (FIFO, device, socket);
    ``None`` when it may go on (a missing path too: the backend reports it)."""
    try:
        resolved = ctx.access.check(path)
        st = os.lstat(resolved)
    except OSError as exc:
        if isinstance(exc, PathRefused) or (isinstance(exc, PathChangedError) and exc.detail):
            return file_error(exc, path, ctx, verb)  # (a path changed since policy's decision: no backend asked)
        return None
    if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        return file_error(PathChangedError(path), path, ctx, verb)
    return file_error(NotRegularFileError(path, file_kind(st.st_mode)), path, ctx, verb)


def file_error(exc: OSError, path: Path, ctx: ToolContext, verb: str = "read") -> ToolResult:
    """An error result for a failed ``files.read`` of ``path``: not found (with similar names
    nearby), a directory (with its entries), refused by rule, not a regular file, changed while
    opening, permission, too large, or any other OS error."""
    shown = display_path(path, ctx.roots)
    if isinstance(exc, NotTextFileError):
        return not_text_result(shown, exc.reason, verb)
    if isinstance(exc, PathRefused):
        return ToolResult.error(f"Refused: `{verb}` may not open {shown}: {exc.reason}. The file tools never "
                                "open it; do not try to reach it another way.", refused="protected")
    if isinstance(exc, NotRegularFileError):
        return ToolResult.error(f"Refused: {shown} is {exc.kind}. read, grep, glob, write and edit work on "
                                "regular files only.", refused="not_regular")
    if isinstance(exc, PathChangedError):
        if exc.detail:
            return ToolResult.error(f"{shown} changed after the permission check: {exc.detail}. Nothing was read "
                                    "or written; if it is meant to, call the tool again (it is checked anew).",
                                    refused="changed")
        return ToolResult.error(f"{shown} changed while it was being opened (a link appeared in its path); "
                                "nothing was read or written.", refused="changed")
    if isinstance(exc, FileNotFoundError):
        return ToolResult.error(f"File not found: {shown}.{_similar_names(path, ctx)}", not_found=True)
    if isinstance(exc, IsADirectoryError):
        return ToolResult.error(f"{shown} is a directory, not a file.{_entries(path, ctx)}")
    if isinstance(exc, PermissionError):
        return ToolResult.error(f"Permission denied reading {shown}.")
    if isinstance(exc, FileTooLargeError):
        return ToolResult.error(
            f"{shown} is {exc.size:,} bytes, too large to load (limit {exc.limit:,}). Search it "
            "with `grep`, or look at parts of it with `bash` (`head`, `tail`, `sed -n`)."
        )
    return ToolResult.error(f"Cannot read {shown}: {exc.strerror or exc}.")


def _listing(folder: Path, ctx: ToolContext, kind: str) -> list[os.DirEntry[str]]:
    """The entries of ``folder``, listed through a descriptor ``ctx.access`` opened and judged (a
    folder swapped for a link after the policy's decision lists nothing). Raises ``OSError``."""
    fd, _ = ctx.access.open_folder(folder, kind)
    try:
        with os.scandir(fd) as it:
            return list(it)
    finally:
        os.close(fd)


def _similar_names(path: Path, ctx: ToolContext) -> str:
    parent = path.parent
    try:
        names = sorted(e.name for e in _listing(parent, ctx, "list"))
    except FileNotFoundError:
        return f" The folder {parent} does not exist either."
    except OSError:
        return ""
    import difflib

    close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean: " + ", ".join(str(parent / n) for n in close) + "?"


def _entries(path: Path, ctx: ToolContext, limit: int = 100) -> str:
    try:
        entries = sorted(e.name + ("/" if e.is_dir() else "") for e in _listing(path, ctx, "read"))
    except OSError:
        return " Use `glob` to list the files in it."
    if not entries:
        return " It is empty."
    more = f", … ({len(entries) - limit} more)" if len(entries) > limit else ""
    return (
        f" It contains {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}: "
        + ", ".join(entries[:limit])
        + more
        + ". Read one of its files, or use `glob` to search it."
    )
