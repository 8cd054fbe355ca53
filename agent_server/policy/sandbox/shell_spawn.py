"""Starting shell commands through the long-lived launcher (``sandbox_zygote``).

Role: ``spawn_confined(argv, env, cwd, spec, fallback_argv)`` starts one command confined by
``spec`` (``spawn_unconfined(argv, env, cwd)``: one unconfined, its whole tree reaped with it)
and returns a ``ConfinedProcess`` (the parts of ``asyncio.subprocess.Process`` the
``bash`` tool uses: ``pid`` — the leader of the command's own process group —, ``returncode``,
``stdout`` — stdout and stderr combined —, ``wait()``, plus ``exited``, a future done at exit).
The launcher, one per agent-server process, is started at first use (``python -I -S -B
sandbox_zygote.py``, a ``SOCK_SEQPACKET`` socket pair); every call is a ``fork`` of it, so a
command no longer pays a Python start-up. If the launcher cannot be reached (it died and does not
restart, or cannot start), the command starts the old way: ``fallback_argv`` (``python -I -S
sandbox_exec.py --spec … -- ARGV``) as a child of agent-server — same confinement, slower.

Must never: run a command unconfined because the launcher failed (the fallback confines too), or
block the event loop on the launcher (requests are sent without blocking; a full queue is waited
for with the loop).
"""

from __future__ import annotations

import array
import asyncio
import logging
import marshal
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("agent_server.policy")

ZYGOTE = Path(__file__).with_name("sandbox_zygote.py")
MAX_INLINE = 64 * 1024  # the zygote's MAX_MESSAGE
_INT = struct.Struct("=i")


class LauncherUnavailable(OSError):
    """The launcher cannot take requests (not started, died, or refused to start)."""


class Zygote:
    """One running ``sandbox_zygote`` process and our end of its socket."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            args = [sys.executable, "-I", "-S", "-B", str(ZYGOTE), str(theirs.fileno())]
            if threading.current_thread() is threading.main_thread():
                args.append("--pdeathsig")  # the parent-death signal follows the starting *thread*
            self.proc = subprocess.Popen(args, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, env={}, cwd="/")
        except OSError:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.setblocking(False)
        self.sock = ours

    def alive(self) -> bool:
        """The process still runs (it may still die before it reads a request)."""
        return self.proc.poll() is None

    def close(self) -> None:
        """Close our end (the zygote then exits) and reap it."""
        self.sock.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    async def send(self, data: bytes, fds: list[int]) -> None:
        """Send one request with ``fds``; raises ``LauncherUnavailable`` if the zygote is gone."""
        loop = asyncio.get_running_loop()
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))]
        while True:
            try:
                self.sock.sendmsg([data], ancillary)
                return
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(self.sock, lambda: ready.done() or ready.set_result(None))
                try:
                    await asyncio.wait_for(ready, timeout=5)
                except TimeoutError:
                    raise LauncherUnavailable("the shell launcher does not take requests") from None
                finally:
                    loop.remove_writer(self.sock)
            except OSError as exc:
                raise LauncherUnavailable(f"the shell launcher is gone ({exc.strerror or exc})") from None


_LOCK = threading.Lock()
_ZYGOTE: Zygote | None = None


def _zygote(restart: bool = False) -> Zygote:
    global _ZYGOTE
    with _LOCK:
        if _ZYGOTE is not None and (restart or not _ZYGOTE.alive()):
            _ZYGOTE.close()
            _ZYGOTE = None
        if _ZYGOTE is None:
            _ZYGOTE = Zygote()
        return _ZYGOTE


def stop_launcher() -> None:
    """Stop the launcher (the next confined command starts a new one)."""
    global _ZYGOTE
    with _LOCK:
        if _ZYGOTE is not None:
            _ZYGOTE.close()
            _ZYGOTE = None


def launcher_pid() -> int | None:
    """The launcher's pid while one runs (``None``: not started)."""
    zyg = _ZYGOTE
    return zyg.proc.pid if zyg is not None and zyg.alive() else None


