"""The warm spare: a process that has imported the whole server and forks one child per launch.

Role: ``python -P -m agent_server.spare FOLDER KEY LOCK_FD IDLE`` (started by
``_launcher.start_spare``: cwd ``/``, stdin and stdout ``/dev/null``, stderr its log
``spare-<key>.log``, descriptor ``LOCK_FD`` its ``flock``\\ed ``spare-<key>.lock``, and an
environment of the key's variables only). It checks that it is what its name says (its own key
string sums to ``KEY``), imports everything a launch's server imports through a first read turn
(``warm()``: the modules ``cli._load_server`` loads, the lazy ones of a turn, the tools' schemas),
freezes them (``gc.freeze``), binds ``spare-<key>.sock`` and serves handoffs (``_launcher``'s
docstring has the protocol) in a ``poll`` loop — single-threaded at every fork: no thread, no
event loop, no executor and no HTTP client is ever made here.

Per request: the peer's uid (``SO_PEERCRED``), its confinement read from the kernel — it must
equal the spare's own (``_peer.py`` says exactly what is compared), the token (constant-time compare), the exact key
string, and the code fingerprint again (a changed package or ``site-packages`` → refused, and the
spare stops) are checked; then the request goes to the **standby** child — forked ahead of time
(``fork_standby``, right after the previous handoff committed), it has copied the pages
it shares with the spare (``prefault``: the copy-on-write faults a first turn would take on its
path) and waits on a socket pair — or, with no standby ready, to a child forked for it. The child
waits until the launcher has the pid and committed (end of file: it exits touching nothing), then
becomes that launch's process — its
descriptors 0, 1, 2 and working folder, umask, environment (exactly), rlimits, signal dispositions
and mask, ``sys.argv`` and ``sys.path[0]`` — and runs the cold path, ``cli._serve`` (``_child``).
The spare reaps each child through a pidfd and sends its launcher the raw wait status; a launcher
that goes away (even ``kill -9``) gets its child a SIGTERM (``pidfd_send_signal``: no pid reuse),
SIGKILL ``KILL_AFTER`` s later.

Lifetime: ends after ``IDLE`` s with no child and no handoff, when the code changes (checked before
each fork and every ``check_every(IDLE)`` s), when its folder or socket is removed or replaced,
and on SIGTERM/SIGINT/SIGHUP (``agent-server spare stop``). Ending first stops serving — the
socket is unlinked and the lock released at once, so a new spare can start — and the process then
stays until every child it must report on has ended.

Audit — what reads the environment or the home folder at import time (a child would otherwise keep
the spare's value instead of its launch's). The spare's environment holds only ``_launcher.KEY_ENV``
and ``PYTHON*`` (all in the key), so an import-time read of anything else would see it unset
here and differ from a cold start; ``tests/spare/test_spare.py:
test_the_warm_imports_read_no_environment_variable_outside_the_key`` records every ``os.environ``
read that ``warm()`` makes and pins that there is none. What was found and how it is handled:

* the interpreter's start-up: ``PYTHON*`` (paths, flags, hash seed, I/O encoding …) and the
  locale (``LANG``, ``LC_ALL``, ``LC_CTYPE``: the file system and stdio encodings) — in the key;
  ``site``'s ``.pth`` files: setuptools' ``distutils-precedence.pth`` reads
  ``SETUPTOOLS_USE_DISTUTILS`` — in the key; ``site.USER_SITE`` derives from ``HOME`` and
  matters through ``sys.path`` (in the key) — the child resets ``site``'s cached user base;
* ``sysconfig`` (imported by ``tools/_rg``) computes the user base from ``HOME`` at import and
  reads ``_PYTHON_PROJECT_BASE``/``_PYTHON_SYSCONFIGDATA_NAME`` — ``_PYTHON*`` in the key, and the
  child recomputes the user base from its own ``HOME`` (``RESET_IN_CHILD``);
* platformdirs picks its back end at import by ``ANDROID_DATA`` — in the key;
* ``time``: the zone (``TZ``) is read when ``time`` is initialised — the child calls
  ``time.tzset()`` after taking its environment;
* ``tempfile.tempdir`` is cached by the first ``gettempdir()`` (``TMPDIR``): never called by
  ``warm()``, and reset to ``None`` in the child anyway;
* caches filled on first use that read the environment (``tools/_rg.find_rg``: ``AGENT_SERVER_RG``
  and ``PATH``; ``urllib.request.getproxies``; httpx's ``trust_env`` proxies and CA bundle;
  platformdirs; ``config``/``config_resolve``/``credentials``, which take ``env`` as an argument) —
  all read at call time, and ``warm()`` calls none of them;
* our own modules: no module-level read of ``os.environ``, ``os.getenv``, ``expanduser`` or
  ``Path.home()`` (``grep`` them and run the test when adding one);
* libraries: pydantic's plugin discovery (``PYDANTIC_DISABLE_PLUGINS``) is replaced by
  ``process_trims`` before pydantic loads; asyncio's debug mode is ``PYTHONASYNCIODEBUG`` (in the
  key); httpx, httpcore, anyio, h11, idna, certifi, ssl, logging read nothing at import.

Known differences from a cold process, kept on purpose: the child's parent is the spare (not the
editor) and it leads a session of its own; ``__main__`` is this package's; ``sys.flags.safe_path``
is set (``-P``); the hash seed and the C library's state are the spare's (shared by its children).
"""

