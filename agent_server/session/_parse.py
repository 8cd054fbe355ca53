"""Reading a session log's bytes into events: the bulk parser behind ``EventLog.open`` and
``read_events``.

Role: ``read_log(model, path)`` reads ``events.jsonl`` into its events (every ``\\n``-terminated
line, ``seq`` checked against the line number) and its unterminated tail, a buffer at a time;
``parse_log(model, path, raw)`` does the same for bytes in memory; ``parse_line`` reads one line
through the model (``SessionEvent.model_validate_json``), the reference every fast path must agree
with, and names what is wrong with a bad line. ``model`` is always ``SessionEvent`` (passed in:
``events`` imports this module).

Must never: accept a line the model rejects, read one differently from the model, or let a bad
earlier line pass: the first one raises ``LogCorruptError`` with its 1-based line number.
"""

from __future__ import annotations

import gc
import re
from pathlib import Path
from typing import TYPE_CHECKING

import pydantic_core
from pydantic import BaseModel as _BaseModel
from pydantic import ValidationError

if TYPE_CHECKING:  # events imports this module; the classes are passed in at the call
    from agent_server.session.events import SessionEvent

_KEYS = ("type", "seq", "time", "data")
"""The model's fields in their order: the keys of a line as ``SessionEvent.to_line`` writes it."""

_FIELDS = frozenset(_KEYS)

TYPE_NAME = re.compile(r"[a-z][a-z_]*(/[a-z][a-z_]*)*")
"""The model's pattern for ``type`` (``fullmatch``: Python's ``$`` would let a final ``\\n`` in)."""

SHARE_FROM = 1024
"""A line of this many bytes or more is read by its envelope (``_ENVELOPE``) and its ``data``
shares the parsed object of the last such line of its type when their ``data`` bytes are equal
(the same ``request/header`` logged turn after turn: compared in place, parsed once). Events are
frozen and nothing changes an event's ``data`` in place. Shorter lines are parsed whole."""

_ENVELOPE = re.compile(
    rb'\{"type":"([a-z][a-z_]*(?:/[a-z][a-z_]*)*)","seq":([1-9][0-9]{0,17}),'
    rb'"time":(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?),"data":'
)
"""A line's start exactly as ``SessionEvent.to_line`` writes it, up to its ``data`` object: a
``type`` of the model's pattern, a ``seq`` ≥ 1 and a JSON number as ``time``."""

_SETTERS = tuple(_BaseModel.__dict__[name].__set__ for name in
                 ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))
"""The setters of the slots every pydantic model instance has (a field dict and three more), as
``BaseModel.model_construct`` fills them: called directly, not looked up by name per event."""


