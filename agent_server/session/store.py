"""Where session logs live on disk.

Role: map a session id to ``<state>/sessions/<id>/events.jsonl`` (with ``spill/`` beside it), make
the folders private (``0700``), create new logs, say which sessions exist (``listing()``: through
the index beside the logs, ``session.index``), and delete a session's folder.

Must never: read or write events itself — that is ``EventLog``'s job.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
from pathlib import Path
from typing import Any, Sequence

from agent_server.session.events import EventLog, LogBusyError, SessionEvent
from agent_server.session.index import IndexEntry, SessionIndex
from agent_server.session.logline import default_state_dir, make_store_folders, new_session_id  # noqa: F401

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class SessionStore:
    """The ``sessions/`` folder under a state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / "sessions"
        self._index: SessionIndex | None = None

    def listing(self, defer_save: bool = False) -> list[IndexEntry]:
        """Every readable stored session, from the index beside the logs (``session.index``),
        refreshed from the logs that changed since it was written (``defer_save``: the index file
        is written by ``save_listing()``)."""
        if self._index is None:
            self._index = SessionIndex(self.root, lambda name: bool(_ID_RE.fullmatch(name)))
        return self._index.entries(defer_save)

    def save_listing(self) -> None:
        """Write the index file a ``listing(defer_save=True)`` left unsaved."""
        if self._index is not None:
            self._index.save()

    def log_path(self, session_id: str) -> Path:
        """Path of the session's ``events.jsonl``. Raises ``ValueError`` for an id that is not a
        plain file name (ids come from clients: no ``/``, no ``..``)."""
        if not _ID_RE.fullmatch(session_id) or session_id in (".", ".."):
            raise ValueError(f"invalid session id {session_id!r}")
        return self.root / session_id / "events.jsonl"

    def create(self, header: dict[str, Any], session_id: str | None = None) -> tuple[str, EventLog]:
        """Make a new session folder and log; returns ``(session_id, log)``. (The CLI's fast path
        makes the same with ``logline``'s functions, before this class can be imported.)"""
        session_id = session_id or new_session_id()
        make_store_folders(self.root)
        path = self.log_path(session_id)
        return session_id, EventLog.create(path, {"session_id": session_id, **header})

    def create_fork(self, header: dict[str, Any], history: Sequence[SessionEvent]) -> tuple[str, EventLog]:
        """Make a new session whose log continues ``history`` (events copied verbatim after its
        own header, see ``EventLog.create_from``); returns ``(session_id, log)``."""
        session_id = new_session_id()
        make_store_folders(self.root)
        path = self.log_path(session_id)
        return session_id, EventLog.create_from(path, {"session_id": session_id, **header}, history)

    def exists(self, session_id: str) -> bool:
        """Whether a log exists for ``session_id``."""
        try:
            return self.log_path(session_id).exists()
        except ValueError:
            return False

    def ids(self) -> list[str]:
        """Ids of the sessions that have a log (unordered; folders without a log are skipped)."""
        if not self.root.is_dir():
            return []
        found = []
        for entry in self.root.iterdir():
            if _ID_RE.fullmatch(entry.name) and (entry / "events.jsonl").is_file():
                found.append(entry.name)
        return found

    def delete(self, session_id: str) -> None:
        """Remove the session's folder (log, spill files and all), holding the log's one-writer
        ``flock`` while it does: a log another ``EventLog`` holds (another agent-server process
        serving it, or an open log in this one) is not touched.

        Raises ``ValueError`` for an invalid id, ``FileNotFoundError`` when there is no such
        session, ``LogBusyError`` when the log is open (nothing is removed then). The caller
        closes a live session's log first.
        """
        path = self.log_path(session_id)
        folder = path.parent
        if not folder.is_dir():
            raise FileNotFoundError(folder)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # a folder without a log: nobody can hold it
            shutil.rmtree(folder)
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise LogBusyError(f"{path} is open in another agent-server (one writer per log)") from None
            shutil.rmtree(folder)  # under the lock: an open that waits for it finds the log unlinked
        finally:
            os.close(fd)