from __future__ import annotations

import _signal
import _socket
import fcntl
import gc
import os
import select
import sys
import time

from agent_server.spare import _launcher as L
from agent_server.spare import _peer

PROBE_MAX_AGE = 600.0
"""Seconds after which the spare probes the shell sandbox again (its children start with its result)."""
PREFAULT_AFTER = 0.2
"""Seconds a new standby child waits before it copies its pages (``prefault``): not while the child
just released starts up on the same CPUs. A request that comes first finds it less warm, never
later: the copying stops at once for a request."""
PREFAULT_CHUNK = 256
"""Pages copied between two looks for a request (~1 ms)."""
KILL_AFTER = 5.0
"""Seconds between the SIGTERM sent to a child whose launcher went away and a SIGKILL."""
REQUEST_TIMEOUT = 5.0
"""Seconds a connection may take to send its request."""
STOP_SIGNALS = (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP)
RESET_IN_CHILD = {"HOME": "sysconfig's and site's user base, computed again by the child (_forget_home)"}
"""Variables outside the key that the warm imports read, and how the child undoes that read."""
SERVED_NOTE = "agent_server.spare: served by a fork of the warm spare, pid"
"""Said on stderr at ``AGENT_SERVER_LOG_LEVEL=DEBUG`` by a launch a spare serves (tests look for it)."""


def check_every(idle: float) -> float:
    """Seconds between two checks of the code, the folder and the socket: a minute, or less when
    the idle time is short (tests)."""
    return min(60.0, max(0.5, idle / 10))


def log(text: str) -> None:
    try:
        os.write(2, f"{time.strftime('%Y-%m-%d %H:%M:%S')} spare {os.getpid()}: {text}\n".encode(errors="replace"))
    except OSError:
        pass


# -- the warm set ------------------------------------------------------------------------------------


WARM_MODULES = (
    # what cli._serve and serve_stdio import before the first request (cli._load_server's set)
    "asyncio", "logging", "agent_server.cli", "agent_server.server.initialize", "agent_server.server.wire",
    "agent_server.server.fast_session", "agent_server.config", "agent_server.server.acp",
    "agent_server.server.stdio", "platformdirs", "platformdirs.unix",
    # what the first turn loads lazily on its way to the model: the HTTP stack and httpcore's async
    # network layer (ChatClient.warm's list), the executor's threads, pydantic's adapters
    "agent_server.llm._transport", "agent_server.llm._client", "agent_server.llm._sse", "agent_server.llm._frames",
    "httpx", "httpx_sse", "httpcore", "h11", "anyio", "anyio._backends._asyncio", "anyio.streams.memory",
    "anyio.streams.stapled", "anyio.streams.tls", "anyio.abc", "anyio.lowlevel", "certifi", "idna",
    "http.cookiejar", "urllib.request", "mimetypes", "email.parser", "email.feedparser",
    "concurrent.futures.thread", "queue", "unicodedata", "pydantic.type_adapter", "pydantic._internal._dataclasses",
    # what a turn's tools load on first use: an edit's diff, the shell's analysis and launcher, the
    # checkpoints of a git workspace
    "difflib", "shlex", "agent_server.policy.shell", "agent_server.policy.shell_spawn",
    "agent_server.policy.sandbox_exec", "agent_server.checkpoints.shadow",
    # what a child uses to take its launch's process state (_prepare)
    "resource", "ctypes",
)


def warm() -> list[str]:
    """Import the warm set and build what is built once per process and depends on no
    configuration (the tools' JSON schemas, ``urllib.parse``'s patterns, anyio's lazy names);
    returns the modules that failed to import (none, normally)."""
    from agent_server import process_trims

    process_trims.apply()  # before pydantic loads, as cli.main does
    failed = []
    for name in WARM_MODULES:
        try:
            __import__(name)
        except Exception as exc:  # noqa: BLE001 — a missing optional part only costs its launch the import
            failed.append(f"{name}: {exc!r}")
    try:
        import anyio

        for name in ("connect_tcp", "fail_after", "Lock", "Event", "Semaphore", "CancelScope", "sleep", "streams",
                     "abc", "BrokenResourceError", "ClosedResourceError", "EndOfStream"):
            getattr(anyio, name)
        from urllib.request import Request

        Request("http://127.0.0.1/v1")  # urllib.parse compiles two patterns on first use
        from agent_server.tools.registry import tool_schemas

        tool_schemas()  # each builtin tool's schema, cached per class
        from agent_server.tools import safe_fs

        safe_fs.has_openat2()  # one syscall through ctypes, cached
        import ctypes

        _LIBC.append(ctypes.CDLL(None, use_errno=True))  # the C library's handle the children use (_set_comm)
        build_deferred_models()
    except Exception as exc:  # noqa: BLE001
        failed.append(f"warm-up: {exc!r}")
    return failed


def build_deferred_models() -> None:
    """Build our pydantic models made with ``defer_build`` (the ACP parameter models, built by a
    cold process on first use: ~8 ms of a first prompt's path)."""
    import pydantic
    from pydantic._internal._mock_val_ser import MockValSer

    def subclasses(cls: type) -> list[type]:
        out = []
        for sub in cls.__subclasses__():
            out += [sub, *subclasses(sub)]
        return out

    for model in dict.fromkeys(subclasses(pydantic.BaseModel)):
        if model.__module__.startswith("agent_server.") and isinstance(
                model.__dict__.get("__pydantic_validator__"), MockValSer):
            model.model_rebuild()


