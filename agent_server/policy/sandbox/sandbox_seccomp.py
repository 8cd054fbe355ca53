"""A seccomp filter for the confined shell, written as classic BPF through ``prctl`` (stdlib only).

Role: ``install(block_unix)`` loads a filter into this process (inherited by everything it
starts, never removable) that

Must never: load a partial filter; the caller refuses to run the command when ``install`` raises.

* refuses mode bits ``S_ISUID``/``S_ISGID`` (``EPERM``) in ``chmod``, ``fchmod``, ``fchmodat``,
  ``fchmodat2``, ``mkdir``/``mkdirat``, ``mknod``/``mknodat``, and in ``open``/``openat``/``creat``
  when they create (``O_CREAT`` or ``O_TMPFILE``) — so the confined shell cannot leave a setuid or
  setgid file behind (``chmod u+s``, ``cp -p``, ``install -m 4755``, ``os.open(…, 0o4755)``);
* answers ``ENOSYS`` to ``openat2`` (its mode is behind a pointer the filter cannot read; libc and
  runtimes fall back to ``openat``) and to ``io_uring_setup`` (io_uring operations bypass seccomp);
* with ``block_unix``: refuses ``socket(AF_UNIX, …)`` (``EPERM``) — path sockets such as
  ``docker.sock`` or an ssh-agent are unreachable; ``socketpair`` keeps working;
* refuses every system call of another ABI (32-bit ``int 0x80`` on x86-64, x32) with ``ENOSYS``,
  so the numbers checked above cannot be sidestepped.

``supported()`` says whether this machine's architecture is covered (x86-64, aarch64).
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
OFF_NR, OFF_ARCH = 0, 4
S_ISUID_GID = 0o6000
O_CREAT, O_TMPFILE_BIT = 0o100, 0o20000000
AF_UNIX = 1
X32_BIT = 0x40000000

# (audit arch, {syscall name: number}) for each supported machine.
_ARCHES = {
    "x86_64": (0xC000003E, {
        "chmod": 90, "fchmod": 91, "fchmodat": 268, "fchmodat2": 452, "open": 2, "openat": 257, "creat": 85,
        "mkdir": 83, "mkdirat": 258, "mknod": 133, "mknodat": 259, "openat2": 437, "io_uring_setup": 425,
        "socket": 41}),
    "aarch64": (0xC00000B7, {
        "fchmod": 52, "fchmodat": 53, "fchmodat2": 452, "openat": 56, "mkdirat": 34, "mknodat": 33,
        "openat2": 437, "io_uring_setup": 425, "socket": 198}),
}
# Which argument holds the mode, and (for opens) which holds the flags.
_MODE_ARG = {"chmod": 1, "fchmod": 1, "fchmodat": 2, "fchmodat2": 2, "creat": 1, "mkdir": 1, "mkdirat": 2,
             "mknod": 1, "mknodat": 2}
_OPEN_ARGS = {"open": (1, 2), "openat": (2, 3)}  # (flags, mode)


class SeccompError(Exception):
    """The filter could not be built or loaded."""


def _machine() -> str:
    machine = os.uname().machine.lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def supported() -> bool:
    """Whether ``install`` knows this architecture's system call numbers."""
    return _machine() in _ARCHES


def _arg(index: int) -> int:
    return 16 + 8 * index  # low 32 bits of args[index] (little-endian) in struct seccomp_data


def build(block_unix: bool, machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as ``(code, jt, jf, k)`` instructions (see the module docstring)."""
    machine = machine or _machine()
    if machine not in _ARCHES:
        raise SeccompError(f"seccomp filter: unsupported architecture {machine}")
    arch, numbers = _ARCHES[machine]
    prog: list[tuple] = []  # (code, jt, jf, k), jt/jf label names or ints; BPF jumps only forward

    def op(code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        prog.append((code, jt, jf, k))

    labels: dict[str, int] = {}
    op(LD_W_ABS, OFF_ARCH)
    op(JEQ_K, arch, 0, "enosys")
    op(LD_W_ABS, OFF_NR)
    if machine == "x86_64":
        op(JSET_K, X32_BIT, "enosys", 0)
    checks: list[tuple[str, str]] = []
    for name, nr in numbers.items():
        if name in _MODE_ARG:
            checks.append((name, f"mode{_MODE_ARG[name]}"))
        elif name in _OPEN_ARGS:
            checks.append((name, f"open_{name}"))
        elif name in ("openat2", "io_uring_setup"):
            checks.append((name, "enosys"))
        elif name == "socket" and block_unix:
            checks.append((name, "socket"))
    for name, target in checks:
        op(JEQ_K, numbers[name], target, 0)
    op(RET_K, RET_ALLOW)
    for name in (n for n, _ in checks if n in _OPEN_ARGS):
        flags, mode = _OPEN_ARGS[name]
        labels[f"open_{name}"] = len(prog)
        op(LD_W_ABS, _arg(flags))
        op(JSET_K, O_CREAT | O_TMPFILE_BIT, f"mode{mode}", "allow")
    for index in sorted({_MODE_ARG[n] for n, _ in checks if n in _MODE_ARG} |
                        {_OPEN_ARGS[n][1] for n, _ in checks if n in _OPEN_ARGS}):
        labels[f"mode{index}"] = len(prog)
        op(LD_W_ABS, _arg(index))
        op(JSET_K, S_ISUID_GID, "eperm", "allow")
    labels["socket"] = len(prog)
    op(LD_W_ABS, _arg(0))
    op(JEQ_K, AF_UNIX, "eperm", "allow")
    labels["allow"] = len(prog)
    op(RET_K, RET_ALLOW)
    labels["eperm"] = len(prog)
    op(RET_K, RET_ERRNO | errno.EPERM)
    labels["enosys"] = len(prog)
    op(RET_K, RET_ERRNO | errno.ENOSYS)
    out = []
    for i, (code, jt, jf, k) in enumerate(prog):
        rel = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if any(not 0 <= r < 256 for r in rel):
            raise SeccompError("seccomp filter: jump out of range")
        out.append((code, rel[0], rel[1], k))
    return out


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_PROGRAMS: dict[bool, bytes] = {}


def program(block_unix: bool) -> bytes:
    """``build(block_unix)`` packed as ``struct sock_filter`` array, built once per process."""
    raw = _PROGRAMS.get(block_unix)
    if raw is None:
        raw = _PROGRAMS[block_unix] = b"".join(struct.pack("=HBBI", *ins) for ins in build(block_unix))
    return raw


def install(block_unix: bool) -> None:
    """Set ``no_new_privs`` and load the filter into this process. Raises ``SeccompError``."""
    raw = program(block_unix)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _Fprog(len(raw) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SeccompError(f"prctl(PR_SET_NO_NEW_PRIVS): {ctypes.get_errno()}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise SeccompError(f"prctl(PR_SET_SECCOMP): {errno.errorcode.get(err, err)}")
