"""The shell's OS sandbox, applied in the child right before ``exec`` (Linux Landlock).

Role: ``python -I -S sandbox_exec.py --spec JSON -- ARGV...`` (or ``python -m
agent_server.policy.sandbox.sandbox_exec``) confines *itself* and then ``exec``\\s ``ARGV``, so the
command and everything it starts inherit the confinement, which cannot be lifted:

Must never: run the command when any requested step failed — it prints why on stderr and exits
126 instead. It imports only the standard library (it runs once per shell command, with ``-I -S``).

1. ``.git`` folders listed in ``ro_binds`` are bind-mounted read-only onto themselves in a private
   mount namespace (Landlock only *adds* rights beneath a folder, so a read-only ``.git`` inside a
   writable root needs this);
2. for root, every capability is dropped from the bounding set (a confined root must not load
   modules or use raw I/O);
3. ``no_new_privs``, then a Landlock ruleset: read and execute anywhere (``read``), every file
   right beneath ``write``, read/write on the ``devices`` (``/dev/null``, the terminal), with
   ``network: false`` no TCP ``bind``/``connect`` (Landlock ABI ≥ 4), and in both network modes the
   scopes of Landlock ABI ≥ 6: no ``connect`` to an abstract unix socket (the D-Bus session bus,
   X11's ``@/tmp/.X11-unix/X0``) and no signal to a process outside the command's sandbox.

``--probe DIR [--network]`` applies the same steps to a scratch tree in ``DIR`` and *tests* them
(a write inside must work, writes outside and into ``.git`` must fail, a TCP connect must fail, an
abstract socket and a process outside must be out of reach),
printing one JSON line of what is really enforced.
"""

from __future__ import annotations

import _signal as signal  # not `signal`: that one imports enum (startup time counts: one run per command)
import ctypes
import errno
import os
import struct
import sys

TYPE_CHECKING = False  # the annotations' names only: typing is not imported (one run per command)
if TYPE_CHECKING:
    from collections.abc import Callable

if __package__:
    from agent_server.policy.sandbox import sandbox_mounts as mounts, sandbox_notify as notify, sandbox_seccomp as seccomp
else:  # run as a script with -I -S: load the sibling modules from this folder
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import sandbox_mounts as mounts  # type: ignore[no-redef]
    import sandbox_notify as notify  # type: ignore[no-redef]
    import sandbox_seccomp as seccomp  # type: ignore[no-redef]

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same on every architecture
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
PR_SET_PDEATHSIG = 1
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


_LIBC: ctypes.CDLL | None = None
_CAP_LAST: int | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
        _LIBC.syscall.restype = ctypes.c_long
    return _LIBC


def warm() -> None:
    """Do once what every confinement repeats (a long-lived launcher calls this before forking):
    load libc, read the last capability number, build both seccomp filters."""
    global _CAP_LAST
    _libc()
    _CAP_LAST = _cap_last()
    if seccomp.supported():
        for block_unix in (False, True):
            seccomp.program(block_unix)


def _cap_last() -> int:
    if _CAP_LAST is not None:
        return _CAP_LAST
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        return int(handle.read())


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


SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
"""``LANDLOCK_SCOPE_*`` (ABI 6): no ``connect``/``sendto`` to an abstract unix socket bound outside
the Landlock domain, no signals to processes outside it."""
SCOPES_ABI = 6


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
    handled = handled_fs(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if not spec.get("network", True):
        if abi < 4:
            raise SandboxError(f"network = false needs Landlock ABI 4 (this kernel has {abi})")
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= SCOPES_ABI:  # nor signal agent-server or the editor, nor reach D-Bus/X11 by abstract sockets
        attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
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


def drop_root_capabilities() -> None:
    """For root: empty the capability bounding set and the ambient set, so the exec'd command
    keeps no capability (no module loading, raw I/O, DAC override …). No-op for other users."""
    if os.geteuid() != 0:
        return
    libc = _libc()
    for cap in range(_cap_last() + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    with open("/proc/self/status") as handle:
        status = handle.read()
    inheritable = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("CapInh:")), "0")
    if int(inheritable, 16):
        raise SandboxError("the process has inheritable capabilities; refusing to confine root partially")


