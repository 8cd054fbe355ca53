"""The launcher side of the warm spare: imported on every ``agent-server`` start in serve mode.

Role: ``handoff(argv, config_path)`` asks a warm spare (``_daemon.py``: a process that already
imported the whole server) to serve this launch: it passes descriptors 0, 1, 2 and its working
folder to the spare, which forks a child that becomes this launch's server; this process then only
relays signals and waits for the child's wait status, and exits with it. ``None`` means: run cold
(today's path, unchanged) — no spare (one is started in the background for the next launch), the
spare refused, anything went wrong before the spare committed. No byte of stdin is read here.

Cost: it runs before every cold start too, so it is standard library only and small (``os``,
``sys``, the built-in ``_signal`` and ``_socket``; no ``json``, ``struct``, ``hashlib``,
``signal``, ``select`` on the common paths): ~0.5 ms of work, most of it the code fingerprint.

Where: ``spare_folder(env)``: ``$AGENT_SERVER_SPARE_DIR``, else ``$XDG_RUNTIME_DIR/agent-server``,
else ``/tmp/agent-server-<uid>``; created ``0700`` and used only when it is a real folder (no
symlink) of our uid with no group or other bits. Inside: ``spare-<key>.sock`` (a pathname
``AF_UNIX`` socket, reached as ``/proc/self/fd/<folder fd>/…`` so a long folder path fits
``sun_path``), ``spare-<key>.lock`` (``flock``\\ed by the live spare; it holds its pid),
``spare-<key>.log`` (the spare's stderr) and ``token`` (32 random bytes, ``0600``).

Key: which spare may serve a launch. ``key_bytes()`` is everything fixed at interpreter start or
import time that could differ between two launches of this user (interpreter, ``sys.path`` but its
first entry, interpreter flags and ``-X`` options, the ``PYTHON*`` variables and the few others
read at start-up or import time — ``KEY_ENV``, see the audit in ``_daemon.py`` —, hard rlimits,
namespaces, credentials, capabilities, seccomp, cgroup, CPU affinity, nice and OOM score, and a
fingerprint of the code: every file of the ``agent_server`` package by size and mtime, and the
mtime of each ``sys.path`` folder); ``key_sum`` names the socket. The whole string travels in the
request and the spare compares it byte for byte.

Protocol (``SOCK_SEQPACKET``: one message a packet). Both sides check the peer's uid
(``SO_PEERCRED``). Launcher → spare: ``R`` + ``pack([...])`` (``REQUEST_FIELDS``) with descriptors
0, 1, 2 and an ``O_PATH`` descriptor of the working folder (``SCM_RIGHTS``). Spare → launcher:
``N`` + reason (refused: run cold) or ``P`` + pid with a pidfd of the forked child. Launcher →
spare: ``A`` (committed: the spare now releases the child, which until then waited without
touching a descriptor; a launcher that gave up — 2 s without ``P`` — closes instead, and the child
exits untouched), then ``S`` + signal number for each SIGTERM/SIGINT/SIGHUP/… it receives. Spare →
launcher: ``X`` + the child's raw wait status. The launcher exits with that status (a signal death
is re-raised on itself); if the connection drops without one (the spare died), it waits for the
child on the pidfd and exits 1.

Must never: consume stdin, write to stdout, leave a handler or descriptor of its own behind when it
returns ``None``, or let a descriptor of the editor reach a spare it starts.
"""

from __future__ import annotations

import _signal
import _socket
import os
import sys

SPARE_ENV = "AGENT_SERVER_SPARE"
"""``off`` (or ``0``, ``false``, ``no``): never hand off, never start a spare."""
DIR_ENV = "AGENT_SERVER_SPARE_DIR"
IDLE_ENV = "AGENT_SERVER_SPARE_IDLE"
DEFAULT_IDLE = 1800.0
"""Seconds a spare lives with no child and no handoff."""
VERSION = b"agent-server-spare/1"
KEY_ENV = (b"LANG", b"LC_ALL", b"LC_CTYPE", b"SETUPTOOLS_USE_DISTUTILS", b"ANDROID_DATA")
"""Variables besides ``PYTHON*`` and ``_PYTHON*`` read at interpreter start or import time (the
locale of the interpreter's start-up; ``distutils-precedence.pth``, run by ``site``; platformdirs
picks its Android back end at import); the spare is started with these, ``PYTHON*`` and
``_PYTHON*`` (sysconfig's build variables) only (``_daemon.py`` has the audit)."""
KEY_PREFIXES = (b"PYTHON", b"_PYTHON")


