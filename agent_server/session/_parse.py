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
from collections import deque
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel as _BaseModel
from pydantic import ValidationError
from pydantic_core import SchemaValidator, core_schema

if TYPE_CHECKING:  # events imports this module; the classes are passed in at the call
    from agent_server.session.events import SessionEvent

_KEYS = ("type", "seq", "time", "data")
"""The model's fields in their order: the keys of a line as ``SessionEvent.to_line`` writes it."""

_FIELDS = frozenset(_KEYS)

TYPE_NAME = re.compile(r"[a-z][a-z_]*(/[a-z][a-z_]*)*")
"""The model's pattern for ``type`` (``fullmatch``: Python's ``$`` would let a final ``\\n`` in)."""

SHARE_FROM = 1024
"""A line of this many bytes or more, ``…,"data":<data>}``, is read apart: its ``data`` text
by the model's ``data`` validator — or not at all when it has the bytes of the last such ``data``
of the same length, whose parsed object it then shares (the same ``request/header`` logged turn
after turn: compared in place, parsed once) —, the rest of the line, with ``{}`` as its data, like
a short line. Events are frozen and nothing changes an event's ``data`` in place. Shorter lines
are parsed whole."""

_DATA = b',"data":'

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
"""Bytes read at a time (``read_log``), each read into a fresh ``bytes`` that the lines are cut
from (only the short ones are copied out: a long line is read in place)."""


def read_log(model: type[SessionEvent], path: Path) -> tuple[list[SessionEvent], Tail | None, int]:
    """The events and the unterminated tail of the log file at ``path`` (``parse_log`` on its
    bytes, read ``CHUNK`` bytes at a time), and the number of bytes read.

    Raises ``LogCorruptError`` as ``parse_log`` does, ``OSError`` (``FileNotFoundError`` …).
    """
    parser = _Parser(model, path)
    size = 0
    rest: list[bytes] = []  # the start of the line the last chunk cut, in pieces (a long line spans chunks)
    with open(path, "rb", buffering=0) as f, parser:
        while chunk := f.read(CHUNK):
            size += len(chunk)
            start = 0
            if rest:
                cut = chunk.find(b"\n") + 1
                if not cut:  # no line ends in this chunk
                    rest.append(chunk)
                    continue
                rest.append(chunk[:cut])
                parser.feed(b"".join(rest))
                start = cut
            done = parser.feed(chunk, start)
            rest = [chunk[done:]] if done < len(chunk) else []
    return parser.events, parser.tail(b"".join(rest)), size


def parse_log(model: type[SessionEvent], path: Path, raw: bytes) -> tuple[list[SessionEvent], Tail | None]:
    """The events of ``raw`` (the bytes of the log at ``path``; ``model`` is ``SessionEvent``),
    one per ``\\n``-terminated line, numbered from 1, and the unterminated tail (``None`` when
    ``raw`` is empty or ends with ``\\n``). Raises ``LogCorruptError`` (the first bad line).

    How a line is read: ``_Parser``.
    """
    parser = _Parser(model, path)
    with parser:
        done = parser.feed(raw)
    return parser.events, parser.tail(raw[done:])


class _Validators:
    """What the bulk read parses and validates with, taken from the model's core schema.

    ``lines``: a list of lines (bytes) → a list of their JSON values, each line parsed on its own
    (``json_schema`` of ``any_schema``, with the model's config: in C, by the JSON parser of
    ``model_validate_json``, jiter), raising ``ValidationError`` when any line is not JSON.
    ``data``: the model's own validator of that field, from its JSON text (``validate_json``),
    for the ``data`` of long lines.
    """

    def __init__(self, lines: SchemaValidator, data: SchemaValidator) -> None:
        self.lines = lines.validate_python
        self.data = data.validate_json

    @classmethod
    def of(cls, model: type[SessionEvent]) -> "_Validators | None":
        """The validators of ``model``, or ``None`` when its core schema is not the plain one
        this module knows (then every line is read by the model itself)."""
        schema = model.__pydantic_core_schema__
        inner = schema.get("schema", {})
        fields = inner.get("fields", {})
        if (schema.get("type") != "model" or inner.get("type") != "model-fields" or tuple(fields) != _KEYS
                or any(f.get("type") != "model-field" or set(f) - {"type", "schema", "metadata"} for f in fields.values())):
            return None
        config = schema.get("config")
        return cls(SchemaValidator(core_schema.list_schema(core_schema.json_schema(core_schema.any_schema())), config),
                   SchemaValidator(fields["data"]["schema"], config))


_VALIDATORS: dict[type, _Validators | None] = {}

_drain = deque(maxlen=0).extend
"""Run an iterator to its end in C (``map`` of the slot setters)."""