def probe_sandbox() -> None:
    """Probe what the shell sandbox enforces here, for both ``network`` settings, so a child's
    first turn does not wait ~70 ms for its own probe (``policy/sandbox.probe_now``). The result
    depends on the kernel and on what the key holds (namespaces, credentials, capabilities,
    seccomp); it is renewed every ``PROBE_MAX_AGE`` s, and a confined command whose confinement
    fails is refused by ``sandbox_exec`` whatever the status said."""
    from agent_server.config import PolicySettings
    from agent_server.policy import sandbox

    sandbox._PROBED.clear()  # a probe that fails now leaves each child to probe for itself
    for network in (True, False):
        sandbox.probe_now(PolicySettings(network=network))


# -- the spare ---------------------------------------------------------------------------------------


class Conn:
    """One launcher's connection: ``request`` → (fork) ``ack`` → ``running`` → status sent."""

    def __init__(self, sock: _socket.socket, now: float) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.state = "request"
        self.deadline = now + REQUEST_TIMEOUT
        self.child: Child | None = None


class Child:
    """A forked child: ``release`` the write end of the pipe it waits on (a child forked for a
    request), or ``ctl`` the socket a standby child waits on — for its request, then for ``G``."""

    def __init__(self, pid: int, pidfd: int, release: int, conn: Conn | None,
                 ctl: _socket.socket | None = None) -> None:
        self.pid, self.pidfd, self.release, self.conn, self.ctl = pid, pidfd, release, conn, ctl
        self.kill_at: float | None = None


