"""An unconfined shell command forked from the long-lived launcher, and everything it starts, ended together.

Role: ``run_reaped(argv, env, report_fd)`` runs in a child the launcher (``sandbox_zygote``) forked
for a call with no sandbox (``danger-full-access``, or no sandbox on this machine). That child is
the call's session leader (agent-server signals its group) and a child subreaper
(``PR_SET_CHILD_SUBREAPER``: every orphan of the command's tree, ``setsid`` and double-forked ones
included, becomes its child). It forks the command with exactly ``env``; when the command exits,
or this child is told to stop (``SIGTERM``/``SIGINT``/``SIGHUP``: a timeout or a cancel through its
group, or its parent-death signal ``SIGTERM`` when the launcher dies — with agent-server, even by
``kill -9``), it ``SIGKILL``\\s every descendant left, reaps them, and only then writes the command's
wait status (``=i``) to ``report_fd``. What ``tools/mcp/reaper.py --subreaper`` does as a process
of its own, without a Python start per call (bench/README.md, the unconfined shell).

Must never: import anything but the standard library (it runs in the launcher's ``-I -S``
interpreter), let the command inherit ``report_fd`` or the launcher's socket, or report the
command's end before its tree is gone.
"""

from __future__ import annotations

import _signal as signal
import os
import select
import struct

TYPE_CHECKING = False  # typing is not imported (the launcher's start-up counts)
if TYPE_CHECKING:
    from collections.abc import Callable

PR_SET_CHILD_SUBREAPER = 36
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_KILL_ROUNDS = 1000


class _Stop(Exception):
    """A stop signal arrived (its number is the argument)."""


_STOPPED: list[int] = []


def _stop(sig: int, _frame: object) -> None:
    if not _STOPPED:  # once: a second stop must not break out of the tree's kill
        _STOPPED.append(sig)
        raise _Stop(sig)


def _children_of(pid: int) -> list[int] | None:
    """``pid``'s children from ``/proc/PID/task/*/children`` (``None``: the kernel lacks that file)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    found: list[int] = []
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as handle:
                found += [int(kid) for kid in handle.read().split()]
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # that thread ended meanwhile
            return None
        except OSError:
            continue
    return found


def _scan(root: int) -> list[int]:
    """Every process below ``root`` (a whole ``/proc`` scan: kernels without the children files)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            if len(fields) > 1:
                children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = [], [root]
    while todo:
        for kid in children.get(todo.pop(), []):
            found.append(kid)
            todo.append(kid)
    return found


def _descendants(root: int) -> list[int]:
    found, todo = [], [root]
    while todo:
        kids = _children_of(todo.pop())
        if kids is None:
            return _scan(root)
        found += kids
        todo += kids
    return found


def _running(pid: int) -> bool:
    """Not yet a zombie (a zombie is dead: only its parent's wait is missing)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] != b"Z"


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def kill_tree() -> None:
    """``SIGKILL`` every descendant and reap, until none runs (a tree that forks while it dies is
    walked again; one that will not die is left after ``_KILL_ROUNDS`` looks)."""
    me = os.getpid()
    for _ in range(_KILL_ROUNDS):
        left = [pid for pid in _descendants(me) if _running(pid)]
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap()
        select.select([], [], [], 0.001)  # a killed process takes a moment to exit
    _reap()


def _exec(argv: list[str], env: dict[str, str]) -> None:
    """In the command's child: the default dispositions (an ignored signal survives ``exec``), then the command."""
    for sig in (*STOPS, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        os.write(2, f"agent-server: cannot run {argv[0]!r}: {exc.strerror}\n".encode())


def run_reaped(argv: list[str], env: dict[str, str], report_fd: int, prctl: "Callable[..., int]") -> int:
    """Run ``argv`` (stdin, stdout, stderr: this process's 0, 1, 2) and end its whole tree with it;
    writes the command's wait status to ``report_fd`` (a stop's signal as a death by that signal)
    and returns the exit status for this process. ``prctl``: libc's (loaded once by the launcher)."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    for sig in STOPS:
        signal.signal(sig, _stop)
    status = signal.SIGKILL  # a raw wait status: killed by SIGKILL (the command was never seen to end)
    try:
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        command = os.fork()
        if command == 0:
            try:
                _exec(argv, env)
            finally:
                os._exit(127)
        null = os.open(os.devnull, os.O_RDWR)  # the output pipe ends with the command's tree, not with us
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
        while True:
            pid, raw = os.wait()
            if pid == command:
                status = raw
                break
    except _Stop as stop:
        status = stop.args[0]
    except ChildProcessError:
        pass
    except OSError as exc:  # the fork failed (a process limit): nothing ran
        os.write(2, f"agent-server: cannot start the command: {exc.strerror}\n".encode())
        status = 127 << 8
    finally:
        for sig in STOPS:
            signal.signal(sig, signal.SIG_IGN)
    kill_tree()
    try:
        os.write(report_fd, struct.pack("=i", status))
    except OSError:
        pass  # agent-server gave up on this call
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
