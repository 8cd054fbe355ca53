"""The ``write`` and ``edit`` tools: change a file the model has read, keeping its bytes' style.

Role: ``write`` replaces a whole file (or creates one), ``edit`` replaces an exact literal
``old_string``; both require that the file was read in this session and is unchanged since
(invariant 12), keep a UTF-8 BOM, keep CRLF where the model wrote LF, go through the
workspace-file seam with the snapshot they were computed from, and report a diff for the editor.

Must never: write a file that was not read, or that changed since it was read — nor change a byte
outside the region the model asked to change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from pydantic import Field

from .base import PathText, Tool, ToolArgs, ToolContext, ToolResult, display_path, resolve_path
from .files import FileSnapshot
from .read import file_error, not_text_result, precheck
from .diff_view import diff_content
from .edit_text import find_spans, no_match_hint, snippet, splice
from .text import (
    NotTextError,
    TextView,
    decode_text,
    encode_text,
    has_surrogates,
    lf_to,
)



class WriteArgs(ToolArgs):
    """Arguments of ``write``: ``path`` and the whole new ``content``."""

    path: PathText = Field(min_length=1, description="File to write: absolute, or relative to the workspace folder.")
    content: str = Field(description="The complete new content of the file.")


class EditArgs(ToolArgs):
    """Arguments of ``edit``: ``path``, literal ``old_string`` → ``new_string``, ``replace_all``."""

    path: PathText = Field(min_length=1, description="File to edit: absolute, or relative to the workspace folder.")
    old_string: str = Field(description="The exact text to replace, as shown by `read` (without line numbers).")
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(
        default=False, description="Replace every occurrence (default: old_string must occur exactly once)."
    )


async def _current_for_change(
    path: Path, ctx: ToolContext, verb: str, *, must_exist: bool
) -> tuple[FileSnapshot | None, ToolResult | None]:
    """The file's current snapshot if it may be changed: ``(snapshot, None)``; ``(None, None)``
    for a file that does not exist (allowed when not ``must_exist``); ``(None, error)`` otherwise."""
    shown = display_path(path, ctx.roots)
    refused = precheck(path, ctx, verb)
    if refused is not None:
        return None, refused
    try:
        current = await ctx.files.read(path)
    except FileNotFoundError as exc:
        if not must_exist:
            return None, None
        error = file_error(exc, path, ctx)
        error.text += " `edit` changes existing files; create a new file with `write`."
        return None, error
    except OSError as exc:
        return None, file_error(exc, path, ctx, verb)
    seen = ctx.reads.last(path)
    if seen is None:
        return None, ToolResult.error(
            f"You have not read {shown} in this session. Read it with `read` first, then {verb} it.",
            refused="not_read",
        )
    if seen.sha256 != current.sha256:
        return None, ToolResult.error(
            f"{shown} has changed since you last read it (on disk or in the editor). Read it again "
            f"and {verb} it based on its current content.",
            refused="stale",
        )
    return current, None


def _differs(sent: bytes, landed: bytes) -> bool:
    """Whether what landed is other text than what was sent (a UTF-8 BOM, which an editor keeps
    outside its text, does not count)."""
    bom = b"\xef\xbb\xbf"
    return sent.removeprefix(bom) != landed.removeprefix(bom)


async def _commit(
    path: Path, raw: bytes, base: FileSnapshot | None, ctx: ToolContext
) -> tuple[ToolResult | None, list[str]]:
    """Write through the seam and record what landed.

    Returns ``(None, notes)`` when the change is in place (``notes``: sentences the model must
    also read — unsaved buffer, user-adjusted text), or ``(result, [])`` when it is not, or only in
    part: the result then says exactly what happened (partial, rejected, stale, cancelled, failed).
    """
    shown = display_path(path, ctx.roots)
    outcome = await ctx.files.write(path, raw, base=base)
    notes: list[str] = []
    landed = outcome.snapshot
    if outcome.status in ("written", "partial"):
        ctx.reads.record(landed or FileSnapshot.of(path, raw))
        if not outcome.saved and outcome.save_failed:
            notes.append(f"Your change is in the editor's buffer of {shown} but not on disk: the editor's save "
                         "did not complete (a save participant such as format-on-save may still be running, or "
                         "the write failed), so the file on disk still has the old text: commands that read the "
                         "file (tests, builds) will not see the change until it is saved.")
        elif not outcome.saved:
            notes.append(f"The change is in the editor's buffer of {shown}, which has unsaved changes, so "
                         "the file on disk still has the old text: commands that read the file (tests, "
                         "builds) will not see the change until the user saves it.")
        if outcome.merged:
            notes.append(f"While your proposal waited, the user edited other lines of {shown} in the editor; "
                         "your change was applied on top of their edits (theirs kept as they are), so the file "
                         "now holds text you have not seen. Read it again before you edit it, above all near "
                         "their edits.")
        if landed is not None and _differs(raw, landed.raw) and outcome.status == "written":
            who = ("The editor changed the text while writing it" if outcome.landed_by == "editor"
                   else "The user adjusted your change before accepting it")
            notes.append(f"{who}. What landed differs from what you sent (later edits must match "
                         f"the text that landed):\n{_unified(raw, landed.raw, shown)}")
    if outcome.status == "written":
        return None, notes
    if outcome.status == "partial":
        applied, total = outcome.hunks_applied, outcome.hunks_total
        what = f"{applied} of {total} hunks" if applied is not None and total else "part of the change"
        landed_raw = landed.raw if landed else (base.raw if base else b"")
        text = (f"Only {what} of your change to {shown} were applied (the user rejected the rest). "
                f"Difference between the text before and what landed:\n"
                f"{_unified(base.raw if base else b'', landed_raw, shown)}")
        # the editor's card and Changes view show what landed (not what was proposed)
        diff = _diff(path, _model_text(base.raw) if base else None, _model_text(landed_raw))
        return ToolResult(" ".join([text, *notes]), content=[diff], meta={"outcome": "partial"}), []
    if outcome.status == "stale":
        return ToolResult.error(
            f"Not written: {outcome.message or f'{shown} changed since it was read'}. Read it again "
            "and redo the change against its current content.",
            refused="stale",
        ), []
    if outcome.status == "rejected":
        return ToolResult.error(f"Not written: the user rejected the change to {shown}."
                                + (f" {outcome.message}" if outcome.message else ""), refused="rejected"), []
    if outcome.status == "cancelled":
        return ToolResult.error(f"Not written: the proposal for {shown} was cancelled before the user "
                                "answered; nothing was applied.", refused="cancelled"), []
    if outcome.status == "timeout":
        return ToolResult.error(f"Not written: the user did not answer the proposal for {shown} in time "
                                f"({outcome.message or 'the approval timeout passed'}); nothing was applied.",
                                refused="timeout"), []
    return ToolResult.error(f"Could not write {shown}: {outcome.message or 'unknown error'}."), []


def _unified(before: bytes, after: bytes, shown: str, limit: int = 4000) -> str:
    import difflib  # loaded with the first edit, not with the server

    diff = "".join(difflib.unified_diff(_model_text(before).splitlines(keepends=True),
                                        _model_text(after).splitlines(keepends=True),
                                        fromfile=f"{shown} (before)", tofile=f"{shown} (now)"))
    return diff if len(diff) <= limit else diff[:limit] + "\n[… diff cut …]"


def _count_lines(text: str) -> int:
    if not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def _diff(path: Path, old: str | None, new: str) -> dict[str, Any]:
    """The ACP diff of the change: whole for a small file, the changed region for a big one."""
    return diff_content(path, old, new)


def _model_text(raw: bytes) -> str:
    try:
        return decode_text(raw).model_text
    except NotTextError:
        return raw.decode("utf-8", "replace")


class WriteTool(Tool):
    """``write(path, content)``."""

    name = "write"
    description = (
        "Write a whole file: creates it (and missing folders) or replaces its content. An existing "
        "file must have been read with `read` in this session and be unchanged since. Keeps the "
        "file's UTF-8 BOM and, when the file uses CRLF and `content` uses LF, writes CRLF. Prefer "
        "`edit` for changing part of a file."
    )
    Args = WriteArgs
    kind = "edit"
    concurrency_safe = False
    default_timeout = 30.0

    def title(self, args: WriteArgs, ctx: ToolContext) -> str:
        return f"Write {display_path(resolve_path(args.path, ctx.roots), ctx.roots)}"

    def locations(self, args: WriteArgs, ctx: ToolContext) -> list[dict[str, Any]]:
        return [{"path": str(resolve_path(args.path, ctx.roots))}]

    async def precondition(self, args: WriteArgs, ctx: ToolContext) -> ToolResult | None:
        return (await self._current(args, ctx))[1]

    async def _current(self, args: WriteArgs, ctx: ToolContext) -> tuple[FileSnapshot | None, ToolResult | None]:
        if has_surrogates(args.content):
            return None, ToolResult.error("`content` contains lone surrogate code points; send valid Unicode text.")
        return await _current_for_change(resolve_path(args.path, ctx.roots), ctx, "write", must_exist=False)

    async def execute(self, args: WriteArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_path(args.path, ctx.roots)
        shown = display_path(path, ctx.roots)
        current, error = await self._current(args, ctx)
        if error:
            return error
        notes: list[str] = []
        if current is None:
            raw = encode_text(args.content, bom=False)
            old_text = None
        else:
            try:
                view: TextView | None = decode_text(current.raw)
            except NotTextError:
                view = None
            old_text = view.model_text if view else _model_text(current.raw)
            text = args.content
            if view and view.newline == "crlf" and "\r" not in text and "\n" in text:
                text = lf_to(text, "\r\n")
                notes.append("Line endings were written as CRLF, like the rest of the file.")
            bom = bool(view and view.bom) and not text.startswith("\ufeff")
            if bom:
                notes.append("The file's UTF-8 BOM was kept.")
            raw = encode_text(text, bom=bom)
            if raw == current.raw:
                return ToolResult(
                    f"No change: {shown} already has exactly this content.",
                    locations=self.locations(args, ctx),
                    meta={"changed": False},
                )
        error, landed_notes = await _commit(path, raw, current, ctx)
        if error:
            return error
        new_text = _model_text(raw)
        verb = "Created" if current is None else "Wrote"
        summary = f"{verb} {shown} ({_count_lines(new_text)} lines, {len(raw):,} bytes)."
        return ToolResult(
            " ".join([summary, *notes, *landed_notes]),
            content=[_diff(path, old_text, new_text)],
            locations=[{"path": str(path), "line": 1}],
            meta={"created": current is None, "bytes": len(raw)},
        )


class _EditPlan(NamedTuple):
    """An edit that passed every check: the file it was checked on, its text, the spans to
    replace, and whether they were found with CRLF read as LF."""

    current: FileSnapshot
    view: TextView
    spans: list[tuple[int, int]]
    folded: bool


class EditTool(Tool):
    """``edit(path, old_string, new_string, replace_all=false)``."""

    name = "edit"
    description = (
        "Replace an exact piece of text in a file. `old_string` must match the file's text "
        "literally (as `read` showed it, without the line-number prefix) and occur exactly once, "
        "unless `replace_all` is true; include enough surrounding lines to make it unique. The file "
        "must have been read in this session and be unchanged since. Line endings and a BOM are kept."
    )
    Args = EditArgs
    kind = "edit"
    concurrency_safe = False
    default_timeout = 30.0

    def title(self, args: EditArgs, ctx: ToolContext) -> str:
        return f"Edit {display_path(resolve_path(args.path, ctx.roots), ctx.roots)}"

    def locations(self, args: EditArgs, ctx: ToolContext) -> list[dict[str, Any]]:
        return [{"path": str(resolve_path(args.path, ctx.roots))}]

    async def precondition(self, args: EditArgs, ctx: ToolContext) -> ToolResult | None:
        plan = await self._plan(args, ctx)
        return plan if isinstance(plan, ToolResult) else None

    async def _plan(self, args: EditArgs, ctx: ToolContext) -> "ToolResult | _EditPlan":
        """Every check of the edit, on the file as it is now: the error result, or what to splice."""
        path = resolve_path(args.path, ctx.roots)
        shown = display_path(path, ctx.roots)
        if not args.old_string:
            return ToolResult.error(
                "`old_string` is empty. Give the exact text to replace; to create or replace a "
                "whole file use `write`."
            )
        if args.old_string == args.new_string:
            return ToolResult.error("`old_string` and `new_string` are identical: there is nothing to change.")
        if has_surrogates(args.new_string):
            return ToolResult.error("`new_string` contains lone surrogate code points; send valid Unicode text.")
        current, error = await _current_for_change(path, ctx, "edit", must_exist=True)
        if error:
            return error
        assert current is not None
        try:
            view = decode_text(current.raw)
        except NotTextError as exc:
            return not_text_result(shown, exc, "edit")
        spans, folded = find_spans(view.text, args.old_string, crlf=view.crlf > 0)
        if not spans:
            return ToolResult.error(
                f"`old_string` was not found in {shown}.{no_match_hint(view, args.old_string)}",
                matches=0,
            )
        if len(spans) > 1 and not args.replace_all:
            lines = [view.text.count("\n", 0, a) + 1 for a, _ in spans]
            listed = ", ".join(str(n) for n in lines[:20]) + (" …" if len(lines) > 20 else "")
            return ToolResult.error(
                f"`old_string` occurs {len(spans)} times in {shown} (at lines {listed}). Include more "
                "surrounding text to pick one, or set replace_all=true to replace all of them.",
                matches=len(spans),
            )
        return _EditPlan(current, view, spans, folded)

    async def execute(self, args: EditArgs, ctx: ToolContext) -> ToolResult:
        path = resolve_path(args.path, ctx.roots)
        shown = display_path(path, ctx.roots)
        plan = await self._plan(args, ctx)
        if isinstance(plan, ToolResult):
            return plan
        current, view, spans, folded = plan
        new_text, changed = splice(view.text, spans, args.new_string, view)
        raw = encode_text(new_text, bom=view.bom)
        error, landed_notes = await _commit(path, raw, current, ctx)
        if error:
            return error
        ranges = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in changed[:20])
        if len(changed) > 20:
            ranges += " …"
        count = f"{len(spans)} occurrence{'s' if len(spans) != 1 else ''}"
        lines_word = "line" if len(changed) == 1 and changed[0][0] == changed[0][1] else "lines"
        parts = [f"Edited {shown}: replaced {count}; changed {lines_word} {ranges}."]
        if folded:
            parts.append("(`old_string` was matched with the file's CRLF line endings read as LF; CRLF was kept.)")
        parts.append(snippet(new_text, changed[0]))
        parts.extend(landed_notes)
        return ToolResult(
            "\n".join(parts),
            content=[_diff(path, view.model_text, _model_text(raw))],
            locations=[{"path": str(path), "line": changed[0][0]}],
            meta={"replacements": len(spans), "crlf_folded": folded},
        )