class Spare:
    def __init__(self, folder: str, name: str, lock_fd: int, idle: float) -> None:
        self.folder, self.name, self.lock_fd, self.idle = folder, name, lock_fd, idle
        self.dirfd = L.open_folder(folder, create=False)
        self.key = b""
        self.listener: _socket.socket | None = None
        self.sock_id: tuple[int, int] | None = None
        self.folder_id = (os.fstat(self.dirfd).st_dev, os.fstat(self.dirfd).st_ino)
        self.conns: dict[int, Conn] = {}
        self.children: dict[int, Child] = {}
        self.idle_since = time.monotonic()
        self.next_check = 0.0
        self.stopping = ""
        self.stop_requested = False
        self.uid = os.getuid()
        self.forks = 0
        self.probed_at = time.monotonic()
        self.standby: Child | None = None
        self.standby_due: float | None = 0.0
        self.own = _peer.Own()  # what a peer's confinement must equal (_peer.refusal)

    # set-up

    def own_lock(self) -> bool:
        """Whether ``lock_fd`` is the locked ``spare-<key>.lock`` of the folder (not a file another
        spare's clean-up unlinked meanwhile)."""
        try:
            held = os.fstat(self.lock_fd)
            named = os.stat(f"spare-{self.name}.lock", dir_fd=self.dirfd, follow_symlinks=False)
            fcntl.flock(self.lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ours already: a no-op
        except OSError:
            return False
        if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
            return False
        os.set_inheritable(self.lock_fd, False)
        self.note_pids()
        return True

    def note_pids(self) -> None:
        """The lock file says the spare's pid and its standby child's (``agent-server spare status``)."""
        if self.lock_fd >= 0:
            standby = self.standby.pid if self.standby is not None else 0
            try:
                os.ftruncate(self.lock_fd, 0)
                os.pwrite(self.lock_fd, f"{os.getpid()}\n{standby}\n".encode(), 0)
            except OSError:
                pass

    def clean_stale(self) -> None:
        """Remove the files of other keys' spares that no longer run (their lock is free)."""
        try:
            names = os.listdir(L.fd_path(self.dirfd, ""))
        except OSError:
            return
        for entry in names:
            if not (entry.startswith("spare-") and entry.endswith(".lock")) or entry == f"spare-{self.name}.lock":
                continue
            try:
                fd = os.open(entry, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dirfd)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held, named = os.fstat(fd), os.stat(entry, dir_fd=self.dirfd, follow_symlinks=False)
                if (held.st_dev, held.st_ino) != (named.st_dev, named.st_ino):
                    continue
                stem = entry[:-len(".lock")]
                for suffix in (".sock", ".log", ".lock"):  # the lock last, while it is held
                    try:
                        os.unlink(stem + suffix, dir_fd=self.dirfd)
                    except OSError:
                        pass
            except OSError:
                continue  # a live spare holds it
            finally:
                os.close(fd)

    def bind(self) -> None:
        name = f"spare-{self.name}.sock"
        try:
            os.unlink(name, dir_fd=self.dirfd)  # a stale one: we hold the lock, so nobody listens on it
        except FileNotFoundError:
            pass
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        sock.bind(L.fd_path(self.dirfd, name))
        sock.listen(64)
        sock.setblocking(False)
        st = os.stat(name, dir_fd=self.dirfd, follow_symlinks=False)
        self.listener, self.sock_id = sock, (st.st_dev, st.st_ino)

    # ending

    def stop(self, why: str) -> None:
        """Stop serving: no socket, no lock (a new spare may start); children are still reported on."""
        if self.stopping:
            return
        self.stopping = why
        log(f"stopping: {why}")
        if self.listener is not None:
            try:
                st = os.stat(f"spare-{self.name}.sock", dir_fd=self.dirfd, follow_symlinks=False)
                if (st.st_dev, st.st_ino) == self.sock_id:
                    os.unlink(f"spare-{self.name}.sock", dir_fd=self.dirfd)
            except OSError:
                pass
            self.listener.close()
            self.listener = None
        for conn in [c for c in self.conns.values() if c.state == "request"]:
            self.drop(conn)
        if self.standby is not None:  # it waits for a request: end of file ends it
            self.release(self.standby, go=False)
            self.standby = None
        if self.lock_fd >= 0:
            try:
                os.ftruncate(self.lock_fd, 0)
            except OSError:
                pass
            os.close(self.lock_fd)
            self.lock_fd = -1

    def check(self, now: float) -> None:
        """The periodic checks: code, folder, socket, idle time."""
        if self.stopping:
            return
        if L.key_bytes() != self.key:
            self.stop("the code or the interpreter's environment changed")
            return
        try:
            st = os.stat(self.folder, follow_symlinks=False)
            sock = os.stat(f"spare-{self.name}.sock", dir_fd=self.dirfd, follow_symlinks=False)
        except OSError:
            self.stop("its folder or socket was removed")
            return
        if (st.st_dev, st.st_ino) != self.folder_id or (sock.st_dev, sock.st_ino) != self.sock_id:
            self.stop("its folder or socket was replaced")
            return
        if not self.serving() and not self.conns and now - self.idle_since >= self.idle:
            self.stop(f"idle for {self.idle:g} s")
            return
        if now - self.probed_at >= PROBE_MAX_AGE:
            probe_sandbox()
            self.probed_at = time.monotonic()

    def serving(self) -> list[Child]:
        """The children that serve a launch (not the standby)."""
        return [c for c in self.children.values() if c is not self.standby]

    # the loop

    def serve(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        _signal.set_wakeup_fd(wake_w)
        for signum in STOP_SIGNALS:
            _signal.signal(signum, self._on_stop_signal)
        interval = check_every(self.idle)
        while True:
            now = time.monotonic()
            if self.stop_requested:
                self.stop("asked to stop (signal)")
            if now >= self.next_check:
                self.check(now)
                self.next_check = now + interval
            if self.standby is None and self.standby_due is not None and now >= self.standby_due \
                    and not self.stopping and all(c.state == "running" for c in self.conns.values()):
                self.fork_standby(now)  # not while a launcher waits for a pid or its commit: it is its path
            if self.stopping and not self.children and not self.conns:
                break  # before the next poll, which could wait a whole check interval
            poller = select.poll()
            poller.register(wake_r, select.POLLIN)
            if self.listener is not None:
                poller.register(self.listener.fileno(), select.POLLIN)
            deadlines = [self.next_check]
            if self.standby is None and self.standby_due is not None and not self.stopping \
                    and all(c.state == "running" for c in self.conns.values()):
                deadlines.append(self.standby_due)
            for conn in self.conns.values():
                poller.register(conn.fd, select.POLLIN)
                if conn.state == "request":
                    deadlines.append(conn.deadline)
            for child in self.children.values():
                poller.register(child.pidfd, select.POLLIN)
                if child.kill_at is not None:
                    deadlines.append(child.kill_at)
            timeout = max(0.0, min(deadlines) - now)
            try:
                ready = poller.poll(timeout * 1000 + 1)
            except InterruptedError:
                continue
            now = time.monotonic()
            for fd, _events in ready:
                if fd == wake_r:
                    try:
                        while os.read(wake_r, 512):
                            pass
                    except BlockingIOError:
                        pass
                elif self.listener is not None and fd == self.listener.fileno():
                    self.accept(now)
                elif fd in self.children:
                    self.reap(self.children[fd], now)
                elif fd in self.conns:
                    self.on_message(self.conns[fd], now)
            for conn in [c for c in self.conns.values() if c.state == "request" and now >= c.deadline]:
                self.drop(conn)
            for child in self.children.values():
                if child.kill_at is not None and now >= child.kill_at:
                    child.kill_at = None
                    self.signal(child, _signal.SIGKILL)
        log(f"ended ({self.stopping}) after {self.forks} handoff(s)")
        return 0

    def _on_stop_signal(self, signum: int, frame: object) -> None:
        self.stop_requested = True

    def accept(self, now: float) -> None:
        assert self.listener is not None
        while True:
            try:
                fd, _ = self.listener._accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log(f"accept failed: {exc}")
                return
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, fd)
            try:
                cred = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
                uid = int.from_bytes(cred[4:8], sys.byteorder, signed=True)
            except OSError:
                uid = -1
            if uid != self.uid:
                sock.close()
                continue
            sock.setblocking(False)
            conn = Conn(sock, now)
            self.conns[conn.fd] = conn
            self.idle_since = now
            self.on_request(conn, now)  # sent with the connect, usually: no poll round in between

    def drop(self, conn: Conn) -> None:
        self.conns.pop(conn.fd, None)
        conn.sock.close()

    def send(self, conn: Conn, data: bytes, fds: list[int] = ()) -> bool:
        try:
            if fds:
                conn.sock.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, L._fd_bytes(list(fds)))],
                                  _socket.MSG_NOSIGNAL)
            else:
                conn.sock.send(data, _socket.MSG_NOSIGNAL)
            return True
        except OSError:
            return False

    def signal(self, child: Child, signum: int) -> None:
        try:
            _signal.pidfd_send_signal(child.pidfd, signum)
        except OSError:
            pass

    def on_message(self, conn: Conn, now: float) -> None:
        if conn.state == "request":
            self.on_request(conn, now)
            return
        try:
            data = conn.sock.recv(64)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        child = conn.child
        if not data:  # the launcher is gone
            self.drop(conn)
            if child is not None:
                child.conn = None
                if conn.state == "ack":  # it never committed: the child exits touching nothing
                    self.release(child, go=False)
                else:
                    self.signal(child, _signal.SIGTERM)
                    child.kill_at = now + KILL_AFTER
            return
        if conn.state == "ack" and data == b"A" and child is not None:
            conn.state = "running"
            self.release(child, go=True)
        elif conn.state == "running" and data[:1] == b"S" and child is not None:
            try:
                signum = int(data[1:])
            except ValueError:
                return
            if signum in L.FORWARDED:
                self.signal(child, signum)

    def release(self, child: Child, go: bool) -> None:
        if child.ctl is not None:
            if go:
                try:
                    child.ctl.send(b"G", _socket.MSG_NOSIGNAL)
                except OSError:
                    pass
            child.ctl.close()
            child.ctl = None
        if child.release >= 0:
            if go:
                try:
                    os.write(child.release, b"G")
                except OSError:
                    pass
            os.close(child.release)
            child.release = -1

    def refuse(self, conn: Conn, fds: list[int], why: str) -> None:
        for fd in fds:
            os.close(fd)
        self.send(conn, b"N" + why.encode())
        self.drop(conn)

    def on_request(self, conn: Conn, now: float) -> None:
        try:
            data, ancdata, flags, _ = conn.sock.recvmsg(L.MAX_MESSAGE, _socket.CMSG_SPACE(4 * 8),
                                                        _socket.MSG_CMSG_CLOEXEC)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self.drop(conn)
            return
        fds: list[int] = []
        for level, kind, payload in ancdata:
            if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
                fds += [int.from_bytes(payload[i:i + 4], sys.byteorder, signed=True)
                        for i in range(0, len(payload) - len(payload) % 4, 4)]
        if not data:
            self.refuse(conn, fds, "")
            return
        if self.stopping:
            self.refuse(conn, fds, "stopping")
            return
        if flags & (_socket.MSG_TRUNC | _socket.MSG_CTRUNC) or data[:1] != b"R" or len(fds) != 4:
            self.refuse(conn, fds, "malformed request")
            return
        try:
            fields = dict(zip(L.REQUEST_FIELDS, L.unpack(data[1:]), strict=True))
        except ValueError:
            self.refuse(conn, fds, "malformed request")
            return
        why = _peer.refusal(conn.sock, self.own)  # from the kernel, never from the request
        if why is not None:
            log(f"refused a connection: {why}")
            self.refuse(conn, fds, "peer not confined as the spare")
            return
        import hmac

        try:
            token = L.read_token(self.dirfd, create=False)
        except (OSError, L.FolderError):
            token = b""
        if not token or not hmac.compare_digest(fields["token"], token):
            log("refused a connection with a wrong token")
            self.refuse(conn, fds, "wrong token")
            return
        if fields["version"] != L.VERSION or fields["key"] != self.key:
            self.refuse(conn, fds, "another key")
            return
        # the key string holds the launcher's own fingerprint of the code, taken just now: equal to
        # ours, so the code did not change since the spare imported it. A fork made for this
        # request checks the fingerprint again (never fork stale code); the standby was forked
        # after the same check.
        if self.standby is None and not self.key.endswith(L.code_fingerprint(None, L.interpreter_path())):
            self.refuse(conn, fds, "stale")
            self.stop("the code or the interpreter's environment changed")
            return
        if not single_threaded():
            log(f"refusing to fork: {threads()} threads")
            self.refuse(conn, fds, "threads")
            self.stop("a thread was started in the spare")
            return
        if self.standby is not None and self.hand_to_standby(conn, data[1:], fds, now):
            return
        self.fork(conn, fields, fds, now)

    def hand_to_standby(self, conn: Conn, request: bytes, fds: list[int], now: float) -> bool:
        """Give the request (and its descriptors) to the standby child, which becomes this launch's
        child; ``False`` (the standby is gone) leaves it to ``fork``."""
        child, self.standby = self.standby, None
        assert child is not None and child.ctl is not None
        try:
            child.ctl.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, L._fd_bytes(fds))],
                              _socket.MSG_NOSIGNAL)
        except OSError:
            self.release(child, go=False)
            self.signal(child, _signal.SIGKILL)
            self.standby_due = now
            return False
        for fd in fds:
            os.close(fd)
        self.forks += 1
        self.standby_due = now  # forked as soon as no launcher waits on the spare (serve)
        self.note_pids()
        self.commit(conn, child, now)
        return True

    def fork_standby(self, now: float) -> None:
        """Fork the next standby child: it faults in the spare's pages it shares (off the path of
        any request) and waits for a request on a socket pair (``_standby``)."""
        self.standby_due = None
        if not self.key.endswith(L.code_fingerprint(None, L.interpreter_path())):  # never fork stale code
            self.stop("the code or the interpreter's environment changed")
            return
        if not single_threaded():
            log(f"not forking a standby: {threads()} threads")
            return
        ours, theirs = _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            log(f"cannot fork a standby: {exc}")
            ours.close()
            theirs.close()
            self.standby_due = now + 5
            return
        if pid == 0:
            status = 1
            try:
                ours.detach()
                status = _standby(self, theirs.detach())
            except BaseException:  # noqa: BLE001 — said on stderr (the log, or the launch's once taken)
                import traceback

                traceback.print_exc()
            finally:
                os._exit(status)
        theirs.close()
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            log(f"pidfd_open failed: {exc}")
            ours.close()
            os.waitpid(pid, 0)
            return
        self.standby = self.children[pidfd] = Child(pid, pidfd, -1, None, ours)
        self.note_pids()

    def commit(self, conn: Conn, child: Child, now: float) -> None:
        """Tell the launcher the child's pid (with a pidfd); the child waits until it answers ``A``."""
        child.conn = conn
        conn.child, conn.state = child, "ack"
        self.idle_since = now
        if not self.send(conn, b"P%d" % child.pid, [child.pidfd]):
            self.drop(conn)
            child.conn = None
            self.release(child, go=False)

    def fork(self, conn: Conn, fields: dict[str, bytes], fds: list[int], now: float) -> None:
        release_r, release_w = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(release_r)
            os.close(release_w)
            self.refuse(conn, fds, f"fork failed: {exc}")
            return
        if pid == 0:
            status = 1
            try:
                status = _child(self, fields, fds, release_r, release_w)
            except BaseException:  # noqa: BLE001 — said on stderr (the log, or the launch's once taken)
                import traceback

                traceback.print_exc()
            finally:
                os._exit(status)
        os.close(release_r)
        for fd in fds:
            os.close(fd)
        self.forks += 1
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:  # cannot watch it: do not commit it
            log(f"pidfd_open failed: {exc}")
            os.close(release_w)
            os.waitpid(pid, 0)
            self.refuse(conn, [], "pidfd")
            return
        child = Child(pid, pidfd, release_w, None)
        self.children[pidfd] = child
        if self.standby_due is None and self.standby is None:
            self.standby_due = now
        self.commit(conn, child, now)

    def reap(self, child: Child, now: float) -> None:
        try:
            _, status = os.waitpid(child.pid, 0)
        except ChildProcessError:
            status = 1 << 8
        self.children.pop(child.pidfd, None)
        os.close(child.pidfd)
        if child is self.standby:  # it died waiting: another one, but not in a loop
            log(f"the standby child ended while it waited (wait status {status})")
            self.standby = None
            self.standby_due = now + 5
            self.note_pids()
        self.release(child, go=False)
        conn = child.conn
        if conn is not None:
            self.send(conn, b"X%d" % status)
            self.drop(conn)
        self.idle_since = now


def threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def single_threaded() -> bool:
    """One Python thread and one kernel task (a library's native thread counts too)."""
    import threading

    return threading.active_count() == 1 and threads() == 1


# -- the child -----------------------------------------------------------------------------------------


def _close_all_but(spare: Spare, keep: set[int]) -> None:
    """Close every descriptor but ``keep``: the listener, other launchers' connections, pidfds,
    the lock, the log (their Python objects are detached: no finalizer may close a reused number)."""
    kept = sorted(keep)
    for low, high in zip([-1, *kept], [*kept, os.sysconf("SC_OPEN_MAX")]):
        if low + 1 < high:  # closerange(0, 0) would close everything (3.11 passes high - 1 = -1 on)
            os.closerange(low + 1, high)
    socks = [spare.listener, *(c.sock for c in spare.conns.values()),
             *(c.ctl for c in spare.children.values())]
    for sock in socks:
        if sock is not None:
            sock.detach()


def _take_descriptors(fds: list[int]) -> int:
    """The launch's 0, 1, 2 (received descriptors are >= 3: 0-2 are the spare's own); returns its
    working folder's descriptor."""
    for target, fd in enumerate(fds[:3]):
        os.dup2(fd, target)
    for fd in fds[:3]:
        os.close(fd)
    return fds[3]


