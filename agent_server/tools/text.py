"""Byte-faithful text: how a file's bytes become the text the model sees, and back.

Role: pure helpers (no I/O) that decode a file's raw bytes into a ``TextView`` — UTF-8 BOM stripped,
line endings counted, binary refused — and encode text back so that an unchanged text yields the
very same bytes (the BOM restored exactly once, CRLF / LF / mixed / lone ``\\r`` and a missing final
newline kept). Also the line-ending helpers ``edit`` and ``write`` use to keep a file's style.

Must never: lose, add or reorder a byte of a file on a round trip ``encode_text(decode_text(raw))``.

Invalid UTF-8 is tolerated in small amounts (a stray Latin-1 byte in a comment): such bytes are
kept internally as lone surrogates (``surrogateescape``) so they are written back unchanged, and
the model sees U+FFFD in their place (``TextView.model_text``).
"""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass
from typing import Literal

BOM = b"\xef\xbb\xbf"
#: How many leading bytes are inspected for NUL bytes (binary detection).
BINARY_SNIFF_BYTES = 8192
#: Invalid UTF-8 bytes tolerated in a text file: at most this many …
MAX_INVALID_BYTES = 16
#: … and at most this fraction of the file's bytes.
MAX_INVALID_FRACTION = 0.01

NewlineStyle = Literal["lf", "crlf", "cr", "mixed", "none"]

_SURROGATES = re.compile("[\ud800-\udfff]")


class NotTextError(ValueError):
    """The bytes are not a text file this server edits (binary, or not UTF-8). ``str(err)`` is a
    sentence the model can read."""


def not_utf8(detail: str) -> NotTextError:
    """The refusal of a file that is not UTF-8 text, ``detail`` saying why (the one wording, whether
    the disk's bytes or the editor said so)."""
    return NotTextError(f"the file is not UTF-8 text ({detail})")


@dataclass(frozen=True)
class TextView:
    """A decoded text file.

    ``text``: the content without the BOM; line endings exactly as in the file; undecodable bytes
    as lone surrogates U+DC80..U+DCFF (so ``encode_text`` restores them). ``bom``: the file started
    with a UTF-8 BOM. ``crlf`` / ``lf`` / ``cr``: counts of ``\\r\\n``, lone ``\\n`` and lone ``\\r``.
    ``final_newline``: the text ends with ``\\n`` (or a lone ``\\r``). ``invalid_bytes``: how many
    bytes were not valid UTF-8.
    """

    text: str
    bom: bool
    crlf: int
    lf: int
    cr: int
    final_newline: bool
    invalid_bytes: int = 0

    @property
    def newline(self) -> NewlineStyle:
        """``"crlf"``/``"lf"``/``"cr"`` when the file uses only that ending, ``"mixed"`` for more
        than one kind, ``"none"`` for a file without any line break."""
        kinds = [k for k, n in (("crlf", self.crlf), ("lf", self.lf), ("cr", self.cr)) if n]
        if not kinds:
            return "none"
        return kinds[0] if len(kinds) == 1 else "mixed"  # type: ignore[return-value]

    @property
    def dominant_newline(self) -> str:
        """The line break to use for new lines: ``"\\r\\n"`` when CRLF is at least as common as
        lone LF, else ``"\\n"`` (also for files without line breaks)."""
        return "\r\n" if self.crlf and self.crlf >= self.lf else "\n"

    @property
    def model_text(self) -> str:
        """``text`` as shown to the model: undecodable bytes replaced by U+FFFD."""
        return replace_surrogates(self.text) if self.invalid_bytes else self.text

    def lines(self) -> list[str]:
        """The lines as ``read`` numbers them: split on ``\\n`` (like ``cat -n``, ``sed``, ``rg``),
        a trailing ``\\r`` of a CRLF line removed, no empty last entry for a final newline. A lone
        ``\\r`` stays in its line — inside it, and at the very end of a file (no ``\\n`` after it: not a
        CRLF). An empty file has no lines."""
        if not self.text:
            return []
        parts = self.text.split("\n")
        last = parts.pop()  # what follows the last "\n" (all of a one-line file): no CRLF can end it
        return [p[:-1] if p.endswith("\r") else p for p in parts] + ([last] if last else [])


