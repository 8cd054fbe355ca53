"""A long-lived launcher of confined shell commands: the "zygote" (stdlib only, run with ``-I -S``).

Role: ``python -I -S -B sandbox_zygote.py FD`` serves spawn requests from agent-server on the
``SOCK_SEQPACKET`` socket ``FD``. It pays the interpreter start-up and the imports of
``sandbox_exec`` once; each request then costs a ``fork``. Per request the forked child does
exactly what ``sandbox_exec --spec SPEC -- ARGV`` does as a fresh process: it leads a new session
(its pid is the process group agent-server signals), takes ``/dev/null`` as stdin and the given
pipe as stdout and stderr, closes every other descriptor, enters its *own* new mount, PID (and
network) namespaces, forks the namespace's PID 1, which mounts a fresh ``/proc`` and that call's
masks, drops capabilities, applies Landlock and seccomp, and forks the command
(``sandbox_exec.run_confined``). Nothing of one call's confinement is shared with another. A
request whose spec is ``None`` is an unconfined call: the child, a child subreaper, runs the
command and kills whatever it left (``sandbox_reaper.run_reaped``).

Must never: let a command inherit the control socket or another call's descriptors (a confined
command holding the socket could ask for an unconfined one), run a command whose confinement
failed (``run_confined`` refuses with exit status 126), or run one unconfined that its request did
not say so of (``"spec": None``; a request without a spec is refused).

A request is one message ``b"M" + marshal({"argv", "env", "cwd", "spec"})`` (or ``b"F"`` with the
marshal bytes in a third descriptor, for a large spec) carrying two descriptors: the output pipe's
write end and a status pipe's write end. On the status pipe the zygote writes the child's pid
(``=i``; a negative errno when ``fork`` failed); then comes a raw wait status (``=i``): the
command's, written by the child once its namespace is gone, or — when the child ended without
writing it (killed) — the child's own, written by the zygote when it reaps it. Only the first
status counts.

Ends when agent-server closes its end of the socket (its exit, even by ``kill -9``); every child
then dies by its parent-death signal, and with it its namespace's PID 1 and the whole command
(an unconfined call's child gets ``SIGTERM``: it kills its command's tree, then exits).
"""

from __future__ import annotations

import _signal as signal
import _socket
import marshal
import os
import select
import struct
import sys

if __package__:
    from agent_server.policy.sandbox import sandbox_exec, sandbox_reaper
else:  # run as a script with -I -S: load the sibling modules from this folder
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sandbox_exec  # type: ignore[no-redef]
    import sandbox_reaper  # type: ignore[no-redef]

PR_SET_PDEATHSIG = 1
MAX_MESSAGE = 64 * 1024
"""Largest inline request; a larger one comes as a descriptor (``b"F"``)."""
_FDS = struct.calcsize("=i")


def _recv(sock: _socket.socket) -> tuple[bytes, list[int]]:
    """One request and its descriptors (``b""`` at end of stream)."""
    data, ancdata, _flags, _addr = sock.recvmsg(MAX_MESSAGE + 1, _socket.CMSG_SPACE(4 * _FDS))
    fds: list[int] = []
    for level, kind, payload in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            usable = len(payload) - len(payload) % _FDS
            fds += list(struct.unpack(f"={usable // _FDS}i", payload[:usable]))
    return data, fds


def _read_all(fd: int) -> bytes:
    chunks = []
    os.lseek(fd, 0, os.SEEK_SET)
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _child(request: dict, out: int, status: int, zygote: int) -> int:
    """In the forked child: take the call's descriptors, then confine and run (never returns
    normally: ``run_confined`` execs, or this returns the status to leave with)."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    unconfined = request["spec"] is None
    # an unconfined call's leader must kill its tree first: a catchable parent-death signal
    sandbox_exec._libc().prctl(PR_SET_PDEATHSIG, signal.SIGTERM if unconfined else signal.SIGKILL, 0, 0, 0)
    if os.getppid() != zygote:  # the zygote died before the signal was set
        return sandbox_exec.EXIT_REFUSED
    os.setsid()
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.dup2(status, 3, inheritable=False)  # we report the command's end ourselves (one wake-up less)
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))
    try:
        os.chdir(request["cwd"])
    except OSError as exc:
        return sandbox_exec._refuse(OSError(f"cannot enter {request['cwd']}: {exc.strerror}"))
    if unconfined:
        return sandbox_reaper.run_reaped(request["argv"], request["env"], 3, sandbox_exec._libc().prctl)
    return sandbox_exec.run_confined(request["spec"], sandbox_exec._exec(request["argv"], request["env"]),
                                     report_fd=3)


def _spawn(data: bytes, fds: list[int], children: dict[int, int]) -> None:
    """Handle one request: fork the confined child, report its pid on the status pipe."""
    kept: int | None = None
    try:
        if len(fds) < 2:
            return
        out, status = fds[0], fds[1]
        try:
            payload = _read_all(fds[2]) if data[:1] == b"F" and len(fds) > 2 else data[1:]
            request = marshal.loads(payload)
            if not isinstance(request, dict) or "spec" not in request:
                raise ValueError("no spec")
            if isinstance(request.get("spec"), str):
                request["spec"] = sandbox_exec.decode_spec(request["spec"])
        except (ValueError, EOFError, TypeError, OSError, AttributeError) as exc:
            _report(status, -22)  # EINVAL
            _report_text(out, f"agent-server sandbox: bad spawn request ({exc}); nothing was run.\n")
            return
        zygote = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            _report(status, -(exc.errno or 12))
            return
        if pid == 0:
            code = sandbox_exec.EXIT_REFUSED
            try:
                code = _child(request, out, status, zygote)
            finally:
                os._exit(code)
        children[pid] = kept = status
        _report(status, pid)
    finally:
        for fd in fds:
            if fd != kept:
                os.close(fd)


def _report(fd: int, value: int) -> None:
    try:
        os.write(fd, struct.pack("=i", value))
    except OSError:
        pass  # agent-server gave up on this call


def _report_text(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode())
    except OSError:
        pass


def _reap(children: dict[int, int]) -> None:
    while children:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = children.pop(pid, None)
        if fd is not None:
            _report(fd, status)
            os.close(fd)


def serve(sock_fd: int) -> int:
    """Serve requests on ``sock_fd`` until agent-server closes it; returns the exit status."""
    os.set_inheritable(sock_fd, False)  # besides the close in every child: never across an exec
    sock = _socket.socket(fileno=sock_fd)
    sandbox_exec.warm()
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    os.set_blocking(wake_r, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    for sig in (signal.SIGINT, signal.SIGHUP):  # a terminal's Ctrl-C is for agent-server, not us
        signal.signal(sig, signal.SIG_IGN)
    children: dict[int, int] = {}
    while True:
        ready, _, _ = select.select([sock_fd, wake_r], [], [])
        if wake_r in ready:
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
            _reap(children)
        if sock_fd in ready:
            try:
                data, fds = _recv(sock)
            except InterruptedError:
                continue
            except OSError:
                return 0
            if not data and not fds:
                return 0  # agent-server is gone: our children follow by their parent-death signal
            _spawn(data, fds, children)
            _reap(children)


def main(argv: list[str]) -> int:
    """``FD [--pdeathsig]``: serve on descriptor ``FD`` (with ``--pdeathsig``, also die with the
    thread that started us)."""
    if not argv or not argv[0].isdigit():
        sys.stderr.write("usage: sandbox_zygote FD [--pdeathsig]\n")
        return 2
    if "--pdeathsig" in argv[1:]:
        sandbox_exec._libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    return serve(int(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