def _child(spare: Spare, fields: dict[str, bytes], fds: list[int], release_r: int, release_w: int) -> int:
    """In a child forked for a request: wait for the commit, become the launch's process, run the
    cold path. Returns only the status to ``os._exit`` with (after the launch's own flushing and
    exit handlers)."""
    _signal.set_wakeup_fd(-1)
    os.close(release_w)
    _apply_signal_table(fields["signals"])
    cwd = _take_descriptors(fds)
    _close_all_but(spare, {0, 1, 2, cwd, release_r})
    config_path = _prepare(fields, cwd)
    while True:
        try:
            go = os.read(release_r, 1)
            break
        except InterruptedError:
            continue
    if not go:
        return 0  # the launcher did not commit (or the spare died): it runs cold with these descriptors
    os.close(release_r)
    return _become(config_path)


def _standby(spare: Spare, ctl_fd: int) -> int:
    """In a standby child: fault in the pages shared with the spare, wait for a request on
    ``ctl_fd`` (end of file: the spare ended or no longer needs it), then for the commit (``G``),
    and become the launch's process as ``_child`` does."""
    _signal.set_wakeup_fd(-1)
    for signum in STOP_SIGNALS:
        _signal.signal(signum, _signal.SIG_DFL)
    _close_all_but(spare, {0, 1, 2, ctl_fd})
    waiting = select.poll()
    waiting.register(ctl_fd, select.POLLIN)
    if not waiting.poll(PREFAULT_AFTER * 1000):
        prefault(lambda: bool(waiting.poll(0)))
    ctl = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET, 0, ctl_fd)
    try:
        data, fds = L._recv(ctl)
    except OSError:
        return 0
    if not data:
        return 0
    fields = dict(zip(L.REQUEST_FIELDS, L.unpack(data), strict=True))
    _apply_signal_table(fields["signals"])
    if len(fds) != 4:
        return 0
    config_path = _prepare(fields, _take_descriptors(fds))
    try:
        go = ctl.recv(1)
    except OSError:
        go = b""
    if go != b"G":
        return 0  # the launcher did not commit: it runs cold with these descriptors
    ctl.close()
    return _become(config_path)


