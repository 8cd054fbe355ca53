"""Taking over a session another agent-server process holds (its log's one-writer ``flock``).

Role: ``lock_holder`` names the process holding a log's lock (``/proc/locks``: pid, alive, whether
it answers take-over requests); ``request_release`` asks it to let one session go — a
``release-request`` file in the session's folder, then ``SIGUSR1`` to the holder —; ``take_requests``
is the holder's side: which of its live sessions were asked for (the file is removed as it is read).
The holder closes such a session as ``session/close`` does (turn cancelled, proposals withdrawn,
log closed) and says so in its log; the asker then takes the lock (``continuity._open``).

Must never: signal a process that does not catch ``SIGUSR1`` (its default action kills it), or let
two processes write one log — the lock moves only when the holder has closed its log.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any, Iterable

REQUEST_NAME = "release-request"
"""The file in a session's folder that asks its holder to release it."""

RELEASE_SIGNAL = signal.SIGUSR1

TAKE_OVER_WAIT = 5.0
"""Seconds a take-over waits for the holder to release the session before it is refused."""


def lock_holder(path: Path) -> dict[str, Any] | None:
    """``{"pid", "alive", "answersTakeOver"}`` of the process holding ``path``'s ``flock``, or
    ``None`` when it cannot be told (no ``/proc/locks``, nobody holds it, the log is gone)."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 6 or fields[1] == "->" or fields[1] != "FLOCK":
            continue  # a waiter ("->"), or a POSIX/OFD lock: not the log's one-writer lock
        try:
            pid, lock_inode = int(fields[4]), int(fields[5].rsplit(":", 1)[1])
        except (ValueError, IndexError):
            continue
        if lock_inode == inode and pid != os.getpid():
            return {"pid": pid, "alive": _alive(pid), "answersTakeOver": _catches(pid, RELEASE_SIGNAL)}
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _catches(pid: int, signum: int) -> bool:
    """Whether ``pid`` has a handler for ``signum`` (``SigCgt`` of ``/proc/PID/status``)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError):
        pass
    return False


def request_release(path: Path, holder: dict[str, Any]) -> None:
    """Ask ``holder`` (``lock_holder``'s answer) to release the session whose log is ``path``.
    Raises ``OSError`` when the request cannot be written or the signal cannot be sent."""
    request = path.parent / REQUEST_NAME
    tmp = request.with_name(f"{REQUEST_NAME}.{os.getpid()}")
    tmp.write_text(json.dumps({"pid": os.getpid()}), encoding="utf-8")
    os.replace(tmp, request)
    os.kill(holder["pid"], RELEASE_SIGNAL)


def withdraw_request(path: Path) -> None:
    """Remove this process's unanswered request (a take-over that gave up), if it is still there."""
    request = path.parent / REQUEST_NAME
    try:
        if json.loads(request.read_text(encoding="utf-8")).get("pid") == os.getpid():
            request.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def take_requests(folders: Iterable[tuple[str, Path]]) -> list[tuple[str, int | None]]:
    """Of ``(session_id, session folder)``, the sessions asked for: ``(session_id, asker's pid)``,
    each request file removed as it is read."""
    asked = []
    for session_id, folder in folders:
        request = folder / REQUEST_NAME
        try:
            text = request.read_text(encoding="utf-8")
            request.unlink()
        except OSError:
            continue
        try:
            pid = json.loads(text).get("pid")
        except (ValueError, AttributeError):
            pid = None
        asked.append((session_id, pid if isinstance(pid, int) else None))
    return asked