class _StatusReader(asyncio.Protocol):
    """Reads the status pipe: the pid (4 bytes), then the wait status (4 bytes; a later one is ignored)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.buffer = b""
        self.pid: asyncio.Future[int] = loop.create_future()
        self.status: asyncio.Future[int | None] = loop.create_future()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.pid.done() and len(self.buffer) >= 4:
            self.pid.set_result(_INT.unpack_from(self.buffer)[0])
        if not self.status.done() and len(self.buffer) >= 8:
            self.status.set_result(_INT.unpack_from(self.buffer, 4)[0])

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.pid.done():
            self.pid.set_exception(LauncherUnavailable("the shell launcher ended before it started the command"))
        if not self.status.done():
            self.status.set_result(None)  # the launcher died: its children died with it (SIGKILL)


class ConfinedProcess:
    """A command started by the launcher (see the module docstring)."""

    def __init__(self, pid: int, stdout: asyncio.StreamReader, out_transport: asyncio.BaseTransport,
                 status_transport: asyncio.BaseTransport, status: "asyncio.Future[int | None]") -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._transport = _Transports(out_transport, status_transport)
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        status.add_done_callback(self._on_status)

    def _on_status(self, fut: "asyncio.Future[int | None]") -> None:
        raw = None if fut.cancelled() else fut.result()
        if raw is None:
            code = -signal.SIGKILL
        elif os.WIFSIGNALED(raw):
            code = -os.WTERMSIG(raw)
        elif os.WIFEXITED(raw):
            code = os.WEXITSTATUS(raw)
        else:
            code = -signal.SIGKILL
        self.returncode = code
        self._transport.close_status()
        if not self.exited.done():
            self.exited.set_result(code)

    async def wait(self) -> int:
        """The return code, once the command's leader has exited (negative: killed by that signal)."""
        return await asyncio.shield(self.exited)


class _Transports:
    """``ConfinedProcess._transport``: ``close()`` releases our ends of both pipes."""

    def __init__(self, out: asyncio.BaseTransport, status: asyncio.BaseTransport) -> None:
        self.out, self.status = out, status

    def close_status(self) -> None:
        if not self.status.is_closing():
            self.status.close()

    def close(self) -> None:
        self.close_status()
        if not self.out.is_closing():
            self.out.close()


async def _spawn_once(zyg: Zygote, request: bytes) -> ConfinedProcess:
    loop = asyncio.get_running_loop()
    out_r, out_w = os.pipe()
    st_r, st_w = os.pipe()
    extra: list[int] = []
    try:
        if len(request) + 1 <= MAX_INLINE:
            data = b"M" + request
        else:
            memfd = os.memfd_create("agent-server-spawn", os.MFD_CLOEXEC)
            extra.append(memfd)
            os.write(memfd, request)
            data = b"F"
        await zyg.send(data, [out_w, st_w, *extra])
    except BaseException:
        for fd in (out_r, st_r):
            os.close(fd)
        raise
    finally:
        for fd in (out_w, st_w, *extra):
            os.close(fd)
    reader = _StatusReader(loop)
    status_transport, _ = await loop.connect_read_pipe(lambda: reader, os.fdopen(st_r, "rb", 0))
    stdout = asyncio.StreamReader(limit=2 ** 16, loop=loop)
    out_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdout, loop=loop),
                                                    os.fdopen(out_r, "rb", 0))
    try:
        pid = await reader.pid
    except BaseException:
        status_transport.close()
        out_transport.close()
        raise
    if pid < 0:
        status_transport.close()
        out_transport.close()
        raise OSError(-pid, f"the shell launcher could not start the command: {os.strerror(-pid)}")
    return ConfinedProcess(pid, stdout, out_transport, status_transport, reader.status)


async def _launch(request: bytes, instead: str) -> ConfinedProcess | None:
    """Send ``request`` to the launcher (restarted once if it died); ``None`` when it cannot be had."""
    for attempt in range(2):
        try:
            zyg = _zygote(restart=attempt > 0)
        except OSError as exc:
            log.warning("the shell launcher cannot start (%s); %s", exc, instead)
            return None
        try:
            return await _spawn_once(zyg, request)
        except LauncherUnavailable as exc:
            log.info("shell launcher unavailable (%s)%s", exc, "; restarting it" if attempt == 0 else "")
    return None


async def spawn_unconfined(argv: list[str], env: dict[str, str], cwd: str) -> ConfinedProcess | None:
    """Start ``argv`` unconfined in ``cwd`` with exactly ``env``, its whole process tree ended with
    it (``sandbox_reaper``); ``None`` when the launcher is unavailable (or not Linux): the caller
    starts it its own way. Raises ``OSError`` when the command cannot be started at all."""
    if not sys.platform.startswith("linux"):
        return None
    request = marshal.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd), "spec": None})
    return await _launch(request, "using the reaper")


async def spawn_confined(argv: list[str], env: dict[str, str], cwd: str, spec: dict[str, Any],
                         fallback_argv: list[str]) -> Any:
    """Start ``argv`` confined by ``spec`` in ``cwd`` with exactly ``env``; returns a
    ``ConfinedProcess``, or (launcher unavailable) the ``asyncio`` process of ``fallback_argv``.
    Raises ``OSError`` when the command cannot be started at all."""
    request = marshal.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd), "spec": spec})
    proc = await _launch(request, "using the wrapper")
    if proc is not None:
        return proc
    return await asyncio.create_subprocess_exec(
        *fallback_argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