MADV_POPULATE_WRITE = 23


def prefault(interrupted=lambda: False) -> int:
    """Copy now every page this process still shares with the spare (``MADV_POPULATE_WRITE`` over
    the private writable mappings, where ``/proc/self/pagemap`` shows a present page not mapped
    exclusively): a first turn writes to ~2,500 of them, and each copy-on-write fault costs
    3-6 µs here — on its path. Pages the spare never touched stay unallocated. Stops as soon as
    ``interrupted()`` (asked every ``PREFAULT_CHUNK`` pages). Returns the pages copied (0 where
    the kernel lacks ``MADV_POPULATE_WRITE``, Linux < 5.14)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        with open("/proc/self/maps", "rb") as handle:
            maps = handle.read().splitlines()
        pagemap = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return 0
    page = os.sysconf("SC_PAGE_SIZE")
    shared = bytes(0x31 if b & 0x81 == 0x80 else 0x30 for b in range(256))  # present, not exclusive
    import re

    copied = 0
    try:
        for line in maps:
            fields = line.split()
            if len(fields) < 2 or fields[1] != b"rw-p":
                continue
            start, end = (int(x, 16) for x in fields[0].split(b"-"))
            # one 64-bit entry per page; its top byte holds bit 63 (present) and bit 56 (exclusive)
            flags = os.pread(pagemap, (end - start) // page * 8, start // page * 8)[7::8].translate(shared)
            for run in re.finditer(b"1+", flags):
                for first in range(run.start(), run.end(), PREFAULT_CHUNK):
                    count = min(PREFAULT_CHUNK, run.end() - first)
                    if interrupted():
                        return copied
                    if madvise(start + first * page, count * page, MADV_POPULATE_WRITE) != 0:
                        return copied  # EINVAL: an older kernel
                    copied += count
    except (OSError, ValueError):
        pass
    finally:
        os.close(pagemap)
    return copied


def _prepare(fields: dict[str, bytes], cwd: int) -> str | None:
    """Take the launch's process state, all of it but its descriptors' contents (nothing is read
    from or written to them: done while the launcher commits, and harmless if it does not);
    returns the ``--config`` path."""
    os.setsid()
    os.fchdir(cwd)
    os.close(cwd)
    os.umask(int(fields["umask"]))
    _take_environment(fields["env"])
    _take_limits(fields["limits"])
    sys.argv = [os.fsdecode(a) for a in fields["argv"].split(b"\0")]
    sys.orig_argv = [os.fsdecode(a) for a in fields["orig_argv"].split(b"\0")]
    if fields["path0"][:1] == b"+":
        sys.path.insert(0, os.fsdecode(fields["path0"][1:]))
    if "tempfile" in sys.modules:
        sys.modules["tempfile"].tempdir = None  # TMPDIR: read again on first use
    _forget_home()
    _reopen_stdio()
    _set_comm(fields["comm"])
    mask = {int(s) for s in fields["sigmask"].split(b",") if s}
    _signal.pthread_sigmask(_signal.SIG_SETMASK, mask)
    config = fields["config"]
    return None if config == b"-" else os.fsdecode(config[1:])


def _become(config_path: str | None) -> int:
    """The commit is made: this process is the launch's server; run the cold path."""
    if os.environ.get("AGENT_SERVER_LOG_LEVEL", "").strip().upper() == "DEBUG":  # logging is not set up yet
        os.write(2, f"agent-server DEBUG {SERVED_NOTE} {os.getppid()}\n".encode())
    return _run(config_path)


def _apply_signal_table(table: bytes) -> None:
    """The launcher's signal dispositions (``_launcher._signal_table``); the spare's own handlers
    never survive (a signal the table does not name gets the default)."""
    for signum, kind in enumerate(table, start=1):
        handler = {ord("I"): _signal.SIG_IGN, ord("D"): _signal.SIG_DFL, ord("P"): _signal.default_int_handler}.get(kind)
        if handler is None:
            if signum not in STOP_SIGNALS:
                continue
            handler = _signal.SIG_DFL
        try:
            _signal.signal(signum, handler)
        except (OSError, ValueError, RuntimeError):
            pass  # SIGKILL, SIGSTOP, the C library's own


def _take_environment(block: bytes) -> None:
    os.environ.clear()
    for item in block.split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            os.environb[name] = value
    time.tzset()


