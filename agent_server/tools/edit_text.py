"""The text work of ``edit``: find ``old_string`` literally, splice ``new_string`` in with the
file's line endings, and word what the model sees (the changed lines, a hint when nothing matched).

Role: pure functions over decoded text (``tools.text``); ``write_edit`` does the file work.

Must never: change a character outside the matched spans, or match anything but the literal text.
"""

from __future__ import annotations

import re

from .base import one_line
from .text import LfView, TextView, lf_to

_SNIPPET_CONTEXT = 3
_SNIPPET_MAX_LINES = 24
_SNIPPET_LINE_CHARS = 300
_LINE_NUMBER_PREFIX = re.compile(r"^\s*\d+\t", re.MULTILINE)


def find_spans(text: str, old: str, *, crlf: bool) -> tuple[list[tuple[int, int]], bool]:
    """Non-overlapping occurrences of ``old`` in ``text`` as ``(start, end)`` indexes, and whether
    they were found in the LF-folded view (``old`` uses ``\\n`` only and ``text`` has CRLF)."""
    spans = _occurrences(text, old)
    if spans or not crlf or "\r" in old or "\n" not in old:
        return spans, False
    lv = LfView(text)
    folded = [(lv.to_original(a), lv.to_original(b)) for a, b in _occurrences(lv.text, old)]
    return folded, bool(folded)


def _occurrences(text: str, needle: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = text.find(needle)
    while pos >= 0:
        spans.append((pos, pos + len(needle)))
        pos = text.find(needle, pos + len(needle))
    return spans


def _newline_for(region: str, view: TextView) -> str:
    """Line break for LF-only replacement text: the region's own style if it has line breaks,
    else the file's dominant one."""
    crlf = region.count("\r\n")
    lf = region.count("\n") - crlf
    if crlf or lf:
        return "\r\n" if crlf >= lf else "\n"
    return view.dominant_newline


def splice(
    text: str, spans: list[tuple[int, int]], new: str, view: TextView
) -> tuple[str, list[tuple[int, int]]]:
    """``text`` with every span replaced by ``new`` (its LF breaks adapted to the region's line
    endings), and the 1-based ``(first, last)`` line each replacement occupies in the new text."""
    out: list[str] = []
    changed: list[tuple[int, int]] = []
    pos = 0
    line_shift = 0
    for a, b in spans:
        replacement = lf_to(new, _newline_for(text[a:b], view))
        out.append(text[pos:a])
        first = text.count("\n", 0, a) + 1 + line_shift
        body_lines = replacement.count("\n") - (1 if replacement.endswith("\n") else 0)
        changed.append((first, first + max(0, body_lines)))
        out.append(replacement)
        line_shift += replacement.count("\n") - text.count("\n", a, b)
        pos = b
    out.append(text[pos:])
    return "".join(out), changed


def snippet(new_text: str, changed: tuple[int, int]) -> str:
    """A few numbered lines around a change, for the model to check the result."""
    lines = new_text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    first = max(1, changed[0] - _SNIPPET_CONTEXT)
    last = min(len(lines), changed[1] + _SNIPPET_CONTEXT, first + _SNIPPET_MAX_LINES - 1)
    rows = []
    for n in range(first, last + 1):
        # the "\r" of a CRLF goes; a lone "\r" ending the file (no "\n" after it) is shown as it is
        line = lines[n - 1].removesuffix("\r") if n < len(lines) or new_text.endswith("\n") else lines[n - 1]
        if len(line) > _SNIPPET_LINE_CHARS:
            line = line[:_SNIPPET_LINE_CHARS] + f" … [{len(line) - _SNIPPET_LINE_CHARS:,} more characters]"
        rows.append(f"{n:>6}\t{line}")
    return "Result:\n" + "\n".join(rows)


def no_match_hint(view: TextView, old: str) -> str:
    """Why an ``old_string`` may not have matched, and the closest line of the file."""
    hints: list[str] = []
    if _LINE_NUMBER_PREFIX.search(old):
        hints.append("It seems to contain line-number prefixes from `read` output; leave them out.")
    if "\ufeff" in old:
        hints.append("Leave out the byte-order mark (U+FEFF).")
    stripped = old.strip()
    if stripped and stripped != old and stripped in view.text:
        line = view.text.count("\n", 0, view.text.find(stripped)) + 1
        hints.append(f"It matches at line {line} if its leading/trailing whitespace is dropped.")
    probe = next((ln.strip() for ln in old.split("\n") if ln.strip()), "")
    if probe and len(probe) <= 2000:
        lines = view.lines()[:50_000]
        candidates = {ln.strip(): i for i, ln in reversed(list(enumerate(lines, 1))) if 0 < len(ln) <= 2000}
        import difflib

        best = difflib.get_close_matches(probe, list(candidates), n=1, cutoff=0.6)
        if best:
            hints.append(f"The closest line is line {candidates[best[0]]}: `{one_line(best[0], 200)}`.")
    hints.append("Read the file again and copy the text exactly (whitespace and indentation included).")
    return " " + " ".join(hints)