def key_variable(name: bytes) -> bool:
    """Whether the environment variable ``name`` is part of the key (and of the spare's environment)."""
    return name.startswith(KEY_PREFIXES) or name in KEY_ENV
NAMESPACES = ("mnt", "pid", "pid_for_children", "user", "net", "ipc", "uts", "cgroup", "time")
STATUS_FIELDS = (b"Uid:", b"Gid:", b"Groups:", b"CapInh:", b"CapPrm:", b"CapEff:", b"CapBnd:", b"CapAmb:",
                 b"NoNewPrivs:", b"Seccomp:", b"Seccomp_filters:", b"Cpus_allowed_list:", b"Mems_allowed_list:")
FORWARDED = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGQUIT, _signal.SIGUSR1, _signal.SIGUSR2)
"""Signals the launcher relays to its server (the others act on the launcher itself; if it dies,
the spare ends the server with SIGTERM)."""
COMMIT_TIMEOUT = 2.0
"""Seconds the launcher waits for the child's pid before it runs cold."""
MAX_MESSAGE = 1 << 20
TOKEN_BYTES = 32
_CORE_SIGNALS = (_signal.SIGQUIT, _signal.SIGILL, _signal.SIGABRT, _signal.SIGFPE, _signal.SIGSEGV,
                 _signal.SIGBUS, _signal.SIGSYS, _signal.SIGTRAP, _signal.SIGXCPU, _signal.SIGXFSZ)
_PEERCRED_SIZE = 12  # struct ucred: pid, uid, gid (three C ints)


class FolderError(Exception):
    """The spare folder cannot be used (the message says why, for one line on stderr)."""


# -- where -------------------------------------------------------------------------------------------


def disabled(env=None) -> bool:
    """Whether ``AGENT_SERVER_SPARE`` turns the spare off."""
    value = (os.environ if env is None else env).get(SPARE_ENV, "")
    return value.strip().lower() in ("off", "0", "false", "no")


def spare_folder(env=None) -> str:
    """The spare folder of this user for ``env`` (module docstring); absolute, not created."""
    env = os.environ if env is None else env
    folder = env.get(DIR_ENV, "")
    if folder:
        return os.path.abspath(folder)
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "agent-server")
    return f"/tmp/agent-server-{os.getuid()}"


def spare_folders(env=None) -> list[str]:
    """Every folder where a spare of this user may be found for ``env``: its own (``spare_folder``)
    and the default ones of any launch (``$XDG_RUNTIME_DIR/agent-server`` with this env's or the
    usual ``/run/user/<uid>``, ``/tmp/agent-server-<uid>``) — what the confined shell hides."""
    env = os.environ if env is None else env
    out = [spare_folder(env)]
    runtime = env.get("XDG_RUNTIME_DIR", "")
    for folder in ([os.path.join(runtime, "agent-server")] if runtime and os.path.isabs(runtime) else []) + [
            f"/run/user/{os.getuid()}/agent-server", f"/tmp/agent-server-{os.getuid()}"]:
        if folder not in out:
            out.append(folder)
    return out


def open_folder(folder: str, create: bool = True) -> int:
    """An ``O_PATH`` descriptor of ``folder`` (made ``0700`` if missing), after checking that it is
    a real folder of ours that nobody else may enter; raises ``FolderError``."""
    if create:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise FolderError(f"cannot create {folder}: {exc.strerror}") from None
    try:
        fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise FolderError(f"{folder} is not a folder ({exc.strerror})") from None
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        os.close(fd)
        raise FolderError(f"{folder} is not a private folder of this user (owner uid {st.st_uid}, "
                          f"mode {st.st_mode & 0o7777:04o}; it must be 0700 and ours)")
    return fd