def confine_self(spec: dict) -> None:
    """The steps after the namespaces: caps dropped (root), Landlock, the seccomp filter."""
    if spec.get("drop_caps", True):
        drop_root_capabilities()
    apply_landlock(spec)
    if spec.get("seccomp", True):
        seccomp.install(block_unix=not spec.get("network", True))


def _refuse(exc: BaseException) -> int:
    sys.stderr.write(f"agent-server sandbox: cannot confine this command ({exc}); it was not run.\n")
    sys.stderr.flush()
    return EXIT_REFUSED


_CONFINE_ERRORS = (SandboxError, mounts.MountError, seccomp.SeccompError, OSError, ValueError)


def run_confined(spec: dict, body: "Callable[[], int]", report_fd: int | None = None) -> int:
    """Run ``body`` (in a grandchild; it normally ``exec``s) confined by ``spec``; returns the exit
    status to leave with (a signal that ended the command is raised again on this process).

    With ``report_fd`` (the launcher's status pipe), this process also writes the command's wait
    status there (``=i``) as soon as the namespace is gone, and gives up its stdout and stderr once
    PID 1 runs (so the output pipe ends with the command, not with this process).

    With ``spec["namespaces"]``: this process enters new namespaces and forks the namespace's PID 1,
    which mounts, confines itself and forks ``body``; when ``body``'s process ends, PID 1 reports
    its status and exits, and the kernel kills whatever else still runs in the namespace
    (``setsid``/``nohup`` daemons included). Without: confine this process and run ``body`` here.
    """
    if not spec.get("namespaces", True):
        try:
            mounts_spec = {k: spec[k] for k in ("ro_binds",) if spec.get(k)}
            if mounts_spec:
                raise SandboxError("read-only binds need namespaces")
            confine_self(spec)
        except _CONFINE_ERRORS as exc:
            return _refuse(exc)
        return body()
    # this process dies with the agent-server that started it (even by kill -9), and with it PID 1
    # of the namespace (its own parent-death signal) and so every process of the command
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() == 1:  # the agent-server was already gone before the signal was set
        return EXIT_REFUSED
    try:
        mounts.enter_namespaces(net=not spec.get("network", True))
    except _CONFINE_ERRORS as exc:
        return _refuse(exc)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # the command decides; we relay its end
        signal.signal(sig, lambda *_: None)
    record = _open_record(spec.get("evidence"))  # opened before the masks hide the session folder
    status_r, status_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # PID 1 of the new namespace
        os.close(status_r)
        if report_fd is not None:
            os.close(report_fd)
        try:
            _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            mounts.prepare_mounts(spec)
            confine_self(spec)
        except _CONFINE_ERRORS as exc:
            os._exit(_refuse(exc))
        watch = _record_writes(record) if record is not None else None
        _init(body, status_w, None if watch is None else lambda: _finish_record(watch, record))
    if record is not None:
        os.close(record)
    os.close(status_w)
    if report_fd is not None:
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 1)
        os.dup2(null, 2)
        os.close(null)
    _, own = os.waitpid(pid, 0)  # returns once every process of the namespace is gone
    data = os.read(status_r, 4)
    status = struct.unpack("=i", data)[0] if len(data) == 4 else own
    if report_fd is not None:
        try:
            os.write(report_fd, struct.pack("=i", status))
        except OSError:
            pass  # agent-server gave up on this call; the launcher reports our own end
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else EXIT_REFUSED


def _open_record(path: "str | None") -> "int | None":
    """The descriptor of the command's write record (``spec["evidence"]``), or ``None``."""
    if not path:
        return None
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return None


