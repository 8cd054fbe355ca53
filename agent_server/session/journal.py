"""The stream journal: the streamed text of the step in flight, kept beside the log for crash recovery.

Role: while a step's answer streams, each text and reasoning delta is appended to
``sessions/<id>/stream.journal`` before it is sent to the editor, so a process killed mid-answer
(SIGKILL, OOM) leaves on disk everything the user was shown; crash recovery (``agent.recovery``)
turns it into the interrupted ``assistant`` event a cancel logs at that point, then removes it.
Line 1 names the attempt (``{"v", "step_seq", "turn", "step", "attempt"}``: ``step_seq`` is the
seq of its ``step/start``); each later line is ``{"t": text}`` or ``{"r": reasoning}``, ASCII-only
JSON, one ``os.write`` each (a torn write is an unterminated last line, dropped whole). Not
fsynced: the editor sees a delta only after its write returned, and a killed process's writes
are in the page cache.

Must never: be read as history (only recovery reads it, and only for the attempt it names), or
stop a stream: a failed write ends journaling of that attempt (the file is removed) and the answer
streams on.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JOURNAL_NAME = "stream.journal"
FORMAT = 1

_dumps = json.JSONEncoder(ensure_ascii=True, separators=(",", ":")).encode


def journal_path(log_path: Path) -> Path:
    """The journal of the session whose ``events.jsonl`` is ``log_path``."""
    return Path(log_path).parent / JOURNAL_NAME


@dataclass(frozen=True)
class Journaled:
    """What a journal holds: the attempt it belongs to and what that attempt streamed."""

    step_seq: int
    turn: int
    step: int
    attempt: int
    text: str
    reasoning: str


class StreamJournal:
    """The writer of one session's journal: ``begin`` an attempt, ``text``/``reasoning`` per delta,
    ``end`` once the attempt's event is in the log. The file is created at the first delta (an
    attempt that streams only tool calls writes nothing)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._head: bytes | None = None
        """The header line, until the first delta writes it (``None``: not journaling)."""

    def begin(self, *, step_seq: int, turn: int, step: int, attempt: int) -> None:
        """Start journaling an attempt; any earlier attempt's journal is removed first."""
        self.end()
        self._head = (_dumps({"v": FORMAT, "step_seq": step_seq, "turn": turn, "step": step,
                              "attempt": attempt}) + "\n").encode("ascii")

    def text(self, delta: str) -> None:
        """Append an answer-text delta."""
        self._write('{"t":' + _dumps(delta) + "}\n")

    def reasoning(self, delta: str) -> None:
        """Append a reasoning delta."""
        self._write('{"r":' + _dumps(delta) + "}\n")

    def _write(self, line: str) -> None:
        if self._head is None and self._fd is None:
            return
        try:
            if self._fd is None:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
                self._fd = fd
                data = self._head + line.encode("ascii")  # type: ignore[operator]
                self._head = None
            else:
                data = line.encode("ascii")
            if os.write(self._fd, data) != len(data):  # a short write: the disk is full
                raise OSError("short write")
        except OSError:  # disk full, folder gone: the answer streams on without a journal
            self.end()
            remove(self.path)  # a journal missing deltas would be less than the user saw

    def end(self) -> None:
        """Stop journaling and remove the file (the attempt's event is logged, or it never streamed)."""
        self._head = None
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.close(fd)
        except OSError:
            pass
        remove(self.path)


def remove(path: Path) -> None:
    """Remove a journal if it is there. Never raises: one that cannot be removed is harmless (it is
    used only for the attempt it names) and must not stop a load or a stream."""
    try:
        os.unlink(path)
    except OSError:
        pass


def read_journal(path: Path) -> Journaled | None:
    """The journal at ``path``, or ``None`` when there is none or its header cannot be read.

    Lines are read up to the first that is unterminated (a torn last write) or unreadable; the
    deltas before it are joined, text and reasoning apart, in the order written.
    """
    try:
        raw = Path(path).read_bytes()
    except OSError:  # none, or not readable (then recovery goes on as without one)
        return None
    lines = raw.split(b"\n")[:-1]  # the part after the last newline is a torn write (or nothing)
    if not lines:
        return None
    try:
        head: Any = json.loads(lines[0])
        fields = [int(head[k]) for k in ("step_seq", "turn", "step", "attempt")]
        if head.get("v") != FORMAT:
            return None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    text: list[str] = []
    reasoning: list[str] = []
    for line in lines[1:]:
        try:
            record = json.loads(line)
        except ValueError:
            break
        if not isinstance(record, dict) or len(record) != 1:
            break
        (kind, delta), = record.items()
        if not isinstance(delta, str) or kind not in ("t", "r"):
            break
        (text if kind == "t" else reasoning).append(delta)
    return Journaled(*fields, text="".join(text), reasoning="".join(reasoning))
