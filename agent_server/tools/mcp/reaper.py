"""The launcher of a stdio MCP server: the server's whole process tree ends with it and with us.

    python -I -S reaper.py PARENT_PID [--subreaper] [--same-signal] -- COMMAND [ARG …]

Must never: import anything but the standard library, or outlive its parent.

Role: most servers are started as ``npx -y …``, ``uvx …`` or ``sh -c …``: the process we start is
a launcher, the real server its child, and some servers double-fork helpers of their own. This
script (standard library only, run by path so it starts in milliseconds) makes sure none of them
outlives the server's end, ``session/close``, our normal exit or our ``kill -9``:

* **PID namespace** (where user namespaces work, or as root): it dies with the agent
  (``PR_SET_PDEATHSIG`` ``SIGKILL``, checked against ``PARENT_PID`` for the race), enters a new user
  namespace mapping our own uid/gid and a new PID namespace, and forks PID 1 of it, which dies with
  this launcher and runs the command as its child. When PID 1 ends — the command exited, or this
  launcher was killed — the kernel kills every process of the namespace, daemonized or not.
* **Subreaper** elsewhere (or with ``--subreaper``): this launcher becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``: every
  orphan of the tree is re-parented to it), gets ``SIGTERM`` when the agent dies, and when the
  command exits or a signal ends it, kills every descendant it can find (repeatedly, until none is
  left) before it exits.

The command keeps the launcher's stdin, stdout and stderr (the MCP stdio pipes). The launcher exits
with the command's status (``128 + signal`` for a signal; with ``--same-signal`` it ends by that
signal itself, as the command did). The ``bash`` tool runs an unconfined shell command under it
too (``--subreaper``: no user namespace, so ids and setuid programs behave as without it). Servers that hand their work to a daemon
outside the tree (``docker run``: the container belongs to dockerd) are out of reach of both.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
CLONE_NEWUSER, CLONE_NEWPID = 0x10000000, 0x20000000
_libc = ctypes.CDLL(None, use_errno=True)


def _status_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _exec(command: list[str]) -> None:
    """In the forked child: default signal handling, then the command (127 when it cannot run)."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        os.write(2, f"agent-server: cannot run {command[0]!r}: {exc.strerror}\n".encode())
    os._exit(127)


def _enter_namespaces() -> bool:
    """A new PID namespace (in a new user namespace mapping our ids unless we are root)."""
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        return _libc.unshare(CLONE_NEWPID) == 0
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWPID) != 0:
        return False
    try:
        for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                           ("/proc/self/gid_map", f"{gid} {gid} 1")):
            with open(path, "w") as f:
                f.write(text)
    except OSError:
        return False  # the PID namespace is unshared but unusable without a mapping: the caller falls back
    return True


def _init(command: list[str], alive_r: int) -> None:
    """PID 1 of the namespace: dies with the launcher, runs the command, reaps orphans, and exits
    with the command's status (the kernel then kills the rest of the namespace)."""
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.set_blocking(alive_r, False)
    try:
        if os.read(alive_r, 1) == b"":  # the launcher died before the signal was set
            os._exit(1)
    except BlockingIOError:
        pass
    os.close(alive_r)
    server = os.fork()
    if server == 0:
        _exec(command)
    relay = lambda sig, _frame: _kill(server, sig)  # noqa: E731 - a stop asked of us goes to the command
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, relay)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(1)
        except InterruptedError:
            continue
        if pid == server:
            os._exit(_status_code(status))


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _descendants(root: int) -> list[int]:
    """Every living process below ``root`` (``/proc`` scan)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1 and fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree() -> None:
    """SIGKILL every descendant and reap, until none is left (a tree that forks while it dies is
    walked again)."""
    me = os.getpid()
    try:  # a subreaper with no child has no descendant at all: no /proc scan (the common case)
        if os.waitpid(-1, os.WNOHANG) == (0, 0):
            pass
    except ChildProcessError:
        return
    for _ in range(100):
        left = _descendants(me)
        for pid in left:
            _kill(pid, signal.SIGKILL)
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
        if not left and not _descendants(me):
            return


def _end_as(sig: int | None, code: int) -> int:
    """End by ``sig`` (the command's death, or the stop we were asked for), else return ``code``."""
    if sig is not None:
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL, SIGSTOP: always their default
            pass
        sys.stdout.flush()
        os.kill(os.getpid(), sig)
    return code


def _supervise(command: list[str], same_signal: bool = False) -> int:
    """The fallback: a child subreaper that kills the whole tree when the command ends or it is told
    to stop (``SIGTERM``, also sent when the agent dies)."""
    _libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    stopping: list[int] = []

    def stop(sig: int, _frame: object) -> None:
        stopping.append(sig)
        raise KeyboardInterrupt

    server = os.fork()
    if server == 0:
        _exec(command)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)  # catchable now: the tree is killed first
    code, died_by = 1, None
    try:
        while True:
            try:
                pid, status = os.wait()
            except ChildProcessError:
                break
            if pid == server:
                code = _status_code(status)
                died_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
                break
    except KeyboardInterrupt:
        code, died_by = 128 + stopping[0], stopping[0]
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    _kill_tree()
    return _end_as(died_by, code) if same_signal else code


def main(argv: list[str]) -> int:
    rest = argv[2:]
    flags = set()
    while rest and rest[0] in ("--subreaper", "--same-signal"):
        flags.add(rest.pop(0))
    subreaper, same_signal = "--subreaper" in flags, "--same-signal" in flags
    if len(rest) < 2 or rest[0] != "--" or len(argv) < 2 or not argv[1].isdigit():
        sys.stderr.write("usage: reaper.py PARENT_PID [--subreaper] [--same-signal] -- COMMAND [ARG …]\n")
        return 2
    parent, command = int(argv[1]), rest[1:]
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the agent died before the signal was set
        return 1
    if not subreaper and _enter_namespaces():
        alive_r, alive_w = os.pipe()  # PID 1 learns from its end whether we died before its own signal
        init = os.fork()
        if init == 0:
            os.close(alive_w)
            _init(command, alive_r)
        os.close(alive_r)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # we stop when PID 1 does
            signal.signal(sig, lambda sig, _frame: _kill(init, sig))
        while True:
            try:
                _, status = os.waitpid(init, 0)
                return _status_code(status)
            except InterruptedError:
                continue
            except ChildProcessError:
                return 1
    return _supervise(command, same_signal)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