def _record_writes(record: int) -> "notify.Watch | None":
    """PID 1: hand the command's write-intent system calls to a supervisor thread that writes the
    paths they name to ``record`` (``sandbox_notify``), and watch those paths for other writers
    (``sandbox_notify.Watch``, returned). Without it the record stays empty: the command runs all
    the same, its changes then count as uncertain."""
    import _thread

    try:
        watch = notify.Watch()
        listener = notify.listen()
        os.write(record, notify.LISTENING)
    except (notify.NotifyError, OSError) as exc:
        try:  # why, for the user (the record proves nothing without LISTENING)
            os.write(record, notify.UNLISTENED + str(exc).encode("utf-8", "replace")[:300] + b"\0")
        except OSError:
            pass
        return None
    _thread.start_new_thread(notify.supervise, (listener, record, watch))
    return watch


def _finish_record(watch: "notify.Watch", record: int) -> None:
    """PID 1, once the command ended: the watch's last word (other writers, the state it left)."""
    try:
        entries = watch.finish()
    except Exception:  # noqa: BLE001 - the record then proves nothing; the command's end must be reported
        entries = notify.INCOMPLETE
    try:
        os.write(record, entries)
    except OSError:
        pass


def _init(body: "Callable[[], int]", status_w: int, at_end: "Callable[[], None] | None" = None) -> None:
    """PID 1: fork ``body``, reap every process re-parented to us, and exit when ``body``'s ends
    (after ``at_end`` and writing its wait status to ``status_w``). Never returns."""
    try:
        child = os.fork()
        if child == 0:
            os.close(status_w)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE; an ignored signal survives exec
            os._exit(body())
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                if at_end is not None:
                    at_end()
                os.write(status_w, struct.pack("=i", status))
                os._exit(0)
    except BaseException as exc:  # noqa: BLE001 - PID 1 must end, which ends the namespace
        sys.stderr.write(f"agent-server sandbox: {type(exc).__name__}: {exc}\n")
        sys.stderr.flush()
        os._exit(EXIT_REFUSED)


def _exec(command: list[str], env: "dict[str, str] | None" = None) -> "Callable[[], int]":
    """The body that execs ``command`` (with ``env``; default: this process's environment)."""
    def body() -> int:
        try:
            if env is None:
                os.execvp(command[0], command)
            else:
                os.execvpe(command[0], command, env)
        except OSError as exc:
            sys.stderr.write(f"agent-server sandbox: cannot run {command[0]}: {exc.strerror}\n")
            sys.stderr.flush()
        return EXIT_REFUSED
    return body


def probe(base: str, network: bool) -> dict:
    """Confine a throwaway command over a scratch tree in ``base`` exactly as a shell command is
    confined, and test what is really enforced.

    Returns ``{"abi", "filesystem", "git_read_only", "pid_namespace", "masks", "setuid_blocked",
    "network_blocked", "unix_blocked", "abstract_unix_blocked", "signals_scoped", "errors"}``; each
    flag is ``True`` only if the forbidden action failed *and* the allowed one worked (the network
    flags are ``None`` with ``network``).
    """
    import json
    import socket

    ws, out, state = (os.path.join(base, name) for name in ("ws", "out", "state"))
    git, keep = os.path.join(ws, ".git"), os.path.join(state, "tmp")
    for folder in (ws, out, git, keep):
        os.makedirs(folder, exist_ok=True)
    for path in (os.path.join(ws, ".env"), os.path.join(state, "events.jsonl")):
        with open(path, "w") as handle:
            handle.write("SECRET=1\n")
    report: dict = {"abi": landlock_abi(), "filesystem": False, "git_read_only": False, "pid_namespace": False,
                    "masks": False, "setuid_blocked": False, "network_blocked": None, "unix_blocked": None,
                    "abstract_unix_blocked": False, "signals_scoped": False, "errors": []}
    listener = None
    if not network:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
    spec = {"read": ["/"], "write": [ws, keep], "devices": ["/dev/null"], "network": network, "ro_binds": [git],
            "masks": [state, os.path.join(ws, ".env")], "keep": [ws, keep], "namespaces": True}
    outer = os.getpid()
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0agent-server-probe-{outer}-{os.urandom(6).hex()}")
    abstract.listen(1)
    read_end, write_end = os.pipe()

    def checks() -> int:
        found: dict = {"filesystem": _can_write(os.path.join(ws, "ok")) and not _can_write(os.path.join(out, "no")),
                       "git_read_only": not _can_write(os.path.join(git, "no")),
                       "pid_namespace": os.getpid() == 2 and not os.path.exists(f"/proc/{outer}"),
                       "masks": _masked(os.path.join(ws, ".env")) and os.listdir(state) == ["tmp"]
                       and _can_write(os.path.join(keep, "ok")),
                       "setuid_blocked": _setuid_refused(ws),
                       "abstract_unix_blocked": _abstract_refused(abstract.getsockname(), network)}
        if listener is not None:
            found["network_blocked"] = _tcp_refused(listener.getsockname()) and _udp_refused()
            found["unix_blocked"] = _unix_refused()
        os.write(write_end, json.dumps(found).encode())
        return 0

    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        code = run_confined(spec, checks)
        os._exit(code)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    abstract.close()
    report["signals_scoped"] = _signals_scoped()
    if chunks:
        report.update(json.loads(b"".join(chunks)))
    else:
        report["errors"].append(f"the confined probe did not run (wait status {status}); "
                                "namespaces, mounts or seccomp are not available")
        fallback = _landlock_only(ws, out, network)
        report["errors"].extend(fallback.pop("errors_extra", []))
        report.update(fallback)
    return report


