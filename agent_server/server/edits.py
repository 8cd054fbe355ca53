"""Text changes as LSP ``WorkspaceEdit``\\s, in the negotiated position encoding.

Role: ``text_edits(old, new, encoding)`` turns a whole-text change into the minimal list of
``TextEdit``\\s — one per contiguous change (a hunk, which the editor can accept or reject on its
own) — with zero-based ranges against ``old`` counted in ``utf-16`` (LSP's default), ``utf-8`` or
``utf-32`` units; ``workspace_edit(...)`` wraps them (or a ``CreateFile`` + insert) in a
``WorkspaceEdit`` built with lsprotocol types; ``apply_text_edits`` applies edits to a text (to
learn what really landed from the editor's ``applied`` answer).

Must never: put a position inside a line break (between ``\\r`` and ``\\n``) or split a UTF-16
surrogate pair; count lines other than the client does: LSP ends a line at ``\\n``, ``\\r\\n`` and a
lone ``\\r`` (``line_breaks="lsp"``, the default), Neovim's LSP client counts its buffer's rows, which
end only at ``\\n`` and hold a lone ``\\r`` as text (``"lf"``); U+2028, U+0085 or a form feed end
no line for either.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ENCODINGS = ("utf-16", "utf-8", "utf-32")
_BREAK = re.compile(r"\r\n|\r|\n")
_LF = re.compile(r"\n")
LINE_BREAKS = ("lsp", "lf")
"""How positions count lines: ``lsp`` (``\\r\\n``, ``\\r`` and ``\\n`` end one), ``lf`` (only ``\\n``)."""


def _lines(text: str) -> list[str]:
    """Lines with their terminators, split the LSP way (``\\r\\n``, ``\\r``, ``\\n`` only)."""
    out, start = [], 0
    for match in _BREAK.finditer(text):
        out.append(text[start:match.end()])
        start = match.end()
    if start < len(text) or not out:
        out.append(text[start:])
    return out


def units(text: str, encoding: str) -> int:
    """Length of ``text`` in code units of ``encoding`` (``utf-16``, ``utf-8`` or ``utf-32``)."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-16":
        return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    raise ValueError(f"unknown position encoding {encoding!r}")


class _Index:
    """Offsets of line starts of one text, for offset ↔ position conversion."""

    def __init__(self, text: str, line_breaks: str = "lsp") -> None:
        self.text = text
        self.ends = "\r\n" if line_breaks == "lsp" else "\n"
        self.starts = [0] + [m.end() for m in (_BREAK if line_breaks == "lsp" else _LF).finditer(text)]

    def offset(self, line: int, character: int, encoding: str) -> int:
        """Offset of an LSP position; past the end of a line (or the text) clamps, as LSP says."""
        if line >= len(self.starts):
            return len(self.text)
        start = self.starts[line]
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        body_end = end
        if self.ends == "\n":
            body_end -= end > start and self.text[end - 1] == "\n"
        while self.ends != "\n" and body_end > start and self.text[body_end - 1] in "\r\n":
            body_end -= 1
        count = 0
        for index in range(start, body_end):
            if count >= character:
                return index
            count += units(self.text[index], encoding)
        return body_end


BIG_TEXT_CHARS = 1 << 20
"""Old and new text together over this many characters: only the changed region is diffed."""
MIDDLE_LINES = 5000
"""A big text's changed region (what lies between the common prefix and suffix) of at most this
many lines a side is diffed line by line; a longer one is one hunk."""


def _hunks(old: str, new: str) -> list[tuple[int, int, int, int]]:
    """Changed regions as ``(old_start, old_end, new_start, new_end)`` character offsets. A big
    text (``BIG_TEXT_CHARS``) is cut to the lines between its common prefix and suffix first, in
    linear time, so a one-line edit of a 30 MB file does not run difflib over 2.5 M lines."""
    if len(old) + len(new) <= BIG_TEXT_CHARS:
        return _line_hunks(old, new)
    from agent_server.tools.diff_view import changed_region

    a0, a1, b0, b1 = changed_region(old, new)
    start = old.rfind("\n", 0, a0) + 1  # a line start, common to both
    tail = 0
    if a1 > 0 and old[a1 - 1] != "\n":  # to the end of the line, inside the common suffix
        found = old.find("\n", a1)
        tail = (len(old) if found < 0 else found + 1) - a1
    middle_old, middle_new = old[start:a1 + tail], new[start:b1 + tail]
    if middle_old.count("\n") <= MIDDLE_LINES and middle_new.count("\n") <= MIDDLE_LINES:
        return [(x0 + start, x1 + start, y0 + start, y1 + start)
                for x0, x1, y0, y1 in _line_hunks(middle_old, middle_new)]
    return [] if a0 == a1 and b0 == b1 else [_trim(old, new, a0, a1, b0, b1)]


def _line_hunks(old: str, new: str) -> list[tuple[int, int, int, int]]:
    """``_hunks`` by difflib over every line of ``old`` and ``new``."""
    import difflib  # loaded with the first edit proposal, not with the server

    a, b = _lines(old), _lines(new)
    a_off = [0]
    for line in a:
        a_off.append(a_off[-1] + len(line))
    b_off = [0]
    for line in b:
        b_off.append(b_off[-1] + len(line))
    regions: list[list[int]] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        region = [a_off[i1], a_off[i2], b_off[j1], b_off[j2]]
        if regions and regions[-1][1] == region[0] and regions[-1][3] == region[2]:
            regions[-1][1], regions[-1][3] = region[1], region[3]  # adjacent: one hunk
        else:
            regions.append(region)
    return [_trim(old, new, *r) for r in regions]


