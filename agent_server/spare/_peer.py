"""The spare's own check of a connecting launcher's confinement, read from the kernel.

Why: a spare forks an *unconfined* child that becomes the launch's server, so a process that is
itself confined — a model-run shell command (Landlock + seccomp + namespaces, ``NoNewPrivs``) —
must never get one, whatever it sends: the token and the key travel in the request and a confined
command can read or guess them (another spare folder it can see, the key's checksum in the
socket's name). So nothing the client says is trusted here; ``refusal(sock)`` looks at the peer
process itself and returns why it is refused, or ``None``.

What is checked (the spare was started by a launcher with the same confinement — its key, which
includes all of this, summed to its name — so a legitimate launcher's values EQUAL the spare's own,
read once by ``Own()``):

* who: the peer's pid from the kernel. With ``SO_PEERPIDFD`` (Linux 6.5+) a pidfd of the process
  that called ``connect()`` (no pid reuse: its ``fdinfo`` gives the pid, ``-1`` once it has ended);
  otherwise the ``SO_PEERCRED`` pid and a ``pidfd_open`` of it. The uid and gid of ``SO_PEERCRED``
  must be the spare's.
* ``/proc/<pid>/status``: ``Uid``, ``Gid``, ``Groups``, ``CapInh``, ``CapPrm``, ``CapEff``,
  ``CapBnd``, ``CapAmb``, ``NoNewPrivs``, ``Seccomp``, ``Seccomp_filters`` equal the spare's (the
  spare's kernel must show ``NoNewPrivs`` and ``Seccomp``, else every peer is refused). A confined
  command has ``NoNewPrivs: 1`` and more seccomp filters — neither can ever be undone by the
  process — so it is refused. Landlock domains are not shown in ``/proc``; restricting oneself with
  Landlock needs ``NoNewPrivs`` or ``CAP_SYS_ADMIN``, both compared here.
* ``/proc/<pid>/ns/*`` (every namespace of ``_launcher.NAMESPACES``): the same inodes as the
  spare's (one missing on both — a kernel without it — is equal; unreadable for the peer only is
  not). The sandbox's user, mount and pid namespaces differ.
* ``/proc/<pid>/exe`` is the spare's interpreter (same device and inode), ``/proc/<pid>/root`` is
  the spare's root, ``/proc/<pid>/cgroup`` is the spare's.
* no race: after the reads the pidfd must still name a live process (``pidfd_send_signal`` 0), so
  the pid was not reused by another process meanwhile; an ended or zombie peer (its ``ns`` and
  ``exe`` unreadable) is refused. The peer reads are done while the request is being served; a
  peer can only tighten its confinement afterwards, never loosen it.

Anything different, unreadable or racy → refused: the launch runs cold, as with no spare. Cost:
~15 small ``/proc`` reads per launch (well under a millisecond).
"""

from __future__ import annotations

import _signal
import _socket
import os
import sys

from agent_server.spare import _launcher as L

SO_PEERPIDFD = getattr(_socket, "SO_PEERPIDFD", 77)
"""Linux 6.5+ (``asm-generic/socket.h``); Python 3.11's ``socket`` does not name it."""
STATUS_FIELDS = (b"Uid:", b"Gid:", b"Groups:", b"CapInh:", b"CapPrm:", b"CapEff:", b"CapBnd:", b"CapAmb:",
                 b"NoNewPrivs:", b"Seccomp:", b"Seccomp_filters:")
REQUIRED = (b"NoNewPrivs:", b"Seccomp:")


def _confinement(proc: str) -> tuple:
    """What ``refusal`` compares, of ``/proc/<pid>`` (``proc``); raises ``OSError``."""
    with open(proc + "/status", "rb") as f:
        status = f.read()
    fields = tuple(line for line in status.split(b"\n") if line.startswith(STATUS_FIELDS))
    spaces = []
    for name in L.NAMESPACES:
        try:
            spaces.append(os.readlink(f"{proc}/ns/{name}"))
        except FileNotFoundError:
            spaces.append("-")
    exe = os.stat(proc + "/exe")
    root = os.stat(proc + "/root")
    with open(proc + "/cgroup", "rb") as f:
        cgroup = f.read()
    return (fields, tuple(spaces), (exe.st_dev, exe.st_ino), (root.st_dev, root.st_ino), cgroup)


class Own:
    """The spare's own values (read once: they never loosen)."""

    def __init__(self) -> None:
        try:
            self.values: tuple | None = _confinement("/proc/self")
        except OSError:
            self.values = None
        if self.values is not None:
            names = {line.split(b"\t", 1)[0] for line in self.values[0]}
            if not all(r in names for r in REQUIRED) or "-" in self.values[1][:2]:
                self.values = None  # this kernel does not show enough: refuse everyone
        self.uid, self.gid = os.getuid(), os.getgid()


def _pidfd_pid(pidfd: int) -> int:
    with open(f"/proc/self/fdinfo/{pidfd}", "rb") as f:
        for line in f.read().split(b"\n"):
            if line.startswith(b"Pid:"):
                return int(line[4:])
    raise OSError("no Pid in the pidfd's fdinfo")


def _peer_pidfd(sock: _socket.socket) -> tuple[int, int]:
    """``(pid, pidfd)`` of the process that connected ``sock``; raises ``OSError``."""
    pid = credentials(sock)[0]
    try:
        raw = sock.getsockopt(_socket.SOL_SOCKET, SO_PEERPIDFD, 4)
    except OSError:
        raw = None  # an older kernel: the pid of SO_PEERCRED, opened now
    if raw is not None:
        pidfd = int.from_bytes(raw, sys.byteorder, signed=True)
        try:
            if _pidfd_pid(pidfd) != pid:
                raise OSError("the peer's pidfd names another pid")
        except BaseException:
            os.close(pidfd)
            raise
        return pid, pidfd
    if pid <= 0:
        raise OSError("no peer pid")
    return pid, os.pidfd_open(pid)


def credentials(sock: _socket.socket) -> tuple[int, int, int]:
    """``(pid, uid, gid)`` of ``SO_PEERCRED`` (as of the peer's ``connect()``)."""
    cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    pid, uid, gid = (int.from_bytes(cred[i:i + 4], sys.byteorder, signed=True) for i in (0, 4, 8))
    return pid, uid, gid


def refusal(sock: _socket.socket, own: Own) -> str | None:
    """Why the peer of ``sock`` may not get a fork (module docstring), or ``None``."""
    if own.values is None:
        return "this spare cannot read its own confinement"
    try:
        _, uid, gid = credentials(sock)
        if (uid, gid) != (own.uid, own.gid):
            return "another user or group"
        pid, pidfd = _peer_pidfd(sock)
    except (OSError, ValueError) as exc:
        return f"the peer cannot be identified: {exc}"
    try:
        if pid <= 0:
            return "the peer has ended or is in another pid namespace"
        try:
            peer = _confinement(f"/proc/{pid}")
        except (OSError, ValueError) as exc:
            return f"the peer's confinement cannot be read: {exc}"
        try:
            _signal.pidfd_send_signal(pidfd, 0)
            if _pidfd_pid(pidfd) != pid:
                raise ProcessLookupError
        except (OSError, ValueError):
            return "the peer ended while it was checked"
        for what, mine, theirs in zip(("status", "namespaces", "executable", "root", "cgroup"), own.values, peer):
            if mine != theirs:
                return f"the peer's {what} differs from the spare's (a confined process?)"
        return None
    finally:
        os.close(pidfd)