def _landlock_only(ws: str, out: str, network: bool) -> dict:
    """Fallback probe without namespaces: is at least Landlock write confinement there?"""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            apply_landlock({"read": ["/"], "write": [ws], "devices": ["/dev/null"], "network": True})
            ok = _can_write(os.path.join(ws, "ok2")) and not _can_write(os.path.join(out, "no2"))
            os.write(write_end, b"1" if ok else b"0")
        except BaseException as exc:  # noqa: BLE001
            os.write(write_end, b"E" + str(exc).encode())
        os._exit(0)
    os.close(write_end)
    data = os.read(read_end, 4096)
    os.close(read_end)
    os.waitpid(pid, 0)
    if data.startswith(b"E"):
        return {"errors_extra": [data[1:].decode(errors="replace")]}
    return {"filesystem": data == b"1"}


def _masked(path: str) -> bool:
    try:
        with open(path) as handle:
            return "SECRET" not in handle.read()
    except PermissionError:
        return True


def _setuid_refused(ws: str) -> bool:
    path = os.path.join(ws, "suid")
    try:
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o755))
        os.chmod(path, 0o4755)
        return False
    except PermissionError:
        pass
    try:
        os.close(os.open(os.path.join(ws, "suid2"), os.O_CREAT | os.O_WRONLY, 0o4755))
        return False
    except PermissionError:
        return True


def _tcp_refused(address: tuple) -> bool:
    import socket

    try:
        socket.create_connection(address, timeout=2).close()
        return False
    except OSError:
        return True