def fd_path(dirfd: int, name: str) -> str:
    """``name`` inside the folder ``dirfd`` as a path short enough for ``sun_path``."""
    return f"/proc/self/fd/{dirfd}/{name}"


def read_token(dirfd: int, create: bool = True) -> bytes:
    """The folder's token (made atomically, once, when missing and ``create``); raises ``OSError``
    (or ``FolderError`` for a token file that is not ours alone)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO must not block the open
    try:
        fd = os.open("token", flags, dir_fd=dirfd)
    except FileNotFoundError:
        if not create:
            raise
        _make_token(dirfd)
        fd = os.open("token", flags, dir_fd=dirfd)
    try:
        st = os.fstat(fd)
        if st.st_uid != os.getuid() or st.st_mode & 0o077 or st.st_size != TOKEN_BYTES or (st.st_mode & 0o170000) != 0o100000:
            raise FolderError("the spare folder's token is not a private file of this user")
        return os.read(fd, TOKEN_BYTES + 1)
    finally:
        os.close(fd)


def _make_token(dirfd: int) -> None:
    temp = f"token.{os.getpid()}.tmp"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dirfd)
    try:
        os.write(fd, os.urandom(TOKEN_BYTES))
    finally:
        os.close(fd)
    try:
        os.link(temp, "token", src_dir_fd=dirfd, dst_dir_fd=dirfd)  # atomic: never a partly written token
    except FileExistsError:
        pass  # another launcher made it first: theirs is the token
    finally:
        os.unlink(temp, dir_fd=dirfd)


# -- the key ----------------------------------------------------------------------------------------


def package_root() -> str:
    return os.path.dirname(os.path.abspath(sys.modules["agent_server"].__file__))


def _scan(folder: str, prefix: str, out: list[str]) -> None:
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    _scan(entry.path, prefix + entry.name + "/", out)
            else:
                st = entry.stat(follow_symlinks=False)
                out.append(f"{prefix}{entry.name} {st.st_size} {st.st_mtime_ns}")


def code_fingerprint(root: str | None = None, path: list[str] | None = None) -> bytes:
    """Every file of the package (``root``: ``agent_server``'s folder) by size and mtime (sorted),
    and the mtime of each folder of ``path`` (``-`` where there is none)."""
    root = package_root() if root is None else root
    files: list[str] = []
    try:
        _scan(root, "", files)
    except OSError as exc:
        files.append(f"! {exc.errno}")
    files.sort()
    dirs = []
    for entry in sys.path if path is None else path:
        try:
            dirs.append(str(os.stat(entry or ".").st_mtime_ns))
        except (OSError, ValueError):
            dirs.append("-")
    return os.fsencode(f"code {root}\n" + "\n".join(files) + "\npath-mtimes " + " ".join(dirs))


def _read(path: str) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return b"-"
    try:
        return os.read(fd, 1 << 16)
    except OSError:
        return b"-"
    finally:
        os.close(fd)


def interpreter_path() -> list[str]:
    """``sys.path`` without the entry the interpreter put first for this launch (the script's
    folder, or the working folder for ``-m``/``-c``), which the spare (started with ``-P``) lacks."""
    return list(sys.path) if sys.flags.safe_path else list(sys.path[1:])


def key_bytes(root: str | None = None) -> bytes:
    """The key string of this process (module docstring)."""
    path = interpreter_path()
    env = os.environb
    parts = [VERSION, b"exe " + os.fsencode(sys.executable),
             b"path " + b"\0".join(os.fsencode(p) for p in path),
             b"flags " + repr(sys.flags).replace("safe_path=True", "safe_path=False").encode(),
             b"xoptions " + os.fsencode(repr(sorted(sys._xoptions.items()))),
             b"warnoptions " + os.fsencode(repr(sys.warnoptions))]
    parts += sorted(b"env " + k + b"=" + env[k] for k in env if key_variable(k))
    limits = _read("/proc/self/limits").split(b"\n")
    parts += [b"limit " + line[:25].rstrip() + b" " + line[47:67].rstrip() for line in limits[1:] if line]
    for name in NAMESPACES:
        try:
            parts.append(f"ns {name} {os.readlink('/proc/self/ns/' + name)}".encode())
        except OSError:
            parts.append(f"ns {name} -".encode())
    parts += [b"status " + line for line in _read("/proc/self/status").split(b"\n") if line.startswith(STATUS_FIELDS)]
    parts.append(b"cgroup " + _read("/proc/self/cgroup").replace(b"\n", b" "))
    parts.append(b"oom " + _read("/proc/self/oom_score_adj").strip())
    parts.append(b"nice " + str(os.getpriority(os.PRIO_PROCESS, 0)).encode())
    parts.append(code_fingerprint(root, path))
    return b"\n".join(parts)


def key_sum(key: bytes) -> str:
    """A short name for ``key`` (a polynomial checksum modulo 2**61 - 1: no hash module needed)."""
    return format(int.from_bytes(key, "little") % ((1 << 61) - 1), "016x")


# -- messages ---------------------------------------------------------------------------------------


def pack(fields: list[bytes]) -> bytes:
    """Length-prefixed fields (decimal lengths: no ``struct`` needed)."""
    return b"".join(b"%d:%s" % (len(f), f) for f in fields)


def unpack(data: bytes) -> list[bytes]:
    """The fields of ``pack``; raises ``ValueError`` on a malformed message."""
    out, pos = [], 0
    while pos < len(data):
        colon = data.index(b":", pos)
        size = int(data[pos:colon])
        start = colon + 1
        if size < 0 or start + size > len(data):
            raise ValueError("truncated field")
        out.append(data[start:start + size])
        pos = start + size
    return out


REQUEST_FIELDS = ("version", "token", "key", "argv", "orig_argv", "path0", "config", "env", "umask",
                  "limits", "signals", "sigmask", "comm")


def _signal_table() -> bytes:
    """One byte per signal 1 … NSIG-1: ``I`` ignored, ``D`` default, ``P`` Python's SIGINT
    handler, ``-`` anything else (left as the spare has it)."""
    out = bytearray()
    for signum in range(1, _signal.NSIG):
        try:
            handler = _signal.getsignal(signum)
        except (ValueError, OSError):
            handler = None
        out += b"I" if handler == _signal.SIG_IGN else b"D" if handler == _signal.SIG_DFL else \
            b"P" if handler is _signal.default_int_handler else b"-"
    return bytes(out)


def request_fields(token: bytes, key: bytes, argv: list[str], config_path: str | None,
                   signals: bytes | None = None) -> list[bytes]:
    """The request of this launch (``REQUEST_FIELDS``, in order); ``signals``: the signal table
    as it was before the launcher's own relay handlers (``_signal_table``)."""
    umask = os.umask(0o077)
    os.umask(umask)
    return [VERSION, token, key,
            b"\0".join(os.fsencode(a) for a in argv),
            b"\0".join(os.fsencode(a) for a in getattr(sys, "orig_argv", sys.argv)),
            b"" if sys.flags.safe_path or not sys.path else b"+" + os.fsencode(sys.path[0]),
            b"-" if config_path is None else b"+" + os.fsencode(config_path),
            b"\0".join(k + b"=" + v for k, v in os.environb.items()),
            str(umask).encode(), _read("/proc/self/limits"), _signal_table() if signals is None else signals,
            b",".join(str(int(s)).encode() for s in sorted(_signal.pthread_sigmask(_signal.SIG_BLOCK, ()))),
            _read("/proc/self/comm")]


# -- handoff -----------------------------------------------------------------------------------------


class _Relay:
    """The launcher's signal handlers: a signal before the commit waits; after it, it is sent."""

    def __init__(self) -> None:
        self.pending: list[int] = []
        self.conn: _socket.socket | None = None
        self.pidfd = -1
        self.saved: dict[int, object] = {}

    def install(self) -> None:
        for signum in FORWARDED:
            old = _signal.getsignal(signum)
            if old == _signal.SIG_IGN:
                continue  # ignored here, so by the server too (it inherits that): nothing to relay
            self.saved[signum] = old
            _signal.signal(signum, self.handle)

    def restore(self) -> None:
        for signum, old in self.saved.items():
            _signal.signal(signum, old)
        self.saved = {}

    def handle(self, signum: int, frame: object) -> None:
        if self.conn is None and self.pidfd < 0:
            self.pending.append(signum)
            return
        self.send(signum)

    def send(self, signum: int) -> None:
        if self.conn is not None:
            try:
                self.conn.send(b"S%d" % signum, _socket.MSG_NOSIGNAL)
                return
            except OSError:
                pass
        if self.pidfd >= 0:
            try:
                _signal.pidfd_send_signal(self.pidfd, signum)
            except OSError:
                pass


def _say(text: str) -> None:
    try:
        os.write(2, f"agent-server: {text}\n".encode(errors="replace"))
    except OSError:
        pass


def handoff(argv: list[str], config_path: str | None) -> int | None:
    """Serve this launch from a warm spare: the exit status to end with once the spare's child
    (this launch's server) ended, or ``None`` to run cold (module docstring). ``argv``: the
    child's ``sys.argv`` (this process's); ``config_path``: what ``--config`` named."""
    if disabled() or os.isatty(0):  # a person at a terminal: no spare (and none started)
        return None
    folder = spare_folder()
    try:
        dirfd = open_folder(folder)
    except FolderError as exc:
        _say(f"not using a warm spare: {exc}")
        return None
    conn = None
    try:
        key = key_bytes()
        name = key_sum(key)
        try:
            token = read_token(dirfd)
        except (OSError, FolderError) as exc:
            _say(f"not using a warm spare: {exc}")
            return None
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        try:
            conn.connect(fd_path(dirfd, f"spare-{name}.sock"))
        except (FileNotFoundError, ConnectionRefusedError):
            conn.close()
            conn = None
            start_spare(folder, dirfd, name)
            return None
        except OSError:
            return None
        return _handoff(conn, key, token, argv, config_path)
    except OSError:
        return None
    finally:
        if conn is not None:
            conn.close()
        os.close(dirfd)


def _peer_uid(conn: _socket.socket) -> int:
    cred = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, _PEERCRED_SIZE)
    return int.from_bytes(cred[4:8], sys.byteorder, signed=True)


