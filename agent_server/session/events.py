"""Session events and the append-only JSONL log that holds them.

Role: one ``SessionEvent(type, seq, time, data)`` per line of ``events.jsonl``; ``append`` validates
the event, gives it the next contiguous ``seq``, writes and flushes it at once (and ``fsync``\\s the
durable types, or leaves that to the caller's ``sync`` in a worker thread: ``sync_later``);
``EventLog.open`` loads a log, cuts a torn last line (and logs the cut), and fails loudly, with the
line number, on anything else it cannot read. An open log holds an exclusive ``flock``: a second
writer (another agent-server serving the same session) is refused. ``read_events``/``read_head``
read without the lock and without changing anything.

Must never: rewrite or drop an event that was written whole. The only bytes ever removed are those
of a torn last line, and even those are kept inside the ``log/repaired`` event that records the cut,
and those of an append that failed (disk full), or whose ``fsync`` failed with those written after
it: they are cut off at once and never became events.
After a failed append the log writes nothing more until ``recover()``.
"""

from __future__ import annotations

import fcntl
import os
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_server.session._parse import TYPE_NAME, LogCorruptError, parse_line, read_log
# the line format and the creation of a log live in logline.py (shared with the CLI's fast path)
from agent_server.session.view import Prefix
from agent_server.session.logline import FORMAT_VERSION, create_log, event_line, make_private_dir, strict_json

DURABLE_TYPES = frozenset(
    {"session/header", "user", "tool/call", "tool/result", "turn/end", "notice", "log/repaired",
     "inbox/queued", "inbox/started", "inbox/cancelled", "inbox/dropped"}
)
"""Event types that are ``fsync``\\ed, not just flushed: losing one would break an invariant
(a call run without its ``tool/call``, a result or a turn's end lost, a queued prompt lost)."""

_TYPE_RE = re.compile(rf"^{TYPE_NAME.pattern}$")

__all__ = ["DURABLE_TYPES", "FORMAT_VERSION", "EventLog", "LogBusyError", "LogCorruptError", "LogVersionError",
           "LogWriteError", "SessionEvent", "read_events", "read_head", "strict_json"]


class LogVersionError(Exception):
    """The log was written by a newer format than this program reads (or has no header)."""


class LogBusyError(Exception):
    """Another open ``EventLog`` (in this or another process) holds the log: one writer only."""


class LogWriteError(Exception):
    """An append could not be written (disk full, I/O error …), or the log refuses appends
    since one could not: nothing more is written until ``EventLog.recover()`` succeeds.

    Attributes: ``path`` (the log file), ``cause`` (the ``OSError`` of the failed append).
    """

    def __init__(self, path: Path, cause: OSError) -> None:
        reason = cause.strerror or str(cause) or type(cause).__name__
        super().__init__(f"the session log {path} cannot be written: {reason}")
        self.path = path
        self.cause = cause