class LogCorruptError(Exception):
    """A log line other than a torn last line cannot be read.

    Attributes: ``path`` (the log file), ``line`` (1-based line number), ``reason``.
    """

    def __init__(self, path: Path, line: int, reason: str) -> None:
        super().__init__(f"{path}: line {line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class Tail:
    """The last line of a log when it has no final newline: ``line`` (1-based number), ``raw``
    (its bytes), ``event`` (the event if the line parses whole, else ``None``)."""

    def __init__(self, line: int, raw: bytes, event: SessionEvent | None) -> None:
        self.line = line
        self.raw = raw
        self.event = event


def parse_line(model: type[SessionEvent], path: Path, number: int, line: bytes, *,
               expected_seq: int) -> SessionEvent:
    """Line ``number`` of ``path`` (its bytes without the ``\\n``) read by the model.

    Raises ``LogCorruptError`` naming the line: the model's first complaint (``"data: Input
    should be a valid dictionary"``, ``"Invalid JSON: …"``), or ``"seq 5, expected 4"``.
    """
    try:
        event = model.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise LogCorruptError(path, number, f"{where}: {first['msg']}".lstrip(": ")) from None
    if event.seq != expected_seq:
        raise LogCorruptError(path, number, f"seq {event.seq}, expected {expected_seq}")
    return event


CHUNK = 4 << 20
"""Bytes read at a time (``read_log``): one buffer of this size, reused, instead of the whole file
in memory at once (whose fresh pages cost more to fault in than the parse of some of it)."""


def read_log(model: type[SessionEvent], path: Path) -> tuple[list[SessionEvent], Tail | None, int]:
    """The events and the unterminated tail of the log file at ``path`` (``parse_log`` on its
    bytes, read ``CHUNK`` bytes at a time), and the number of bytes read.

    Raises ``LogCorruptError`` as ``parse_log`` does, ``OSError`` (``FileNotFoundError`` …).
    """
    parser = _Parser(model, path)
    size = 0
    with open(path, "rb", buffering=0) as f:
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        rest = b""  # the start of a line the last chunk cut
        pieces: list[bytes] = []  # a line longer than a chunk, so far
        with parser:
            while (count := f.readinto(buffer)) > 0:
                size += count
                cut = buffer.rfind(b"\n", 0, count)
                if cut < 0:  # no line ends in this chunk
                    pieces.append(bytes(view[:count]))
                    continue
                if pieces or rest:
                    parser.feed(b"".join([rest, *pieces, view[:cut + 1]]))
                    pieces.clear()
                else:
                    parser.feed(bytes(view[:cut + 1]))
                rest = bytes(view[cut + 1:count])
            view.release()
    rest = b"".join([rest, *pieces])
    return parser.events, parser.tail(rest), size


def parse_log(model: type[SessionEvent], path: Path, raw: bytes) -> tuple[list[SessionEvent], Tail | None]:
    """The events of ``raw`` (the bytes of the log at ``path``; ``model`` is ``SessionEvent``),
    one per ``\\n``-terminated line, numbered from 1, and the unterminated tail (``None`` when
    ``raw`` is empty or ends with ``\\n``). Raises ``LogCorruptError`` (the first bad line).

    How a line is read: ``_Parser``.
    """
    parser = _Parser(model, path)
    cut = raw.rfind(b"\n") + 1
    with parser:
        parser.feed(raw if cut == len(raw) else raw[:cut])
    return parser.events, parser.tail(raw[cut:])


class _Parser:
    """The events of a log fed as whole lines (``feed``, any number of times, in order), then
    ``tail`` for what follows the last newline. Use it as a context manager around the feeds.

    Each line is read as the model reads it — ``parse_line`` is the reference — but a line in
    the shape ``to_line`` writes takes a fast path that builds the same event without the
    model's per-field work:

    * shorter than ``SHARE_FROM`` bytes: the whole line by ``pydantic_core.from_json`` (the
      parser ``model_validate_json`` uses), kept when it is an object with exactly the keys
      ``type, seq, time, data`` in that order, a ``type`` of the model's pattern, ``seq`` the line
      number (an ``int``), ``time`` a ``float`` and ``data`` an object; the parsed object becomes
      the event's field dict as it is;
    * longer: the envelope by ``_ENVELOPE``, ``data`` by ``from_json`` or shared (``SHARE_FROM``).

    Any other line (another key order, spaces, an integer ``time``, a bad line) goes through
    ``parse_line``: the model accepts it or says what is wrong, with the line number
    (``LogCorruptError``, the first bad line; a ``seq`` that is not the line number included).
    A bad tail is no error: it is returned with ``event=None``.

    The garbage collector is paused meanwhile (collecting while 100k events were built was most
    of the time spent), and what it tracks is frozen afterwards (``gc.freeze``): loaded events
    live as long as their session and hold no cycles, and every later full collection would
    otherwise walk all of them again, blocking the event loop for as long.
    """

    def __init__(self, model: type[SessionEvent], path: Path) -> None:
        self.model = model
        self.path = path
        self.events: list[SessionEvent] = []
        self.number = 0
        """Lines read so far."""
        self._shared: dict[bytes, tuple[bytes, dict]] = {}  # type → (data bytes, data) of its last long line
        self._names: dict[str | bytes, str] = {}  # type (as str, and as bytes) → its one str
        self._collecting = False

    def __enter__(self) -> "_Parser":
        self._collecting = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._collecting:
            gc.freeze()
            gc.enable()

    def tail(self, last_line: bytes) -> Tail | None:
        """``last_line`` (what follows the last newline) as the tail: ``None`` when empty."""
        if not last_line:
            return None
        number = self.number + 1
        try:
            event: SessionEvent | None = parse_line(self.model, self.path, number, last_line, expected_seq=number)
        except LogCorruptError:
            event = None
        return Tail(number, last_line, event)

    def feed(self, raw: bytes) -> None:
        """Read every line of ``raw``, which must end with ``\\n`` (or be empty)."""
        model, path = self.model, self.path
        append, find, match_at = self.events.append, raw.find, _ENVELOPE.match
        from_json, keys, shared, names = pydantic_core.from_json, _KEYS, self._shared, self._names
        new, fields, type_name = model.__new__, _FIELDS, TYPE_NAME.fullmatch
        set_dict, set_fields, set_extra, set_private = _SETTERS
        start, number = 0, self.number
        try:
            while (end := find(b"\n", start)) >= 0:
                number += 1
                fields_of = None
                if end - start < SHARE_FROM:
                    try:
                        parsed = from_json(raw[start:end])
                    except ValueError:
                        parsed = None
                    if type(parsed) is dict and tuple(parsed) == keys:
                        kind, seq, moment, data = parsed.values()
                        if (type(seq) is int and seq == number and type(moment) is float
                                and type(data) is dict and type(kind) is str):
                            name = names.get(kind)
                            if name is None and type_name(kind):
                                name = names[kind] = kind
                            if name is not None:
                                if name is not kind:
                                    parsed["type"] = name  # one str per type
                                fields_of = parsed
                else:
                    match = match_at(raw, start, end)
                    if match is not None and raw[end - 1] == 0x7D and int(match[2]) == number:  # ends with its "}"
                        first, last = match.end(), end - 1
                        kind_bytes = match[1]
                        data = None
                        previous = shared.get(kind_bytes)
                        if previous is not None and len(previous[0]) == last - first and raw.startswith(previous[0], first):
                            data = previous[1]  # compared in place: no copy of the line
                        else:
                            text = raw[first:last]
                            try:
                                data = from_json(text)
                            except ValueError:
                                pass
                            if type(data) is not dict:
                                data = None
                            else:
                                shared[kind_bytes] = (text, data)
                        if data is not None:
                            name = names.get(kind_bytes)
                            if name is None:  # the str the short lines of this type use too
                                kind = kind_bytes.decode("ascii")
                                name = names[kind_bytes] = names.setdefault(kind, kind)
                            fields_of = {"type": name, "seq": number, "time": float(match[3]), "data": data}
                if fields_of is None:  # not in the shape to_line writes, or bad: the model says what is wrong
                    append(parse_line(model, path, number, raw[start:end], expected_seq=number))
                else:  # built as BaseModel.model_construct builds it, every field already checked
                    event = new(model)
                    set_dict(event, fields_of)
                    set_fields(event, fields)
                    set_extra(event, None)
                    set_private(event, None)
                    append(event)
                start = end + 1
        finally:
            self.number = number