def _handoff(conn: _socket.socket, key: bytes, token: bytes, argv: list[str],
             config_path: str | None) -> int | None:
    if _peer_uid(conn) != os.getuid():
        return None
    signals = _signal_table()  # the dispositions the server inherits: before the relay's handlers
    relay = _Relay()
    relay.install()
    committed = False
    try:
        cwd = os.open(".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            message = b"R" + pack(request_fields(token, key, argv, config_path, signals))
            conn.sendmsg([message], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, _fd_bytes([0, 1, 2, cwd]))],
                          _socket.MSG_NOSIGNAL)
        finally:
            os.close(cwd)
        conn.settimeout(COMMIT_TIMEOUT)
        try:
            data, fds = _recv(conn)
        except OSError:  # a timeout too: the spare is stuck; closing the connection stops its child
            return None
        if data[:1] != b"P" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return None
        pidfd = fds[0]
        try:
            conn.send(b"A", _socket.MSG_NOSIGNAL)  # the commit: from here on the child serves
        except OSError:
            os.close(pidfd)
            return None
        committed = True
        relay.conn, relay.pidfd = conn, pidfd
        conn.settimeout(None)
        for signum in relay.pending:
            relay.send(signum)
        relay.pending = []
        status = _wait_status(conn, relay)
        return _exit_with(status)
    finally:
        relay.restore()
        if not committed:
            for signum in relay.pending:  # arrived before the commit: it acts now, as on a cold start
                os.kill(os.getpid(), signum)


