"""Running ripgrep for ``glob`` and ``grep``: find the binary, stream its lines, stop it early.

Role: locate ``rg`` (the ``ripgrep`` wheel installs it into the environment's scripts folder,
which need not be on ``PATH``), and run it as its own process group, handing each stdout line to a
callback that may ask to stop; on stop, timeout or cancellation the group is killed.

Must never: leave an ``rg`` process running after the call returns or is cancelled.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import signal
import sys
import sysconfig
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .child_env import scrubbed_environ

#: Arguments every search passes: no user config, ``.gitignore`` honoured outside git repos too,
#: hidden files included but never the ``.git`` folder.
RG_COMMON = ("--no-config", "--no-require-git", "--hidden", "--glob=!.git")
_STDERR_KEEP = 4096
#: The longest stdout record read (bytes); a longer one is dropped, not read into memory.
RECORD_LIMIT = 64 * 1024 * 1024
#: Records at least this long are handed to ``on_line`` in a worker thread, so that parsing a
#: minified file's one huge line never holds the event loop (cancel, other sessions, SIGTERM).
_THREAD_RECORD = 256 * 1024
#: Records handled between two yields to the event loop.
_YIELD_EVERY = 64
#: Whether a child can start in a directory fd through ``/proc/self/fd`` (Linux).
_PROC_FD = os.path.isdir("/proc/self/fd")


def _fd_path(fd: int) -> str:
    """The path of a directory fd where ``/proc`` is missing (macOS: ``F_GETPATH``)."""
    import fcntl

    getpath = getattr(fcntl, "F_GETPATH", None)
    if getpath is None:
        raise OSError("cannot start ripgrep in a folder fd on this system")
    return os.fsdecode(fcntl.fcntl(fd, getpath, bytes(1024)).rstrip(b"\0"))


@functools.lru_cache(maxsize=1)
def find_rg() -> str | None:
    """Path of the ``rg`` executable: ``$AGENT_SERVER_RG``, the running environment's scripts
    folder (where the ``ripgrep`` wheel puts it), next to ``sys.executable``, then ``PATH``;
    ``None`` when there is none."""
    env = os.environ.get("AGENT_SERVER_RG")
    candidates = [env] if env else []
    name = "rg.exe" if os.name == "nt" else "rg"
    try:
        candidates.append(str(Path(sysconfig.get_path("scripts")) / name))
    except (KeyError, TypeError):
        pass
    candidates.append(str(Path(sys.executable).parent / name))
    candidates.append(shutil.which("rg") or "")
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


@dataclass
class RgRun:
    """How an ``rg`` run ended: ``exit_code`` (0 found, 1 nothing found, 2 error; ``None`` when
    stopped early), ``stopped`` (the callback asked to stop), ``stderr`` (its first 4 KB),
    ``too_long`` (records over the 64 MiB limit, dropped unread: the rest of the run goes on)."""

    exit_code: int | None
    stopped: bool
    stderr: str
    too_long: int = 0


class _TooLong(Exception):
    """A record over the stream's limit; ``consumed``: the bytes that can be dropped now."""

    def __init__(self, consumed: int) -> None:
        self.consumed = consumed


async def _record(stream: asyncio.StreamReader, sep: bytes) -> bytes | None:
    """The next record of ``stream`` without its ``sep`` (the last one may lack it); ``None`` at
    the end. Raises ``_TooLong`` for a record over the stream's limit."""
    try:
        return (await stream.readuntil(sep))[: -len(sep)]
    except asyncio.IncompleteReadError as exc:
        return exc.partial or None
    except asyncio.LimitOverrunError as exc:
        raise _TooLong(exc.consumed) from None


async def _drop_record(stream: asyncio.StreamReader, sep: bytes, consumed: int) -> None:
    """Drop the rest of a record over the limit, up to and including its ``sep``: a bounded
    buffer at a time, never the whole record in memory."""
    while True:
        try:
            await stream.readexactly(max(consumed, 1))
        except asyncio.IncompleteReadError:
            return
        try:
            await stream.readuntil(sep)
            return
        except asyncio.IncompleteReadError:
            return
        except asyncio.LimitOverrunError as exc:
            consumed = exc.consumed


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def run_rg(
    rg: str, args: Sequence[str], *, cwd: Path | int, on_line: Callable[[bytes], bool],
    env: Mapping[str, str] | None = None, stdin: int | None = None, null_separated: bool = False,
) -> RgRun:
    """Run ``rg ARGS`` in ``cwd`` (a path, or an open directory fd: ``rg`` starts in exactly that
    folder, whatever its path points to by then); call ``on_line(line)`` for each stdout line
    (without the newline) until it returns ``False`` — a record of 256 KiB or more in a worker
    thread (never two calls at once), so the event loop stays free. ``null_separated``: the records end with NUL
    instead (``--files --null``: file names may hold newlines). ``env``: the child's environment (default:
    ``child_env.scrubbed_environ()`` — never the server's own, which holds the API key);
    ``stdin``: an fd ``rg`` reads as ``-`` (default ``/dev/null``). Raises ``OSError`` if ``rg``
    cannot start; a record over 64 MiB is dropped and counted (``RgRun.too_long``); on cancellation kills ``rg`` and re-raises ``CancelledError``."""
    if isinstance(cwd, int) and not _PROC_FD:  # no /proc (not Linux): start in the folder's path
        cwd = Path(os.readlink(f"/dev/fd/{cwd}")) if os.path.islink(f"/dev/fd/{cwd}") else Path(_fd_path(cwd))
    where = f"/proc/self/fd/{cwd}" if isinstance(cwd, int) else cwd  # the child's own fd table
    proc = await asyncio.create_subprocess_exec(
        rg, *args, cwd=where, stdin=asyncio.subprocess.DEVNULL if stdin is None else stdin,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=dict(env) if env is not None else scrubbed_environ(),
        pass_fds=(cwd,) if isinstance(cwd, int) else (),
        start_new_session=True, limit=RECORD_LIMIT,
    )
    assert proc.stdout is not None and proc.stderr is not None
    err = bytearray()

    async def read_stderr() -> None:
        assert proc.stderr is not None
        while chunk := await proc.stderr.read(65536):
            if len(err) < _STDERR_KEEP:
                err.extend(chunk[: _STDERR_KEEP - len(err)])

    err_task = asyncio.ensure_future(read_stderr())
    stopped = False
    too_long = 0
    records = 0
    sep = b"\0" if null_separated else b"\n"
    try:
        while True:
            try:
                line = await _record(proc.stdout, sep)
            except _TooLong as exc:
                too_long += 1
                await _drop_record(proc.stdout, sep, exc.consumed)
                continue
            if line is None:
                break
            keep = await asyncio.to_thread(on_line, line) if len(line) >= _THREAD_RECORD else on_line(line)
            records += 1
            if records % _YIELD_EVERY == 0:  # buffered records never suspend: let the loop run (the
                await asyncio.sleep(0)  # deadline, a cancel, other sessions) between paths
            if not keep:
                stopped = True
                _kill_group(proc)
                break
        if stopped:
            await proc.wait()
        else:
            await asyncio.wait_for(err_task, timeout=5)
            await proc.wait()
    except BaseException:
        _kill_group(proc)
        err_task.cancel()
        await asyncio.shield(proc.wait())
        raise
    finally:
        if not err_task.done():
            err_task.cancel()
    return RgRun(None if stopped else proc.returncode, stopped, err.decode("utf-8", "replace"), too_long)
