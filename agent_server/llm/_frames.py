"""Decoding the ``data:`` payloads of one stream, cheaply when frames repeat their shape.

Role: a provider streams thousands of ``chat.completion.chunk`` frames that differ only in the one
string they carry (``{"id":"x",…,"choices":[{"index":0,"delta":{"content":"<here>"},…}]}``).
``FrameDecoder`` parses a frame in full with ``json`` and, when the frame's only effect on the
assembler is one text or reasoning delta, learns it as a *shape*: the bytes before and after that
string. A later frame with the same bytes around one JSON string literal is the same object with
another string in that place (JSON is a grammar of tokens: swapping one string token for another
changes nothing else), so only that literal is parsed (``json.decoder.scanstring``). A shape is
learned only after checking it: the frame with the empty string put in that place must parse to
the frame's object with that one field emptied (this also finds the effective one of duplicated
keys). Anything else — another shape, an invalid literal, a frame with more in it — is parsed in
full, exactly as before. A stream whose frames never repeat their shape (a random per-frame
field) stops learning after a few tries, so it costs at most a few extra parses.

Must never: give a result that a full ``json.loads`` of the frame would not give, or decide what a
frame means (the assembler does).
"""

from __future__ import annotations

import json
from json.decoder import scanstring
from typing import Any

__all__ = ["FrameDecoder", "TEXT", "REASONING"]

TEXT = "content"
REASONING = "reasoning"

_FIELDS = ("content", "reasoning_content", "reasoning")
_INERT_DELTA_KEYS = frozenset({"role", "refusal", "tool_calls", "function_call", "audio", *_FIELDS})
_GIVE_UP_AFTER = 8
"""Shapes learned that never served a frame before the decoder stops learning."""


class FrameDecoder:
    """Decodes one stream's ``data:`` payloads (single use, like the stream's assembler).

    ``decode(data)`` returns ``(field, text)`` — ``TEXT`` or ``REASONING`` and the delta's string
    (maybe empty) — for a frame of a learned shape, else ``None``: parse it with ``json.loads``,
    feed it to the assembler, and call ``learn(data, chunk)``.
    """

    def __init__(self) -> None:
        self.shapes: list[tuple[str, str, str, int, int]] = []
        """The learned shapes, the one in use first: ``(before, after, field, len(before),
        len(before) + len(after))``."""
        self._learning = True
        self._useless = 0  # shapes learned that served no frame yet

    def decode(self, data: str) -> tuple[str, str] | None:
        """``(TEXT | REASONING, text)`` for a frame of a learned shape, else ``None``."""
        for shape in self.shapes:
            before, after, field, start, size = shape
            if len(data) > size and data.startswith(before) and data.endswith(after) and data[start] == '"':
                try:
                    text, stop = scanstring(data, start + 1)
                except ValueError:
                    return None
                if stop != len(data) - len(after):
                    continue
                if shape is not self.shapes[0]:  # the shape in use first
                    self.shapes.remove(shape)
                    self.shapes.insert(0, shape)
                self._useless = 0
                return field, text
        return None

    def learn(self, data: str, chunk: Any) -> bool:
        """Learn the shape of ``data`` (its full parse is ``chunk``) if its only effect is one
        non-empty text or reasoning string; whether ``shapes`` changed."""
        if not self._learning:
            return False
        found = _only_delta(chunk)
        if found is None:
            return False
        key, value = found
        shape = _locate(data, chunk, key, value)
        if shape is None:
            return False
        before, after = shape
        field = TEXT if key == "content" else REASONING
        self.shapes = [s for s in self.shapes if s[2] != field][:1]
        self.shapes.insert(0, (before, after, field, len(before), len(before) + len(after)))
        self._useless += 1
        if self._useless > _GIVE_UP_AFTER:
            self._learning = False
            self.shapes = []
        return True


def _only_delta(chunk: Any) -> tuple[str, str] | None:
    """``(key, value)`` when ``chunk``'s only effect on the assembler is one non-empty string
    delta (``content``, ``reasoning_content`` or ``reasoning``), else ``None``."""
    if type(chunk) is not dict or chunk.get("error") or isinstance(chunk.get("usage"), dict):
        return None
    x_groq = chunk.get("x_groq")
    if isinstance(x_groq, dict) and x_groq.get("usage") is not None:
        return None
    choices = chunk.get("choices")
    if type(choices) is not list or len(choices) != 1:
        return None
    choice = choices[0]
    if type(choice) is not dict or choice.get("index") not in (0, None) or choice.get("finish_reason") is not None:
        return None
    delta = choice.get("delta")
    if type(delta) is not dict or not set(delta) <= _INERT_DELTA_KEYS:
        return None
    if delta.get("refusal") or delta.get("tool_calls") is not None or delta.get("function_call") is not None:
        return None
    live = [k for k in _FIELDS if type(delta.get(k)) is str and delta[k]]
    if len(live) != 1 or any(delta.get(k) not in (None, "") for k in _FIELDS if k != live[0]):
        return None
    return live[0], delta[live[0]]


def _locate(data: str, chunk: dict[str, Any], key: str, value: str) -> tuple[str, str] | None:
    """``(before, after)``: the bytes of ``data`` around the literal of ``chunk``'s delta
    ``key``, checked by parsing ``before + '""' + after``; ``None`` when not found."""
    needle = f'"{key}"'
    at = data.find(needle)
    while at >= 0:
        pos = at + len(needle)
        while pos < len(data) and data[pos] in " \t\r\n":
            pos += 1
        if pos < len(data) and data[pos] == ":":
            pos += 1
            while pos < len(data) and data[pos] in " \t\r\n":
                pos += 1
            if pos < len(data) and data[pos] == '"':
                try:
                    text, end = scanstring(data, pos + 1)
                except ValueError:
                    text, end = None, 0
                if text == value and _checked(data[:pos], data[end:], chunk, key):
                    return data[:pos], data[end:]
        at = data.find(needle, at + 1)
    return None


def _checked(before: str, after: str, chunk: dict[str, Any], key: str) -> bool:
    try:
        emptied = json.loads(before + '""' + after)
    except ValueError:
        return False
    expected = {**chunk, "choices": [{**chunk["choices"][0], "delta": {**chunk["choices"][0]["delta"], key: ""}}]}
    return bool(emptied == expected)
