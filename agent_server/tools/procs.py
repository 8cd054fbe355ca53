"""Process groups a session's shell commands run in: waiting for and stopping them, and recording
them so a later process can stop them.

Role: ``wait_exit(proc)`` waits for a command's leader to exit (woken by its pidfd, or by a
launcher's ``exited`` future — not by ``proc.wait()``, which also waits for the pipes);
``terminate_group(proc)`` SIGTERMs its group, then SIGKILLs what is left. ``register(session_dir, pid)`` writes ``<session>/procs/<pgid>`` (holding the process's start
time from ``/proc``) while a command runs, ``release`` removes it when the command is over;
``reap_orphans(session_dir)`` — called when a session is loaded after its server died — kills every
recorded group that still runs and is still the same process (pid and start time both match).

Must never: signal a process it cannot prove is the one it started (a reused pid has another start
time, and is left alone).
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

#: Seconds between SIGTERM and SIGKILL of the group.
KILL_GRACE_SECONDS = 2.0
#: The MCP servers' launcher, run by path (standard library only): a subreaper that kills every
#: process a command left behind when it ends, is stopped, or the server dies.
REAPER = Path(__file__).with_name("mcp") / "reaper.py"


def reaped(argv: list[str]) -> list[str]:
    """``argv`` under ``REAPER`` as a child subreaper (Linux; elsewhere ``argv`` unchanged): the
    command's status and death signal are kept (issue 32 §11: an unconfined shell's whole tree)."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-I", "-S", str(REAPER), str(os.getpid()), "--subreaper", "--same-signal", "--", *argv]


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


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the process group; ``False`` when the group no longer exists."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


async def wait_exit(proc: Any, timeout: float | None = None) -> bool:
    """Wait until ``proc`` has exited (its return code is known); ``False`` on ``timeout``.

    Does not use ``proc.wait()``: on Python 3.11 it also waits until every pipe is closed, which a
    background grandchild can keep open indefinitely. Woken by ``proc.exited`` (a future, for a
    launcher's process) or the process's pidfd becoming readable; polls ``returncode`` when
    neither is available.
    """
    if proc.returncode is not None:
        return True
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    exited = getattr(proc, "exited", None)
    if isinstance(exited, asyncio.Future):
        try:
            await asyncio.wait_for(asyncio.shield(exited), timeout)
        except TimeoutError:
            return False
        return True
    pidfd = _pidfd(proc.pid)
    if pidfd is not None:
        gone = loop.create_future()
        loop.add_reader(pidfd, lambda: gone.done() or gone.set_result(None))
        try:
            await asyncio.wait_for(gone, timeout)
        except TimeoutError:
            return proc.returncode is not None
        finally:
            loop.remove_reader(pidfd)
            os.close(pidfd)
    delay = 0.001 if pidfd is not None else 0.005  # after the pidfd: the child watcher reports soon
    while proc.returncode is None:
        if deadline is not None and loop.time() >= deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)
    return True


def _pidfd(pid: int) -> int | None:
    """A pidfd of ``pid`` (readable once it has exited); ``None`` if there is none (already reaped,
    or no ``pidfd_open`` on this system)."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


async def terminate_group(proc: Any, grace: float = KILL_GRACE_SECONDS) -> None:
    """SIGTERM the process group led by ``proc``, wait up to ``grace`` seconds for the group to
    end, then SIGKILL the whole group (members that ignored SIGTERM included) and wait briefly for
    the leader's exit status. The SIGKILL is sent even if this coroutine is cancelled meanwhile."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    _signal_group(pgid, signal.SIGCONT)  # stopped members must see the SIGTERM
    deadline = time.monotonic() + grace
    try:
        while time.monotonic() < deadline:
            if proc.returncode is not None and not _group_alive(pgid):
                break
            await asyncio.sleep(0.02)
    finally:
        _signal_group(pgid, signal.SIGKILL)
    await wait_exit(proc, timeout=1.0)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def exit_text(code: int | None) -> str:
    """A shell exit status for the model: the number, and the signal that killed it (``137 (killed by SIGKILL)``)."""
    if code is None:
        return "unknown"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"{128 - code} (killed by {name})"
    return str(code)