def _fd_bytes(fds: list[int]) -> bytes:
    return b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds)


def _recv(conn: _socket.socket) -> tuple[bytes, list[int]]:
    data, ancdata, _flags, _addr = conn.recvmsg(MAX_MESSAGE, _socket.CMSG_SPACE(4 * 4), _socket.MSG_CMSG_CLOEXEC)
    fds: list[int] = []
    for level, kind, payload in ancdata:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            fds += [int.from_bytes(payload[i:i + 4], sys.byteorder, signed=True)
                    for i in range(0, len(payload) - len(payload) % 4, 4)]
    return data, fds


def _wait_status(conn: _socket.socket, relay: _Relay) -> int | None:
    """The child's raw wait status from the spare; ``None`` when the spare died first (then this
    waits for the child's end on its pidfd)."""
    while True:
        try:
            data = conn.recv(64)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if data[:1] == b"X":
            return int(data[1:])
        if not data:
            break
    relay.conn = None
    import select  # the spare died: rare, so imported here

    poller = select.poll()
    poller.register(relay.pidfd, select.POLLIN)
    while not poller.poll():
        pass
    return None


def _exit_with(status: int | None) -> int:
    """The exit status for the child's raw wait ``status``; a signal death is re-raised here."""
    if status is None:
        return 1
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        if signum in _CORE_SIGNALS:  # the child dumped its core already: not a second one of this process
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
            except (ImportError, OSError, ValueError):
                pass
        try:
            _signal.signal(signum, _signal.SIG_DFL)
            _signal.pthread_sigmask(_signal.SIG_UNBLOCK, (signum,))
            os.kill(os.getpid(), signum)
        except (OSError, ValueError):
            pass
        return 128 + signum
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1