def _forget_home() -> None:
    """What ``sysconfig`` and ``site`` derived from the spare's ``HOME``, made from the launch's."""
    import site

    site.USER_BASE = site.USER_SITE = None  # site.getuserbase()/getusersitepackages() compute them again
    sysconfig = sys.modules.get("sysconfig")
    if sysconfig is not None and hasattr(sysconfig, "_getuserbase"):
        sysconfig._USER_BASE = sysconfig._getuserbase()
        if getattr(sysconfig, "_CONFIG_VARS", None):
            sysconfig._CONFIG_VARS["userbase"] = sysconfig._USER_BASE


def _take_limits(text: bytes) -> None:
    import resource

    def value(cell: bytes) -> int:
        cell = cell.strip()
        return resource.RLIM_INFINITY if cell == b"unlimited" else int(cell)

    for number, line in enumerate(text.split(b"\n")[1:]):
        if not line.strip():
            continue
        try:
            resource.setrlimit(number, (value(line[26:46]), value(line[47:67])))
        except (ValueError, OSError):
            pass  # the key holds the hard limits equal; a soft one the kernel refuses stays the spare's


_LIBC: list = []
"""The C library's ``ctypes`` handle, opened once in the spare (``_set_comm``)."""


def _set_comm(comm: bytes) -> None:
    """The launcher's process name (``ps``, ``pgrep agent-server``, ``top`` show it)."""
    try:
        import ctypes

        if not _LIBC:
            _LIBC.append(ctypes.CDLL(None, use_errno=True))
        _LIBC[0].prctl(15, ctypes.c_char_p(comm.strip()[:15]), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError, ImportError):
        pass


def _reopen_stdio() -> None:
    """``sys.stdin``/``stdout``/``stderr`` made again for the new descriptors, as the interpreter
    makes them at start-up (line-buffered on a terminal, and stderr always; ``-u`` kept)."""
    import io

    unbuffered = getattr(sys.stdout, "write_through", False)
    for name, fd in (("stdin", 0), ("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        if old is None:
            continue
        reading = fd == 0
        try:
            raw = io.FileIO(fd, "rb" if reading else "wb", closefd=False)
        except OSError:
            continue
        raw.name = f"<{name}>"
        buffered = raw if (unbuffered and not reading) else (io.BufferedReader(raw) if reading else io.BufferedWriter(raw))
        line_buffering = not unbuffered and (fd == 2 or (not reading and os.isatty(fd)))
        stream = io.TextIOWrapper(buffered, encoding=old.encoding, errors=old.errors, newline="\n",
                                  line_buffering=line_buffering, write_through=unbuffered and not reading)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _run(config_path: str | None) -> int:
    """``cli._serve`` as the ``agent-server`` script runs it, ending as the interpreter would:
    non-daemon threads joined, exit handlers run, stdio flushed."""
    status = 1
    try:
        from agent_server import cli

        status = _exit_code(cli._serve(config_path))
    except SystemExit as exc:
        status = _exit_code(exc.code)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        status = -_signal.SIGINT
    except BaseException:  # noqa: BLE001 — as the interpreter: the traceback, then status 1
        sys.excepthook(*sys.exc_info())
        status = 1
    try:
        import threading

        threading._shutdown()
    except BaseException:  # noqa: BLE001
        pass
    try:
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001
        pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    if status == -_signal.SIGINT:  # an uncaught KeyboardInterrupt: the interpreter dies by SIGINT
        _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGINT)
        status = 130
    return status


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    try:
        sys.stderr.write(f"{code}\n")
    except (OSError, ValueError):
        pass
    return 1


# -- entry point ----------------------------------------------------------------------------------------


def main(argv: list[str]) -> int:
    """``FOLDER KEY LOCK_FD IDLE``: the spare for key ``KEY`` in ``FOLDER`` (module docstring)."""
    if len(argv) != 4:
        sys.stderr.write("usage: python -P -m agent_server.spare FOLDER KEY LOCK_FD IDLE (started by agent-server)\n")
        return 2
    folder, name, lock_fd, idle = argv[0], argv[1], int(argv[2]), float(argv[3])
    os.umask(0o077)
    started = time.monotonic()
    try:
        spare = Spare(folder, name, lock_fd, idle)
    except (OSError, L.FolderError) as exc:
        log(f"{L.FAILED_MARK.decode()} {exc}")
        return 1
    if not spare.own_lock():
        return 0  # another spare of this key has it
    gc.disable()  # as cli._serve does while the server loads (cli._end_gc_pause)
    spare.key = L.key_bytes()
    if L.key_sum(spare.key) != name:
        log(f"{L.FAILED_MARK.decode()} this process's key sums to {L.key_sum(spare.key)}, not {name} "
            "(its interpreter or environment differs from the launcher's)")
        return 1
    failed = warm()
    for problem in failed:
        log(f"warm-up: {problem}")
    probe_sandbox()
    spare.probed_at = time.monotonic()
    gc.freeze()
    gc.enable()
    if L.key_bytes() != spare.key:
        log("stopped before serving: the code changed while it was imported")
        return 0
    if not single_threaded():
        log(f"{L.FAILED_MARK.decode()} {threads()} threads after the imports (a fork must have one)")
        return 1
    spare.clean_stale()
    try:
        spare.bind()
    except OSError as exc:
        log(f"{L.FAILED_MARK.decode()} cannot listen: {exc}")
        return 1
    log(f"serving key {name} (warm in {time.monotonic() - started:.3f} s, {len(sys.modules)} modules, "
        f"idle limit {idle:g} s)")
    spare.idle_since = time.monotonic()  # idle from now: not from before its imports
    return spare.serve()