def _trim(old: str, new: str, a0: int, a1: int, b0: int, b1: int) -> tuple[int, int, int, int]:
    """Shrink a hunk by its common prefix and suffix, never leaving an end inside ``\r\n``."""
    while a0 < a1 and b0 < b1 and old[a0] == new[b0]:
        a0, b0 = a0 + 1, b0 + 1
    while a1 > a0 and b1 > b0 and old[a1 - 1] == new[b1 - 1]:
        a1, b1 = a1 - 1, b1 - 1
    if 0 < a0 < len(old) and old[a0 - 1] == "\r" and old[a0] == "\n":
        a0, b0 = a0 - 1, b0 - 1  # give back the common "\r"
    if 0 < a1 < len(old) and old[a1 - 1] == "\r" and old[a1] == "\n":
        a1, b1 = a1 + 1, b1 + 1  # take back the common "\n"
    return a0, a1, b0, b1


def _line_start(text: str, offset: int, line_breaks: str = "lsp") -> tuple[int, int]:
    """The line ``offset`` lies on and where that line starts, as ``_Index`` counts them (``\r\n``,
    ``\r`` and ``\n`` each end a line; an offset between ``\r`` and ``\n`` is on the ``\r``'s line),
    counted by ``str`` methods in C: a hunk of a 30 MB text needs no list of 2.5 M line starts."""
    if line_breaks == "lf":
        return text.count("\n", 0, offset), text.rfind("\n", 0, offset) + 1
    end = offset - 1 if 0 < offset < len(text) and text[offset - 1] == "\r" and text[offset] == "\n" else offset
    line = text.count("\n", 0, end) + text.count("\r", 0, end) - text.count("\r\n", 0, end)
    last = max(text.rfind("\n", 0, end), text.rfind("\r", 0, end))
    return line, last + 1


def text_edits(old: str, new: str, encoding: str = "utf-16", line_breaks: str = "lsp") -> list[dict[str, Any]]:
    """LSP ``TextEdit`` dicts turning ``old`` into ``new``: one per hunk, in document order,
    non-overlapping, ranges against ``old`` (lines counted as ``line_breaks`` says).
    ``[]`` when the texts are equal. Raises ``ValueError`` for an unknown encoding."""
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown position encoding {encoding!r}")

    def position(offset: int) -> dict[str, int]:
        line, start = _line_start(old, offset, line_breaks)
        return {"line": line, "character": units(old[start:offset], encoding)}
    return [{"range": {"start": position(a0), "end": position(a1)}, "newText": new[b0:b1]}
            for a0, a1, b0, b1 in _hunks(old, new)]


def apply_text_edits(text: str, edits: list[dict[str, Any]], encoding: str = "utf-16",
                     line_breaks: str = "lsp") -> str:
    """Apply LSP ``TextEdit`` dicts (ranges against ``text``, non-overlapping, lines counted as
    ``line_breaks`` says) and return the result. Raises ``ValueError`` for overlapping edits or an
    unknown encoding."""
    index = _Index(text, line_breaks)
    spans = []
    for edit in edits:
        start, end = edit["range"]["start"], edit["range"]["end"]
        if min(start["line"], start["character"], end["line"], end["character"]) < 0 or \
                not isinstance(edit["newText"], str):
            raise ValueError("a text edit with a negative position or no newText")
        a0 = index.offset(start["line"], start["character"], encoding)
        a1 = index.offset(end["line"], end["character"], encoding)
        spans.append((a0, max(a0, a1), edit["newText"]))
    spans.sort(key=lambda s: (s[0], s[1]))
    out, cursor = [], 0
    for a0, a1, new_text in spans:
        if a0 < cursor:
            raise ValueError("overlapping text edits")
        out.append(text[cursor:a0])
        out.append(new_text)
        cursor = a1
    out.append(text[cursor:])
    return "".join(out)


def file_uri(path: Path | str) -> str:
    """``file://`` URI of an absolute path (percent-encoded as editors expect)."""
    return Path(path).as_uri()


def workspace_edit(path: Path | str, old: str | None, new: str, *, version: int | None,
                   encoding: str = "utf-16", line_breaks: str = "lsp") -> dict[str, Any]:
    """The ``WorkspaceEdit`` (``documentChanges`` only) changing the file at ``path`` from ``old``
    to ``new``; ``old=None`` means a new file: ``CreateFile`` then one insert. Built with lsprotocol
    types and returned as JSON-ready dicts."""
    from lsprotocol import converters
    from lsprotocol import types as lsp

    uri = file_uri(path)
    changes: list[Any] = []
    if old is None:
        changes.append(lsp.CreateFile(uri=uri, options=lsp.CreateFileOptions(overwrite=False, ignore_if_exists=False)))
        edits = [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                  "newText": new}] if new else []
        version = None
    else:
        edits = text_edits(old, new, encoding, line_breaks)
    changes.append(lsp.TextDocumentEdit(
        text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
        edits=[lsp.TextEdit(range=lsp.Range(start=lsp.Position(**e["range"]["start"]),
                                            end=lsp.Position(**e["range"]["end"])),
                            new_text=e["newText"]) for e in edits],
    ))
    return converters.get_converter().unstructure(lsp.WorkspaceEdit(document_changes=changes))