# -- starting a spare ----------------------------------------------------------------------------------


def interpreter_args() -> list[str]:
    """This interpreter's flags, ``-W`` and ``-X`` options as arguments (as ``subprocess`` makes
    them for a child Python, less what the spare gets from ``PYTHONWARNINGS`` in its environment
    and plus every other ``-X`` option), so the spare starts as this process started."""
    import subprocess  # only when a spare is started

    args = [a for a in subprocess._args_from_interpreter_flags() if a != "-P"]
    from_env = [w for w in os.environ.get("PYTHONWARNINGS", "").split(",") if w] \
        if not sys.flags.ignore_environment else []
    for warning in from_env:  # listed first in sys.warnoptions; the spare reads them from its env
        if "-W" + warning in args:
            args.remove("-W" + warning)
    given = {args[i + 1].split("=", 1)[0] for i, a in enumerate(args[:-1]) if a == "-X"}
    for name, value in sys._xoptions.items():
        if name not in given:
            args += ["-X", name if value is True else f"{name}={value}"]
    return args


def spare_command(folder: str, name: str, lock_fd: int, idle: str) -> list[str]:
    """The spare's argv: this interpreter with this launch's options, ``-P``, ``-m agent_server.spare``."""
    return [sys.executable, *interpreter_args(), "-P", "-m", "agent_server.spare", folder, name, str(lock_fd), idle]


def spare_environ() -> dict[bytes, bytes]:
    """What the spare is started with: the variables of the key only (``key_variable``),
    so it holds no secret of the launch that started it — and ``LC_CTYPE`` as this process was
    started with it (``_started_lc_ctype``)."""
    env = {k: v for k, v in os.environb.items() if key_variable(k)}
    started = _started_lc_ctype()
    if started is not False and started != env.get(b"LC_CTYPE"):
        if started is None:
            env.pop(b"LC_CTYPE", None)
        else:
            env[b"LC_CTYPE"] = started
    return env