class _Parser:
    """The events of a log fed as bytes (``feed``, any number of times, in order: each feed reads
    its whole lines and says where they end), then ``tail`` for what follows the last newline. Use
    it as a context manager around the feeds.

    Each line is read as the model reads it — ``parse_line`` is the reference — but many at once:

    * all the lines of a feed parsed by one call (``_Validators.lines``: each line on its own, in
      C) — a long one without its ``data`` (``SHARE_FROM``), put back afterwards —, then checked
      at once (``_as_written``: ``map`` over the values, in C) to be in the shape the model reads
      as it is: exactly the keys ``type, seq, time, data`` in that order, of the types the model
      makes of them, ``seq`` the line number; the parsed objects become the events' field dicts
      as they are. A long line not ending ``,"data":<an object>}`` is parsed whole.

    When a line is not JSON or not in that shape (another key order, an integer ``time``, a
    ``seq`` that is not its line number, a bad line …), the whole feed is read again line by line
    through ``parse_line``: right, at the model's pace, and for a bad line ``LogCorruptError`` with
    the number of the first one and the model's complaint. A bad tail is no error: it is returned
    with ``event=None``.

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
        if model not in _VALIDATORS:
            _VALIDATORS[model] = _Validators.of(model)
        self._validators = _VALIDATORS[model]
        self._shared: dict[int, tuple[bytes, dict]] = {}  # length → (data bytes, data) of the last long line's
        self._kinds: set[str] = set()  # types found of the model's pattern
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

    def feed(self, raw: bytes, start: int = 0) -> int:
        """Read every ``\\n``-terminated line of ``raw`` from ``start`` on, numbered on from the
        lines fed before; return the position after the last one. Raises ``LogCorruptError``
        (the first bad line)."""
        validators, find, share_from, shared = self._validators, raw.find, SHARE_FROM, self._shared
        if validators is None:
            return self._feed_by_the_model(raw, start)
        lines: list[bytes] = []
        longs: list[tuple[int, dict]] = []  # (index, data) of each long line read apart
        add, begin = lines.append, start
        while (end := find(b"\n", start)) >= 0:
            if end - start >= share_from and raw[end - 1] == 0x7D and (cut := find(_DATA, start, end)) >= 0:
                first = cut + len(_DATA)
                previous = shared.get(end - 1 - first)
                if previous is not None and raw.startswith(previous[0], first):
                    data = previous[1]  # compared in place: no copy of the line
                else:
                    text = raw[first:end - 1]
                    try:
                        data = validators.data(text)
                    except ValidationError:  # not an object, or more after it: parsed whole
                        data = None
                    else:
                        shared[len(text)] = (text, data)
                if data is not None:
                    longs.append((len(lines), data))
                    add(raw[start:first] + b"{}}")
                    start = end + 1
                    continue
            add(raw[start:end])
            start = end + 1
        first = self.number + 1
        try:
            parsed = validators.lines(lines)
            if not self._as_written(parsed, list(range(first, first + len(lines)))):
                return self._feed_by_the_model(raw, begin)
        except (ValidationError, TypeError):  # not JSON, not an object …: the model says what is wrong
            return self._feed_by_the_model(raw, begin)
        for index, data in longs:
            parsed[index]["data"] = data  # in the place of its {}: the key order stays
        self.events += self._events(parsed)
        self.number += len(lines)
        return start

    def _as_written(self, parsed: list, numbers: list[int]) -> bool:
        """Whether every value of ``parsed`` (the short lines' JSON) is an object with exactly the
        keys ``type, seq, time, data`` in that order, a ``type`` str of the model's pattern, ``seq``
        an ``int`` equal to its line number (``numbers``), ``time`` a ``float`` and ``data`` an
        object — what the model reads as it is. ``TypeError`` for a value that is not an object."""
        keys = list(map(tuple, parsed))  # the keys first: then every lookup below finds its key
        if keys and (keys[0] != _KEYS or keys.count(keys[0]) != len(keys)):  # (the parser's key strs: compared by identity)
            return False
        seqs = list(map(itemgetter("seq"), parsed))  # TypeError for a list (one of these four keys)
        if (seqs != numbers or set(map(type, seqs)) - {int}
                or set(map(type, map(itemgetter("time"), parsed))) - {float}
                or set(map(type, map(itemgetter("data"), parsed))) - {dict}):
            return False
        kinds = self._kinds
        for kind in set(map(itemgetter("type"), parsed)) - kinds:  # TypeError for a list or an object
            if type(kind) is not str or not TYPE_NAME.fullmatch(kind):
                return False
            kinds.add(kind)
        return True

    def _feed_by_the_model(self, raw: bytes, start: int) -> int:
        """``feed`` through ``parse_line``, line by line (the reference, the slow path)."""
        model, path, append, find, number = self.model, self.path, self.events.append, raw.find, self.number
        try:
            while (end := find(b"\n", start)) >= 0:
                number += 1
                append(parse_line(model, path, number, raw[start:end], expected_seq=number))
                start = end + 1
        finally:
            self.number = number
        return start

    def _events(self, fields: list[dict]) -> list[SessionEvent]:
        """Events whose field dicts are ``fields`` (already validated), built as
        ``BaseModel.model_construct`` builds them, in C: ``map`` over the slot setters."""
        model, count = self.model, len(fields)
        set_dict, set_fields, set_extra, set_private = _SETTERS
        events = list(map(model.__new__, repeat(model, count)))
        _drain(map(set_dict, events, fields))
        _drain(map(set_fields, events, repeat(_FIELDS, count)))
        _drain(map(set_extra, events, repeat(None, count)))
        _drain(map(set_private, events, repeat(None, count)))
        return events