class SessionEvent(BaseModel):
    """One line of the session log.

    ``type``: slash-separated lower-case name (``turn/start``, ``tool/result`` …);
    ``seq``: 1, 2, 3 … with no gaps within one log; ``time``: unix seconds (float);
    ``data``: a JSON object, the event's payload.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str = Field(pattern=_TYPE_RE.pattern)
    seq: int = Field(ge=1)
    time: float
    data: dict[str, Any]

    def to_line(self) -> bytes:
        """Serialise to one JSONL line (UTF-8, no embedded newline, ``\\n``-terminated).

        Raises ``ValueError`` for text UTF-8 cannot carry (lone surrogates) or non-finite
        numbers: ``EventLog.append`` cleans those first, so every line is strict JSON.
        """
        return event_line(self.type, self.seq, self.time, self.data)


_make_private_dir = make_private_dir


class EventLog:
    """An open session log: the events in memory, appended to the file as they are made.

    Create with ``EventLog.create(path, header)`` or load with ``EventLog.open(path)``. The file is
    opened in append mode with permissions ``0600``; its folder is made ``0700``.
    """

    def __init__(self, path: Path, events: list[SessionEvent], fd: int | None = None) -> None:
        self.path = path
        self._events = events
        self._latest: dict[str, SessionEvent] = {}
        self._counts: dict[str, int] = {}
        for event in events:
            self._index(event)
        self._file = os.fdopen(_open_locked(path) if fd is None else fd, "ab", buffering=0)
        self._size = os.fstat(self._file.fileno()).st_size
        """Bytes of the file that hold ``_events`` (what a failed append is cut back to)."""
        self.failed: LogWriteError | None = None
        """Set when an append failed: appends are refused until ``recover()``."""
        self._synced_size: int | None = None
        """Bytes of the file an ``fsync`` of ours covered (``None``: unknown, as for a log opened):
        ``close`` needs no ``fsync`` of its own when nothing was written since."""
        self._unsynced: tuple[int, int] | None = None
        """``(bytes, events)`` before the first durable event written but not yet ``fsync``\\ed
        (``append(…, sync_later=True)``), or ``None``: what a failed ``fsync`` is cut back to."""
        self._cut: tuple[tuple[int, int], LogWriteError] | None = None
        """The pending token a failure cut off before its ``sync`` was settled, with that failure:
        its ``synced`` raises it, whatever its own ``fsync`` returned."""
        self._fsync_lock = threading.Lock()
        """Orders the worker's ``sync`` and a durable append's ``fsync`` (see ``_sync_error``)."""
        self._sync_error: OSError | None = None
        """A ``sync`` that failed and was not settled yet: Linux reports a failed write-back to one
        ``fsync`` of a file, and the next one returns 0 without the pages it lost — a durable
        append's ``fsync`` made after it proves nothing and is refused with it."""

    # -- construction -------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path, header: dict[str, Any]) -> "EventLog":
        """Start a new log at ``path`` (which must not exist) with a ``session/header`` event.

        ``header`` is the header's data; ``format_version`` is added. The line is written by
        ``logline.create_log`` (also the CLI's ``session/new`` fast path's): ``fsync``\\ed with its
        folder. Raises ``FileExistsError``, ``OSError`` (nothing is left behind).
        """
        path = Path(path)
        fd, line = create_log(path, header)
        try:
            return cls(path, [SessionEvent.model_validate_json(line)], fd)
        except BaseException:
            os.close(fd)
            raise

    @classmethod
    def create_from(cls, path: Path, header: dict[str, Any], history: Sequence[SessionEvent]) -> "EventLog":
        """Start a new log at ``path`` whose events after its own ``session/header`` are ``history``,
        copied verbatim (type, seq, time, data): a fork of another log up to some point.

        ``history`` must be numbered 2, 3 … with no gap. The lines are written and synced to disk
        before the log is opened. Raises ``FileExistsError``, ``ValueError`` for a gap.
        """
        path = Path(path)
        _make_private_dir(path.parent)
        for expected, event in enumerate(history, start=2):
            if event.seq != expected or event.type == "session/header":
                raise ValueError(f"history to copy must be numbered from 2 without gaps (got seq {event.seq})")
        first = SessionEvent(type="session/header", seq=1, time=time.time(),
                             data=strict_json({"format_version": FORMAT_VERSION, **header}))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(b"".join(e.to_line() for e in (first, *history)))
            f.flush()
            os.fsync(f.fileno())
        return cls.open(path)

    @classmethod
    def open(cls, path: Path, check: Callable[[list[SessionEvent]], object] | None = None) -> "EventLog":
        """Load an existing log and open it for appending.

        A torn last line (no final newline: the process died mid-write) is cut off and the cut is
        logged as ``log/repaired`` with the cut text; if that tail is in fact a whole valid event it
        is kept and only its newline is restored. Raises ``LogCorruptError`` (with the line number)
        for any other unreadable line or a ``seq`` gap, ``LogVersionError`` for a missing header or a
        newer ``format_version``, ``FileNotFoundError`` when there is no log, ``LogWriteError``
        when the repair cannot be written (the file is then as it was).

        ``check(events)``, when given, sees every event that will be loaded (oldest first, the
        header checked) before anything is changed — a repair included: whatever it raises refuses
        the load with the file untouched. A ``LogCorruptError`` without a path (the projection's
        ``EventShapeError``) is raised again with this log's path.
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(path)
        fd = _open_locked(path)  # before reading: nobody else may append or repair meanwhile
        try:
            events, tail, size = read_log(SessionEvent, path)
            loaded = events + [tail.event] if tail is not None and tail.event else events
            _check_header(path, loaded)
            if check is not None:
                try:
                    check(loaded)
                except LogCorruptError as exc:
                    if exc.path is not None:
                        raise
                    raise LogCorruptError(path, exc.line, exc.reason) from None
        except BaseException:
            os.close(fd)
            raise
        repair: dict[str, Any] | None = None
        try:
            if tail is not None:  # nothing is changed before the header was checked
                if tail.event is None:
                    with open(path, "r+b") as f:
                        f.truncate(size - len(tail.raw))
                    repair = {
                        "line": tail.line,
                        "cut_bytes": len(tail.raw),
                        "cut_text": tail.raw.decode("utf-8", errors="replace"),
                    }
                else:
                    with open(path, "ab") as f:
                        f.write(b"\n")
                    events.append(tail.event)
        except OSError as exc:  # the disk is full: nothing is lost, the log is loaded another time
            os.close(fd)
            raise LogWriteError(path, exc) from exc
        log = cls(path, events, fd)
        if repair is not None:
            try:
                log.append("log/repaired", repair)
            except LogWriteError:
                log.close()  # the cut text is not recorded yet: put it back, so nothing is lost
                with open(path, "ab") as f:
                    f.write(tail.raw)  # type: ignore[union-attr]
                raise
        return log

    # -- reading ------------------------------------------------------------------------------

    @property
    def events(self) -> Sequence[SessionEvent]:
        """All events, oldest first: a read-only sequence later appends do not change (a snapshot,
        as a tuple copy would be, made in O(1): ``session.view.Prefix``; slices are tuples); do not
        keep a copy of derived state."""
        return Prefix(self._events, len(self._events))

    def __len__(self) -> int:
        return len(self._events)

    @property
    def last_seq(self) -> int:
        """``seq`` of the newest event (0 for an empty log)."""
        return self._events[-1].seq if self._events else 0

    def latest(self, type: str) -> SessionEvent | None:
        """The newest event of ``type`` (``None`` when there is none), without a walk of the log."""
        return self._latest.get(type)

    def count(self, type: str) -> int:
        """How many events of ``type`` the log holds, without a walk of the log."""
        return self._counts.get(type, 0)

    def _index(self, event: SessionEvent) -> None:
        self._latest[event.type] = event
        self._counts[event.type] = self._counts.get(event.type, 0) + 1

    def of_type(self, *types: str) -> Iterable[SessionEvent]:
        """Events whose type is one of ``types``, oldest first."""
        return (e for e in self._events if e.type in types)

    # -- writing ------------------------------------------------------------------------------

    def append(self, type: str, data: dict[str, Any], *, durable: bool | None = None,
               sync_later: bool = False) -> SessionEvent:
        """Validate and append one event; return it.

        The line is written with one ``write`` and flushed; types in ``DURABLE_TYPES`` (or
        ``durable=True``) are also ``fsync``\\ed — with ``sync_later``, not here: the caller calls
        ``sync`` (in a worker thread) and then ``synced``, and nothing that depends on the event
        being on disk may happen before; a durable append without it ``fsync``\\s the events left
        unsynced with its own. Text UTF-8 cannot carry (lone surrogates) becomes
        U+FFFD and non-finite numbers become ``null`` (see ``strict_json``), so what is appended
        is what any JSON reader reads back. Raises ``pydantic.ValidationError`` for a bad type
        name, ``TypeError`` for data that is not JSON, ``ValueError`` when closed.

        When the write or the ``fsync`` fails (``ENOSPC``, ``EIO`` …) the bytes of this event are
        cut off again, the event is not added, and ``LogWriteError`` is raised — then and on every
        later append, which writes nothing, until ``recover()``: after a failed append memory
        equals disk and nothing more is written.
        """
        if self._file.closed:
            raise ValueError(f"session log {self.path} is closed")
        if self.failed is not None:
            raise self.failed
        event = SessionEvent(type=type, seq=self.last_seq + 1, time=time.time(), data=data)
        try:
            line = event.to_line()
        except ValueError:  # UnicodeEncodeError included
            event = event.model_copy(update={"data": strict_json(data)})
            line = event.to_line()
        try:
            self._write(line)
            if durable or (durable is None and type in DURABLE_TYPES):
                if not sync_later:
                    with self._fsync_lock:
                        os.fsync(self._file.fileno())
                        if self._sync_error is not None:
                            raise self._sync_error
                    self._unsynced = None
                    self._synced_size = self._size + len(line)
                elif self._unsynced is None:
                    self._unsynced = (self._size, len(self._events))
        except OSError as exc:
            raise self._fail(exc) from exc
        self._size += len(line)
        self._events.append(event)
        self._index(event)
        return event

    @property
    def unsynced(self) -> tuple[int, int] | None:
        """What ``append(…, sync_later=True)`` left to ``fsync`` (a token for ``synced``), or ``None``."""
        return self._unsynced

    def sync(self) -> None:
        """``fsync`` the file, from any thread (blocking); changes nothing here but what a failure
        tells the durable appends made until ``synced`` (they are refused). Raises ``OSError``."""
        with self._fsync_lock:
            size = self._size  # (read first: the bytes of an append in flight may be counted after it)
            try:
                os.fsync(self._file.fileno())
            except OSError as exc:
                self._sync_error = exc
                raise
            self._synced_size = size if self._synced_size is None else max(self._synced_size, size)

    def synced(self, token: tuple[int, int], error: OSError | None = None) -> None:
        """On the log's own thread, after ``sync`` of ``token`` (``unsynced`` before it): the events
        it covered are durable — or, with ``error``, they are cut off as a failed append's are
        (the file cut back, the events from the first unsynced one on dropped from memory, appends
        refused until ``recover()``) and ``LogWriteError`` is raised. Raises the failure that cut
        ``token``'s events off meanwhile (another append's: whatever ``sync`` returned, they are not
        in the log). Nothing when a durable append's ``fsync`` made before ``sync``'s covered
        ``token`` already (or the log is closed)."""
        self._sync_error = None
        if self._cut is not None and self._cut[0] is token:
            failure, self._cut = self._cut[1], None
            raise failure
        if self._unsynced is not token or self._file.closed:
            return
        if error is None:
            self._unsynced = None
            return
        raise self._fail(error) from error

    def _fail(self, exc: OSError) -> LogWriteError:
        """An append or ``fsync`` failed: refuse appends from now on and cut the file back to the
        events in memory — those from the first unsynced durable one on are dropped first."""
        self.failed = LogWriteError(self.path, exc)
        self._synced_size = None  # the file is cut back: what an fsync covered is unknown again
        pending, self._unsynced = self._unsynced, None
        self._sync_error = None
        if pending is not None:
            self._cut = (pending, self.failed)  # its settle raises this, whatever its fsync returned
            self._size, count = pending
            dropped = self._events[count:]
            self._events = self._events[:count]  # a new list: earlier snapshots (``events``) stay as they were
            for event in dropped:
                self._counts[event.type] -= 1
            for kind in {event.type for event in dropped}:
                before = next((e for e in reversed(self._events) if e.type == kind), None)
                if before is None:
                    self._latest.pop(kind, None)
                else:
                    self._latest[kind] = before
        self._cut_back()
        return self.failed

    def _write(self, line: bytes) -> None:
        view = memoryview(line)
        while view:  # a short write (the disk filled up mid-line) is continued, or fails with ENOSPC
            written = self._file.write(view)
            view = view[written:]

    def _cut_back(self) -> bool:
        """Cut the file back to the events in memory (the bytes of a failed append); ``False`` if
        even that failed (the partial line then stays, and is cut as a torn tail on load)."""
        try:
            os.ftruncate(self._file.fileno(), self._size)
            return True
        except OSError:
            return False

    def recover(self) -> bool:
        """After a failed append: make sure the file holds exactly the events in memory again and
        accept appends. Returns ``False`` when there was nothing to recover. Raises
        ``LogWriteError`` (appends stay refused) when the file cannot be cut back."""
        if self.failed is None:
            return False
        if os.fstat(self._file.fileno()).st_size != self._size and not self._cut_back():
            raise self.failed
        self.failed = None
        return True

    def close(self) -> None:
        """Flush to disk and close the file (the in-memory events stay readable). No ``fsync`` when
        one of ours already covered every byte written (a turn's ``turn/end`` is the last event of
        an exit after a cancel): the disk holds the same then."""
        if not self._file.closed:
            if self._synced_size != self._size:
                try:
                    os.fsync(self._file.fileno())
                except OSError:
                    pass  # whatever is on disk stays; a later load repairs or refuses it
            self._file.close()


def _open_locked(path: Path) -> int:
    """Open ``path`` for appending (``0600``) under an exclusive ``flock``; the kernel drops the
    lock when the holder dies, so a crashed process never blocks the recovery of its log. Raises
    ``LogBusyError`` when another descriptor holds the lock, ``FileNotFoundError`` when the log
    was deleted between the open and the lock."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogBusyError(f"{path} is open in another agent-server (one writer per log)") from None
    if os.fstat(fd).st_nlink == 0:  # a delete (``SessionStore.delete``, under the lock) removed it meanwhile
        os.close(fd)
        raise FileNotFoundError(path)
    os.chmod(path, 0o600)
    return fd


