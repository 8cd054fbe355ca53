"""Where session logs live on disk.

Role: map a session id to ``<state>/sessions/<id>/events.jsonl`` (with ``spill/`` beside it), make
the folders private (``0700``), create new logs, say which sessions exist, and delete a session's
folder.

Must never: read or write events itself — that is ``EventLog``'s job.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent_server.session.events import EventLog, SessionEvent

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


def default_state_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$AGENT_SERVER_STATE_DIR``, else the platform's user state folder for ``agent-server``."""
    env = os.environ if env is None else env
    if env.get("AGENT_SERVER_STATE_DIR"):
        return Path(env["AGENT_SERVER_STATE_DIR"])
    import platformdirs

    return Path(platformdirs.user_state_dir("agent-server"))


class SessionStore:
    """The ``sessions/`` folder under a state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.root = Path(state_dir) / "sessions"

    def log_path(self, session_id: str) -> Path:
        """Path of the session's ``events.jsonl``. Raises ``ValueError`` for an id that is not a
        plain file name (ids come from clients: no ``/``, no ``..``)."""
        if not _ID_RE.fullmatch(session_id) or session_id in (".", ".."):
            raise ValueError(f"invalid session id {session_id!r}")
        return self.root / session_id / "events.jsonl"

    def create(self, header: dict[str, Any], session_id: str | None = None) -> tuple[str, EventLog]:
        """Make a new session folder and log; returns ``(session_id, log)``."""
        session_id = session_id or f"sess_{uuid.uuid4().hex}"
        for folder in (self.root.parent, self.root):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.log_path(session_id)
        return session_id, EventLog.create(path, {"session_id": session_id, **header})

    def create_fork(self, header: dict[str, Any], history: Sequence[SessionEvent]) -> tuple[str, EventLog]:
        """Make a new session whose log continues ``history`` (events copied verbatim after its
        own header, see ``EventLog.create_from``); returns ``(session_id, log)``."""
        session_id = f"sess_{uuid.uuid4().hex}"
        for folder in (self.root.parent, self.root):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
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
        """Remove the session's folder (log, spill files and all).

        Raises ``ValueError`` for an invalid id and ``FileNotFoundError`` when there is no such
        session. The caller closes a live session's log first.
        """
        folder = self.log_path(session_id).parent
        if not folder.is_dir():
            raise FileNotFoundError(folder)
        shutil.rmtree(folder)
