"""The shell's OS sandbox, applied in the child right before ``exec`` (Linux Landlock).

Role: ``python -I -S sandbox_exec.py --spec JSON -- ARGV...`` (or ``python -m
agent_server.policy.sandbox_exec``) confines *itself* and then ``exec``\\s ``ARGV``, so the
command and everything it starts inherit the confinement, which cannot be lifted:

1. ``.git`` folders listed in ``ro_binds`` are bind-mounted read-only onto themselves in a private
   mount namespace (Landlock only *adds* rights beneath a folder, so a read-only ``.git`` inside a
   writable root needs this);
2. for root, every capability is dropped from the bounding set (a confined root must not load
   modules or use raw I/O);
3. ``no_new_privs``, then a Landlock ruleset: read and execute anywhere (``read``), every file
   right beneath ``write``, read/write on the ``devices`` (``/dev/null``, the terminal), and with
   ``network: false`` no TCP ``bind``/``connect`` (Landlock ABI ≥ 4).

``--probe DIR [--network]`` applies the same steps to a scratch tree in ``DIR`` and *tests* them
(a write inside must work, writes outside and into ``.git`` must fail, a TCP connect must fail),
printing one JSON line of what is really enforced.

Must never: run the command when any requested step failed — it prints why on stderr and exits
126 instead. It imports only the standard library (it runs once per shell command, with ``-I -S``).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import socket
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18
EXIT_REFUSED = 126

# Landlock filesystem rights (uapi/linux/landlock.h), with the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR
DEVICE_RIGHTS = WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1


class SandboxError(Exception):
    """A confinement step failed; the command must not run."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise SandboxError(f"{what}: {os.strerror(err)} (errno {err})")
    return result


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    abi = libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(CREATE_RULESET_VERSION))
    return abi if abi > 0 else 0


def handled_fs(abi: int) -> int:
    """Every filesystem right the kernel of ``abi`` can restrict."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


SCOPE_SIGNAL = 1 << 1
"""``LANDLOCK_SCOPE_SIGNAL`` (ABI 6): no signals to processes outside the Landlock domain."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _add_path(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # nothing there to grant (e.g. no /dev/pts)
    except OSError as exc:
        raise SandboxError(f"cannot open {path}: {exc.strerror}") from None
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(rights & handled, fd)
        _check(libc.syscall(ctypes.c_long(SYS_ADD_RULE), ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                            ctypes.byref(rule), ctypes.c_uint32(0)), f"landlock_add_rule({path})")
    finally:
        os.close(fd)