def replace_surrogates(text: str) -> str:
    """Replace lone surrogates (undecodable bytes) with U+FFFD so the text is valid Unicode."""
    return _SURROGATES.sub("\ufffd", text)


def has_surrogates(text: str) -> bool:
    """Whether ``text`` contains a lone surrogate code point (not valid in a UTF-8 file)."""
    return _SURROGATES.search(text) is not None


def decode_text(raw: bytes, *, tolerate_invalid: bool = True) -> TextView:
    """Decode a file's bytes for the model.

    Raises ``NotTextError`` when the file looks binary: a NUL byte in the first 8 KB, or more
    invalid UTF-8 than the tolerance (16 bytes and 1 % of the file; none when not
    ``tolerate_invalid`` — text an editor holds cannot keep an undecodable byte).
    """
    bom = raw.startswith(BOM)
    body = raw[len(BOM) :] if bom else raw
    nul = body.find(b"\x00", 0, BINARY_SNIFF_BYTES)
    if nul >= 0:
        raise NotTextError(f"the file looks binary (NUL byte at offset {nul + (3 if bom else 0)})")
    try:
        text = body.decode("utf-8")
        invalid = 0
    except UnicodeDecodeError as exc:
        text = body.decode("utf-8", "surrogateescape")
        invalid = sum(1 for _ in _SURROGATES.finditer(text))
        if (not tolerate_invalid or invalid > MAX_INVALID_BYTES
                or invalid > MAX_INVALID_FRACTION * max(len(body), 1)):
            raise not_utf8(f"{invalid} invalid byte{'s' if invalid != 1 else ''}, first at offset "
                           f"{exc.start + (3 if bom else 0)}") from None
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr = text.count("\r") - crlf
    final = text.endswith("\n") or text.endswith("\r")
    return TextView(text, bom, crlf, lf, cr, final, invalid)


def encode_text(text: str, *, bom: bool) -> bytes:
    """Bytes for ``text``: UTF-8 with undecodable-byte surrogates restored, the BOM prepended when
    ``bom``. ``encode_text(v.text, bom=v.bom) == raw`` for every ``v = decode_text(raw)`` (a file
    whose text itself starts with U+FEFF after its BOM keeps both).

    Raises ``UnicodeEncodeError`` for a surrogate that does not stand for a byte (U+D800..U+DC7F,
    U+DD00..U+DFFF); callers check ``has_surrogates`` on model input first.
    """
    data = text.encode("utf-8", "surrogateescape")
    if bom:
        data = BOM + data
    return data


def lf_to(text: str, newline: str) -> str:
    """Convert a text that uses only ``\\n`` to ``newline``; a text containing any ``\\r`` is
    returned unchanged (it already chose its endings)."""
    if newline == "\n" or "\r" in text or "\n" not in text:
        return text
    return text.replace("\n", newline)


class LfView:
    """``text`` with every ``\\r\\n`` seen as ``\\n``, and a map back to positions in ``text``.

    Used by ``edit`` to match an ``old_string`` written with LF against a CRLF (or mixed) file;
    lone ``\\r`` and lone ``\\n`` are untouched, so only the matched region changes on write.
    """

    def __init__(self, text: str) -> None:
        self.original = text
        self.text = text.replace("\r\n", "\n")
        # normalised positions of the "\n"s that were "\r\n" in the original
        self._removed: list[int] = []
        pos = shift = 0
        while True:
            i = text.find("\r\n", pos)
            if i < 0:
                break
            self._removed.append(i - shift)
            shift += 1
            pos = i + 2

    def to_original(self, index: int) -> int:
        """Original index of normalised ``index`` (a start maps to the ``\\r`` of a CRLF that was
        folded at that position; an end maps just after the folded ``\\n``)."""
        return index + bisect_left(self._removed, index)
