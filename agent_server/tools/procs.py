"""Process groups a session's shell commands run in, recorded so a later process can stop them.

Role: ``register(session_dir, pid)`` writes ``<session>/procs/<pgid>`` (holding the process's start
time from ``/proc``) while a command runs, ``release`` removes it when the command is over;
``reap_orphans(session_dir)`` — called when a session is loaded after its server died — kills every
recorded group that still runs and is still the same process (pid and start time both match).

Must never: signal a process it cannot prove is the one it started (a reused pid has another start
time, and is left alone).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return fields[19]  # field 22 of stat: start time in clock ticks after boot
    except (OSError, IndexError):
        return None


def register(session_dir: Path | None, pid: int) -> Path | None:
    """Record the group led by ``pid``; returns the record's path (``None``: not recorded)."""
    if session_dir is None:
        return None
    started = _start_time(pid)
    if started is None:
        return None
    folder = Path(session_dir) / "procs"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = folder / str(pid)
        path.write_text(started)
        return path
    except OSError:
        return None


def release(record: Path | None) -> None:
    """Forget a group whose command is over."""
    if record is not None:
        try:
            record.unlink()
        except OSError:
            pass


def reap_orphans(session_dir: Path) -> list[int]:
    """Kill (SIGKILL) the recorded groups left running by a dead server; returns their ids."""
    folder = Path(session_dir) / "procs"
    reaped: list[int] = []
    if not folder.is_dir():
        return reaped
    for record in folder.iterdir():
        try:
            pid = int(record.name)
            recorded = record.read_text().strip()
        except (ValueError, OSError):
            continue
        if _start_time(pid) == recorded:
            try:
                os.killpg(pid, signal.SIGKILL)
                reaped.append(pid)
            except OSError:
                pass
        release(record)
    return reaped