def apply_landlock(spec: dict) -> int:
    """Restrict this process with the Landlock part of ``spec``; returns the ABI used.

    ``spec``: ``read``, ``write``, ``devices`` (lists of absolute paths), ``network`` (bool).
    Raises ``SandboxError`` (Landlock missing, network restriction needs ABI ≥ 4, a syscall failed).
    """
    abi = landlock_abi()
    if abi < 1:
        raise SandboxError("Landlock is not available on this kernel")
    libc = _libc()
    libc.syscall.restype = ctypes.c_long
    handled = handled_fs(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if not spec.get("network", True):
        if abi < 4:
            raise SandboxError(f"network = false needs Landlock ABI 4 (this kernel has {abi})")
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= 6:  # the command may not signal processes outside its sandbox (agent-server, the editor)
        attr.scoped = SCOPE_SIGNAL
        size = 24
    ruleset = _check(libc.syscall(ctypes.c_long(SYS_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                                  ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path in spec.get("read", []):
            _add_path(libc, ruleset, path, READ_RIGHTS, handled)
        for path in spec.get("write", []):
            _add_path(libc, ruleset, path, handled, handled)
        for path in spec.get("devices", []):
            _add_path(libc, ruleset, path, DEVICE_RIGHTS, handled)
        _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(libc.syscall(ctypes.c_long(SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def _locked_flags(path: str) -> int:
    """Mount flags of ``path``'s mount that a read-only remount must keep (nosuid, nodev …)."""
    f = os.statvfs(path).f_flag
    flags = 0
    for st, ms in ((os.ST_NOSUID, 2), (os.ST_NODEV, 4), (os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024),
                   (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21)):
        if f & st:
            flags |= ms
    return flags


def read_only_binds(paths: list[str]) -> None:
    """Bind-mount each path read-only onto itself in a new private mount namespace.

    As root only the mount namespace is new; otherwise a user namespace mapping our own uid/gid
    is made first. Raises ``SandboxError``.
    """
    if not paths:
        return
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(libc.unshare(CLONE_NEWNS), "unshare(mount namespace)")
    else:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user + mount namespace)")
        try:
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
        except OSError as exc:
            raise SandboxError(f"cannot map the user namespace: {exc.strerror}") from None
    _check(libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    for path in paths:
        raw = os.fsencode(path)
        keep = _locked_flags(path)
        _check(libc.mount(raw, raw, None, MS_BIND | MS_REC, None), f"bind {path}")
        _check(libc.mount(None, raw, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, None),
               f"remount {path} read-only")


def drop_root_capabilities() -> None:
    """For root: empty the capability bounding set and the ambient set, so the exec'd command
    keeps no capability (no module loading, raw I/O, DAC override …). No-op for other users."""
    if os.geteuid() != 0:
        return
    libc = _libc()
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    status = open("/proc/self/status").read()
    inheritable = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("CapInh:")), "0")
    if int(inheritable, 16):
        raise SandboxError("the process has inheritable capabilities; refusing to confine root partially")


def confine(spec: dict) -> None:
    """Apply every step of ``spec`` to this process (see the module docstring)."""
    read_only_binds(list(spec.get("ro_binds", [])))
    if spec.get("drop_caps", True):
        drop_root_capabilities()
    apply_landlock(spec)


def probe(base: str, network: bool) -> dict:
    """Confine this process over a scratch tree in ``base`` and test what is really enforced.

    Returns ``{"abi", "filesystem", "git_read_only", "network_blocked", "errors"}``; each flag is
    ``True`` only if the matching forbidden action failed *and* the allowed one worked.
    """
    ws, out, git = (os.path.join(base, name) for name in ("ws", "out", os.path.join("ws", ".git")))
    for folder in (ws, out, git):
        os.makedirs(folder, exist_ok=True)
    report: dict = {"abi": landlock_abi(), "filesystem": False, "git_read_only": False,
                    "network_blocked": None, "errors": []}
    listener = None
    if not network:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
    try:
        read_only_binds([git])
    except SandboxError as exc:
        report["errors"].append(str(exc))
        git = ""
    try:
        apply_landlock({"read": ["/"], "write": [ws], "devices": ["/dev/null"], "network": network})
    except SandboxError as exc:
        report["errors"].append(str(exc))
        return report
    report["filesystem"] = _can_write(os.path.join(ws, "ok")) and not _can_write(os.path.join(out, "no"))
    report["git_read_only"] = bool(git) and not _can_write(os.path.join(git, "no"))
    if listener is not None:
        try:
            socket.create_connection(listener.getsockname(), timeout=2).close()
            report["network_blocked"] = False
        except PermissionError:
            report["network_blocked"] = True
        except OSError as exc:
            report["errors"].append(f"network probe: {exc}")
            report["network_blocked"] = False
    return report


def _can_write(path: str) -> bool:
    try:
        with open(path, "w") as handle:
            handle.write("x")
        return True
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return False
        raise


def main(argv: list[str]) -> int:
    """``--spec JSON -- ARGV...`` confines and execs (never returns on success);
    ``--probe DIR [--network]`` prints the probe report."""
    if argv[:1] == ["--probe"] and len(argv) >= 2:
        print(json.dumps(probe(argv[1], network="--network" in argv[2:])))
        return 0
    if len(argv) < 4 or argv[0] != "--spec" or argv[2] != "--":
        sys.stderr.write("usage: sandbox_exec --spec JSON -- ARGV... | --probe DIR [--network]\n")
        return 2
    command = argv[3:]
    try:
        confine(json.loads(argv[1]))
    except (SandboxError, OSError, ValueError) as exc:
        sys.stderr.write(f"agent-server sandbox: cannot confine this command ({exc}); it was not run.\n")
        return EXIT_REFUSED
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"agent-server sandbox: cannot run {command[0]}: {exc.strerror}\n")
        return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