def read_events(path: Path) -> list[SessionEvent]:
    """Read a log without changing it (for ``replay`` and listings; the file may be live).

    A torn last line is left out (it is not an event yet); a whole last event missing only its
    newline is read. Raises ``LogCorruptError`` (with the line number), ``LogVersionError`` and
    ``FileNotFoundError`` exactly as ``EventLog.open`` does.
    """
    path = Path(path)
    events, tail, _ = read_log(SessionEvent, path)
    if tail is not None and tail.event is not None:
        events.append(tail.event)
    _check_header(path, events)
    return events


def read_head(path: Path, wanted: Callable[[SessionEvent], bool]) -> tuple[SessionEvent, SessionEvent | None]:
    """The header of the log at ``path`` and its first event matching ``wanted`` (or ``None``),
    reading no further than needed and changing nothing (for ``session/list``).

    Raises ``LogCorruptError`` / ``LogVersionError`` for a log whose header cannot be read,
    ``FileNotFoundError`` when there is no log. A bad line after the header ends the search.
    """
    path = Path(path)
    with open(path, "rb") as f:
        first = f.readline()
        header = parse_line(SessionEvent, path, 1, first.rstrip(b"\n"), expected_seq=1)
        _check_header(path, [header])
        for number, line in enumerate(f, start=2):
            if not line.endswith(b"\n"):
                break
            try:
                event = SessionEvent.model_validate_json(line)
            except ValidationError:
                break
            if wanted(event):
                return header, event
    return header, None


def _check_header(path: Path, events: list[SessionEvent]) -> None:
    if not events or events[0].type != "session/header":
        raise LogVersionError(f"{path}: not a session log (no session/header first)")
    version = events[0].data.get("format_version")
    if not isinstance(version, int):
        raise LogVersionError(f"{path}: session/header has no format_version")
    if version > FORMAT_VERSION:
        raise LogVersionError(
            f"{path}: log format {version} is newer than this agent-server reads "
            f"({FORMAT_VERSION}); upgrade agent-server to open it"
        )
    if version < 1:
        raise LogVersionError(
            f"{path}: log format {version} is older than any format this agent-server can migrate "
            f"(it reads {FORMAT_VERSION}); the log was left as it is"
        )
