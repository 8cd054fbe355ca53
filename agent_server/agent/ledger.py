"""The read ledger of a session, kept in its log so a loaded, resumed or forked session has it.

Role: ``LoggedReadLedger`` is the ``tools.ReadLedger`` a live session uses: each snapshot it
records (a file the model read, or the text a write left) is also logged as ``file/seen {path,
sha256, version}`` — only when it differs from the entry already held. ``LoggedReadLedger.from_log``
rebuilds the entries from those events alone, so a session opened from its log checks an edit
against the disk as it is now, exactly as the process that read the file would have (invariant 12:
a file changed since it was read is stale). ``file/seen`` is never projected: it changes no request.

Must never: keep file bytes in the log (a hash and a version only), or record a file the log does
not say was seen.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from agent_server.session import EventLog, SessionEvent
from agent_server.tools import ReadLedger
from agent_server.tools.files import FileSnapshot

SEEN = "file/seen"


class LoggedReadLedger(ReadLedger):
    """A ``ReadLedger`` that logs what it records (``log``: the session's open log).

    Entries rebuilt from the log carry the hash and version but no bytes (``raw == b""``): the
    write guard compares hashes only.
    """

    def __init__(self, log: EventLog) -> None:
        super().__init__()
        self._log = log

    @classmethod
    def from_log(cls, log: EventLog) -> "LoggedReadLedger":
        """The ledger as the log's ``file/seen`` events left it (only the last event of each path
        spelling counts: it is what recording them all in order leaves, with one path resolution
        per file instead of one per event)."""
        ledger = cls(log)
        latest: dict[str, tuple[str, int | None]] = {}
        for path, sha256, version in reversed(seen_files(log.events, log.count(SEEN))):
            latest.setdefault(path, (sha256, version))
        for path, (sha256, version) in reversed(latest.items()):  # in the order of their last events
            ReadLedger.record(ledger, FileSnapshot(Path(path), b"", sha256, version))
        return ledger

    def record(self, snapshot: FileSnapshot) -> None:
        """Remember ``snapshot``; log ``file/seen`` when it is new for its file."""
        held = self.last(snapshot.path)
        super().record(snapshot)
        if held is None or (held.sha256, held.version) != (snapshot.sha256, snapshot.version):
            self._log.append(SEEN, {"path": str(snapshot.path), "sha256": snapshot.sha256,
                                    "version": snapshot.version})


def seen_files(events: Sequence[SessionEvent], count: int | None = None) -> list[tuple[str, str, int | None]]:
    """``(path, sha256, version)`` of every ``file/seen`` event, oldest first. ``count``: how many
    ``events`` hold (``EventLog.count``): the walk stops at the last one (a long log's few are
    near its start)."""
    found: list[tuple[str, str, int | None]] = []
    if count == 0:
        return found
    for e in events:
        if e.type == SEEN:
            found.append((str(e.data["path"]), str(e.data["sha256"]), e.data.get("version")))
            if len(found) == count:
                break
    return found