def _started_lc_ctype() -> bytes | None | bool:
    """``LC_CTYPE`` in the environment this process was started with (``/proc/self/environ``;
    ``None``: unset, ``False``: unknown). The interpreter's locale coercion (PEP 538: ``LANG``
    names a locale that is not installed, so the C locale) sets ``LC_CTYPE=C.UTF-8`` and UTF-8
    mode in this process; a spare started with that ``LC_CTYPE`` would get a valid locale, no
    coercion and no UTF-8 mode — another key. Started with the original, it coerces as this
    process did."""
    try:
        fd = os.open("/proc/self/environ", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:
        return False
    finally:
        os.close(fd)
    for item in b"".join(chunks).split(b"\0"):
        if item.startswith(b"LC_CTYPE="):
            return item[9:]
    return None


FAILED_MARK = b"not starting:"
"""How a spare that could not start begins its log line (``_daemon.main``)."""
RETRY_AFTER = 600.0
"""Seconds after a spare of a key failed to start before a launch starts one again."""


def idle_seconds() -> float:
    """``AGENT_SERVER_SPARE_IDLE`` (seconds; default ``DEFAULT_IDLE``)."""
    text = os.environ.get(IDLE_ENV, "").strip()
    if not text:
        return DEFAULT_IDLE
    try:
        value = float(text)
        if value > 0 and value == value and value != float("inf"):
            return value
    except ValueError:
        pass
    _say(f"{IDLE_ENV}={text!r} is not a number of seconds; using {DEFAULT_IDLE:g}")
    return DEFAULT_IDLE


SERVING_MARK = b" serving key "
"""What a spare's log says once it serves (``_daemon.main``): a log without it is of a spare
that never got there."""


def recently_failed(dirfd: int, name: str) -> bool:
    """Whether the spare of key ``name`` failed to start less than ``RETRY_AFTER`` s ago: its log
    says ``not starting:``, or it never says ``serving key`` (the spare crashed while warming up —
    an uncaught error, a signal; one still starting holds the lock, so a start is a no-op anyway).
    A launch then starts none, rather than one per launch that fails again."""
    import time

    try:
        fd = os.open(f"spare-{name}.log", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dirfd)
    except OSError:
        return False
    try:
        if (os.fstat(fd).st_mode & 0o170000) != 0o100000:
            return True  # not a regular file (a FIFO …): start no spare over it
        text = os.read(fd, 1 << 16)
        failed = FAILED_MARK in text or SERVING_MARK not in text
        return failed and time.time() - os.fstat(fd).st_mtime < RETRY_AFTER
    except OSError:
        return False
    finally:
        os.close(fd)


def start_spare(folder: str, dirfd: int, name: str) -> None:
    """Start the spare for key ``name`` in the background (double fork; the grandchild takes the
    lock, points 0/1/2 at ``/dev/null`` and the log, closes every other descriptor and execs the
    spare). Returns at once; a spare already starting (the lock is held) makes it a no-op, and so
    does one that failed to start a short while ago (``recently_failed``)."""
    if recently_failed(dirfd, name):
        return
    idle = repr(idle_seconds())
    command = spare_command(folder, name, 3, idle)
    env = spare_environ()
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:  # the child: a new session, the grandchild, then gone at once
        code = 1
        try:
            os.setsid()
            if os.fork() == 0:
                code = _exec_spare(dirfd, name, command, env)
            else:
                code = 0
        finally:
            os._exit(code)
    while True:
        try:
            os.waitpid(pid, 0)
            return
        except InterruptedError:
            continue
        except ChildProcessError:
            return


def _exec_spare(dirfd: int, name: str, command: list[str], env: dict[bytes, bytes]) -> int:
    import fcntl

    def high(fd: int) -> int:  # above 0-3 whatever this process had open (0, 1 or 2 may be closed)
        moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(fd)
        return moved

    lock = high(os.open(f"spare-{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                        dir_fd=dirfd))
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # a spare of this key runs or is starting
    log = high(os.open(f"spare-{name}.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o600, dir_fd=dirfd))
    null = high(os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC))
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.dup2(log, 2)
    os.dup2(lock, 3)  # inheritable: the spare keeps holding the lock
    os.closerange(4, os.sysconf("SC_OPEN_MAX"))  # an editor's descriptor must never reach the spare
    os.chdir("/")
    os.execve(command[0], command, env)
    return 127