def _udp_refused() -> bool:
    """In a private network namespace the loopback is down: sending fails."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
            udp.sendto(b"x", ("127.0.0.1", 9))
        return False
    except OSError:
        return True


def _unix_refused() -> bool:
    import socket

    try:
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()
        return False
    except PermissionError:
        a, b = socket.socketpair()
        a.close()
        b.close()
        return True


def _abstract_refused(outside: "str | bytes", network: bool) -> bool:
    """An abstract socket bound outside cannot be reached; with ``network``, one bound inside can."""
    import socket

    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(outside)
        return False
    except OSError:
        pass
    if not network:  # socket(AF_UNIX) itself is refused (seccomp), in a private network namespace
        return True
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as inside, \
                socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            inside.bind(f"\0agent-server-probe-inside-{os.getpid()}-{os.urandom(6).hex()}")
            inside.listen(1)
            client.connect(inside.getsockname())
        return True
    except OSError:
        return False


def _signals_scoped() -> bool:
    """Landlock alone (no PID namespace, which hides outside processes too) refuses a signal to a
    process outside the domain (this one) and allows one to the confined process itself."""
    outer = os.getpid()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        ok = b"0"
        try:
            apply_landlock({"read": ["/"], "write": [], "network": True})
            try:
                os.kill(outer, 0)
            except PermissionError:
                os.kill(os.getpid(), 0)
                ok = b"1"
        except BaseException:  # noqa: BLE001 - reported as not scoped
            pass
        os.write(write_end, ok)
        os._exit(0)
    os.close(write_end)
    data = os.read(read_end, 1)
    os.close(read_end)
    os.waitpid(pid, 0)
    return data == b"1"


def _can_write(path: str) -> bool:
    try:
        with open(path, "w") as handle:
            handle.write("x")
        return True
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return False
        raise


def encode_spec(spec: dict) -> str:
    """``spec`` as the ``--spec`` argument the server passes: ``m:`` + hex of ``marshal`` (the
    same interpreter reads it back without importing ``json``, which costs milliseconds)."""
    import marshal

    return "m:" + marshal.dumps(spec).hex()


def decode_spec(text: str) -> dict:
    """The spec dict of a ``--spec`` argument: JSON, ``encode_spec``'s form, or ``@PATH`` of a
    file holding one of those (read, then deleted: a spec too long for one argument). Raises
    ``ValueError``."""
    if text.startswith("@"):
        try:
            with open(text[1:], encoding="ascii") as handle:
                text = handle.read()
            os.unlink(handle.name)
        except OSError as exc:
            raise ValueError(f"cannot read the spec file: {exc.strerror}") from None
        if text.startswith("@"):
            raise ValueError("a spec file may not point to another")
    if text.startswith("m:"):
        import marshal

        spec = marshal.loads(bytes.fromhex(text[2:]))
    else:
        import json

        spec = json.loads(text)
    if not isinstance(spec, dict):
        raise ValueError("the spec is not a mapping")
    return spec


PROBE_LIFETIME = 30
"""Seconds after which a probe still running ends itself (its parent gives up after 20 s and kills
it, but a parent killed first cannot)."""


def _probe_overdue(signum: int, frame: object) -> None:
    raise TimeoutError(f"the probe took more than {PROBE_LIFETIME} s")


def _remove_tree(base: str) -> None:
    """Remove the folder ``base`` and what is in it, ignoring errors (no ``shutil``: start-up counts)."""
    for top, dirs, files in os.walk(base, topdown=False):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            try:
                os.unlink(os.path.join(top, name))
            except OSError:
                pass
        for name in dirs:
            try:
                os.rmdir(os.path.join(top, name))
            except OSError:
                pass
    try:
        os.rmdir(base)
    except OSError:
        pass


def main(argv: list[str]) -> int:
    """``--spec SPEC -- ARGV...`` confines and runs ARGV (returns its exit status; SPEC is JSON or
    ``encode_spec``'s form); ``--probe DIR [--network]`` prints the probe report."""
    if argv[:1] == ["--probe"] and len(argv) >= 2:
        import json

        signal.signal(signal.SIGALRM, _probe_overdue)
        signal.alarm(PROBE_LIFETIME)
        owner = os.getpid()
        try:
            # this is the probe's own process: its stdout is the pipe its parent reads the report from
            print(json.dumps(probe(argv[1], network="--network" in argv[2:])))
        finally:  # whoever the parent is by now (it may be gone): no scratch folder left behind
            if os.getpid() == owner:  # not in a forked check that failed
                signal.alarm(0)
                _remove_tree(argv[1])
        return 0
    if len(argv) < 4 or argv[0] != "--spec" or argv[2] != "--":
        sys.stderr.write("usage: sandbox_exec --spec SPEC -- ARGV... | --probe DIR [--network]\n")
        return 2
    try:
        spec = decode_spec(argv[1])
    except (ValueError, EOFError, TypeError) as exc:
        return _refuse(exc)
    return run_confined(spec, _exec(argv[3:]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
