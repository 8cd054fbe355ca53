"""Where two texts differ, in time linear in their length, and the ACP ``diff`` a big change shows.

Role: ``common_prefix`` / ``common_suffix`` (compared a block at a time, in C), ``changed_region``
(the one span that holds every difference) and ``diff_content``: the ACP ``diff`` tool-call content
of a change — the whole old and new text when both together are at most ``FULL_DIFF_CHARS``
characters; else only the changed region with ``CONTEXT_LINES`` lines around it, each side at most
``REGION_CHARS``, marked ``_meta.agentServer.diff: {partial: true, oldLine, newLine, column?, truncated?}``
(``oldLine``/``newLine``: the 1-based line of the file where ``oldText``/``newText`` start, ``column``
the 1-based column there when they start inside a long line;
docs/protocol.md "Updates during a turn").

Must never: read the whole of a big text more than a few times (no difflib over it), or show a
partial diff without saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

FULL_DIFF_CHARS = 1 << 20
"""Old and new text together up to this many characters: the diff carries both whole."""
CONTEXT_LINES = 5
REGION_CHARS = 256 * 1024
_BLOCK = 1 << 16


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    i = 0
    while i < n:
        j = min(n, i + _BLOCK)
        if a[i:j] == b[i:j]:
            i = j
            continue
        lo, hi = i, j  # a[:lo] == b[:lo], a[:hi] != b[:hi]
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[lo:mid] == b[lo:mid]:
                lo = mid
            else:
                hi = mid
        return lo
    return n


def common_suffix(a: str, b: str, limit: int | None = None) -> int:
    """Length of the longest common suffix of ``a`` and ``b``, at most ``limit``."""
    n = min(len(a), len(b)) if limit is None else min(len(a), len(b), limit)
    la, lb = len(a), len(b)
    k = 0
    while k < n:
        m = min(n, k + _BLOCK)
        if a[la - m:la - k] == b[lb - m:lb - k]:
            k = m
            continue
        lo, hi = k, m
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
                lo = mid
            else:
                hi = mid
        return lo
    return n


def changed_region(old: str, new: str) -> tuple[int, int, int, int]:
    """``(old_start, old_end, new_start, new_end)``: everything outside is common to both."""
    p = common_prefix(old, new)
    s = common_suffix(old, new, min(len(old), len(new)) - p)
    return p, len(old) - s, p, len(new) - s


def _line_start_before(text: str, offset: int, extra: int) -> int:
    """The start of the line holding ``offset``, then ``extra`` lines further up."""
    start = text.rfind("\n", 0, offset) + 1
    for _ in range(extra):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
    return start


def _line_end_after(text: str, offset: int, extra: int) -> int:
    """Just past the line break ending the line holding ``offset`` (``offset`` itself when it is
    a line start), then ``extra`` lines further down; the text's end at most."""
    end = offset
    if end > 0 and text[end - 1] != "\n":
        found = text.find("\n", end)
        end = len(text) if found < 0 else found + 1
    for _ in range(extra):
        if end >= len(text):
            break
        found = text.find("\n", end)
        end = len(text) if found < 0 else found + 1
    return end


def _cut(text: str, limit: int) -> tuple[str, bool]:
    """``text`` up to ``limit`` characters, ended at a line break when one is in the last half."""
    if len(text) <= limit:
        return text, False
    nl = text.rfind("\n", limit // 2, limit)
    return text[: nl + 1 if nl >= 0 else limit], True


def diff_content(path: Path | str, old: str | None, new: str) -> dict[str, Any]:
    """The ACP ``diff`` content of changing ``path`` from ``old`` (``None``: a new file) to
    ``new``: whole when small, else the changed region with context (see the module)."""
    if len(old or "") + len(new) <= FULL_DIFF_CHARS:
        return {"type": "diff", "path": str(path), "oldText": old, "newText": new}
    if old is None:
        shown, cut = _cut(new, REGION_CHARS)
        meta: dict[str, Any] = {"partial": True, "oldLine": 1, "newLine": 1}
        if cut:
            meta["truncated"] = True
        return {"type": "diff", "path": str(path), "oldText": None, "newText": shown,
                "_meta": {"agentServer": {"diff": meta}}}
    a0, a1, b0, b1 = changed_region(old, new)
    start = _line_start_before(old, a0, CONTEXT_LINES)  # the prefix is common: the same in new
    column = None
    if a0 - start > REGION_CHARS // 2:
        # a long line (a minified file): the region starts in it, before the change, never at the
        # line's start, which would cut both sides to the same text
        column = a0 - REGION_CHARS // 4 - old.rfind("\n", 0, a0) - 1
        start = a0 - REGION_CHARS // 4
    old_end = _line_end_after(old, a1, CONTEXT_LINES)
    tail = old_end - a1  # the suffix is common: as far into new
    old_text, cut_old = _cut(old[start:old_end], REGION_CHARS)
    new_text, cut_new = _cut(new[start:b1 + tail], REGION_CHARS)
    line = old.count("\n", 0, start) + 1
    meta = {"partial": True, "oldLine": line, "newLine": line}
    if column is not None:
        meta["column"] = column + 1
    if cut_old or cut_new:
        meta["truncated"] = True
    return {"type": "diff", "path": str(path), "oldText": old_text, "newText": new_text,
            "_meta": {"agentServer": {"diff": meta}}}
