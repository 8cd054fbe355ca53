"""The confined shell's own writes, recorded by the kernel: seccomp user notifications (stdlib only).

Role: ``listen()`` loads, into the calling process (the sandbox's PID 1, after its other
confinement), a second seccomp filter that hands every write-intent system call — ``open``/
``openat``/``creat`` with a write or create flag, ``rename*``, ``unlink*``, ``link*``,
``symlink*``, ``truncate``, ``chmod``/``fchmod``/``fchmodat*``, ``mkdir*``, ``rmdir`` — to a supervisor as a
user notification, and returns the listener descriptor. ``supervise(listener, out_fd)`` (a thread
of PID 1) reads each notification, resolves the path(s) it names as the calling process sees them
(its cwd or directory descriptor from ``/proc/<pid>``, the string from ``/proc/<pid>/mem``), writes
them to ``out_fd`` (NUL-separated), and lets the call continue unchanged
(``SECCOMP_USER_NOTIF_FLAG_CONTINUE``): it records, it never decides. The record is written to a
file the command cannot see or write (the session folder), so it is evidence of what the command's
own processes asked to change — not of who else wrote the workspace meanwhile.

Must never: refuse or change a system call, or leave one unanswered (every notification is answered,
whatever went wrong reading it).

``Watch`` sees who else wrote a path after the command let go of it (inotify on its folder, read
in order with the notifications): such a path follows as a ``FOREIGN`` entry, and every path's
status-change time when the command ended as a ``LEFT`` entry (``read_foreign``, ``read_stamps``).
The first time the command names a path, its status-change time (``ctime``, before the kernel acts)
follows as a ``CHANGED`` entry (``read_stamps``): a time after the call started shows another process
changed the file during the call before the command did (``checkpoints.recorder`` then counts it
uncertain). A record starts with ``LISTENING`` once the filter is in place; ``INCOMPLETE`` in it means one
call's path could not be read (the record then proves nothing). The paths are what the processes
named, read before the kernel acts (a process that rewrites its path buffer in that instant can make
the record name another file: the record is evidence of intent, not a security boundary).
"""

from __future__ import annotations

import contextvars
import ctypes
import errno
import fcntl
import os
import signal
import stat
import select
import struct
import threading
import time

SHELL_RECORD: contextvars.ContextVar[str | None] = contextvars.ContextVar("shell_record", default=None)
"""Where the confined command about to be launched records its writes (set by the caller around one
call, e.g. ``checkpoints.recorder``; read by the confiner into the spec's ``evidence``)."""

LISTENING, INCOMPLETE = b"\0LISTENING\0", b"\0INCOMPLETE\0"
CHANGED = b"\0CHANGED\0"
"""Marks a stamp entry, ``<ctime_ns>:<path>``: the path's status-change time when the command first
asked to change it (what another writer did to it during the call before that shows there)."""
FOREIGN = b"\0FOREIGN\0"
"""Marks a path another process changed after the command let go of it (``Watch``): the file's
state at the end is not (only) what the command left."""
LEFT = b"\0LEFT\0"
"""Marks a ``<ctime_ns>:<path>`` entry: the path's status-change time when the command ended (what a
writer did between then and the after-snapshot shows as a different time)."""
UNWATCHED = b"\0UNWATCHED\0"
"""Marks why the watch is blind (``EMFILE``: no inotify instance; ``ENOSPC``: no watch left;
``OVERFLOW``, in records of older versions: its event queue overflowed), once a record: the paths it
could not follow are ``FOREIGN`` at the end, so their changes are asked about (``read_unwatched``). An
overflow now blinds only the paths it may have hidden something of (``Watch._overflowed``)."""
UNLISTENED = b"\0UNLISTENED\0"
"""Starts a record whose filter could not be loaded, followed by why (``read_unlistened``): the
command ran without a record, so every file it changed is uncertain (asked about at /undo)."""
_ENTRY_MARKS = (CHANGED, FOREIGN, LEFT, UNWATCHED)
RET_ALLOW, RET_USER_NOTIF = 0x7FFF0000, 0x7FC00000
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER = 1, 1 << 3
NOTIF_RECV, NOTIF_SEND, NOTIF_ID_VALID = 0xC0502100, 0xC0182101, 0x40082102
FLAG_CONTINUE = 1
AT_FDCWD = 0xFFFFFF9C  # -100, as the low 32 bits of the argument
WRITE_FLAGS = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000  # WRONLY RDWR CREAT TRUNC APPEND TMPFILE

# audit arch, seccomp's own syscall number, and per write-intent syscall: its number, the
# (directory-fd argument or None, path argument) pairs it changes — (descriptor argument, None): the
# file the descriptor is open on (``fchmod``: a descriptor opened only to read changes the mode) —,
# and its flags argument (opens).
_ARCHES = {
    "x86_64": (0xC000003E, 317, {
        "open": (2, [(None, 0)], 1), "openat": (257, [(0, 1)], 2), "creat": (85, [(None, 0)], None),
        "rename": (82, [(None, 0), (None, 1)], None), "renameat": (264, [(0, 1), (2, 3)], None),
        "renameat2": (316, [(0, 1), (2, 3)], None), "unlink": (87, [(None, 0)], None),
        "unlinkat": (263, [(0, 1)], None), "rmdir": (84, [(None, 0)], None), "link": (86, [(None, 1)], None),
        "linkat": (265, [(2, 3)], None), "symlink": (88, [(None, 1)], None), "symlinkat": (266, [(1, 2)], None),
        "truncate": (76, [(None, 0)], None), "chmod": (90, [(None, 0)], None), "fchmodat": (268, [(0, 1)], None),
        "fchmodat2": (452, [(0, 1)], None), "mkdir": (83, [(None, 0)], None), "mkdirat": (258, [(0, 1)], None),
        "fchmod": (91, [(0, None)], None)}),
    "aarch64": (0xC00000B7, 277, {
        "openat": (56, [(0, 1)], 2), "renameat": (38, [(0, 1), (2, 3)], None),
        "renameat2": (276, [(0, 1), (2, 3)], None), "unlinkat": (35, [(0, 1)], None),
        "linkat": (37, [(2, 3)], None), "symlinkat": (36, [(1, 2)], None), "truncate": (45, [(None, 0)], None),
        "fchmodat": (53, [(0, 1)], None), "fchmodat2": (452, [(0, 1)], None), "mkdirat": (34, [(0, 1)], None),
        "fchmod": (52, [(0, None)], None)}),
}


class NotifyError(Exception):
    """The notifying filter could not be loaded (the command then runs without a record)."""


def _machine() -> str:
    machine = os.uname().machine.lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def build(machine: str | None = None) -> list[tuple[int, int, int, int]]:
    """The filter as ``(code, jt, jf, k)``: write-intent calls notify, everything else is allowed."""
    machine = machine or _machine()
    if machine not in _ARCHES:
        raise NotifyError(f"unsupported architecture {machine}")
    arch, _, calls = _ARCHES[machine]
    prog: list[tuple] = []

    def op(code: int, k: int, jt: object = 0, jf: object = 0) -> None:
        prog.append((code, jt, jf, k))

    op(LD_W_ABS, 4)
    op(JEQ_K, arch, 0, "allow")
    op(LD_W_ABS, 0)
    for name, (nr, _paths, flags) in calls.items():
        op(JEQ_K, nr, f"flags{flags}" if flags is not None else "notify", 0)
    op(RET_K, RET_ALLOW)
    labels: dict[str, int] = {}
    for flags in sorted({f for _, _, f in calls.values() if f is not None}):
        labels[f"flags{flags}"] = len(prog)
        op(LD_W_ABS, 16 + 8 * flags)
        op(JSET_K, WRITE_FLAGS, "notify", "allow")
    labels["allow"] = len(prog)
    op(RET_K, RET_ALLOW)
    labels["notify"] = len(prog)
    op(RET_K, RET_USER_NOTIF)
    out = []
    for i, (code, jt, jf, k) in enumerate(prog):
        rel = [labels[j] - i - 1 if isinstance(j, str) else j for j in (jt, jf)]
        if any(not 0 <= r < 256 for r in rel):
            raise NotifyError("jump out of range")
        out.append((code, rel[0], rel[1], k))
    return out


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def listen() -> int:
    """Load the filter into this process (``no_new_privs`` must already be set) and return the
    listener descriptor (close-on-exec). Raises ``NotifyError``."""
    machine = _machine()
    if machine not in _ARCHES:
        raise NotifyError(f"unsupported architecture {machine}")
    raw = b"".join(struct.pack("=HBBI", *ins) for ins in build(machine))
    buf = ctypes.create_string_buffer(raw, len(raw))
    prog = _Fprog(len(raw) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fd = libc.syscall(ctypes.c_long(_ARCHES[machine][1]), ctypes.c_long(SECCOMP_SET_MODE_FILTER),
                      ctypes.c_long(SECCOMP_FILTER_FLAG_NEW_LISTENER), ctypes.byref(prog))
    if fd < 0:
        err = ctypes.get_errno()
        raise NotifyError(f"seccomp(NEW_LISTENER): {errno.errorcode.get(err, err)}")
    return int(fd)


def _string(mem: int, address: int) -> str | None:
    """The NUL-terminated string at ``address`` of the process whose ``mem`` is open, or ``None``."""
    out = b""
    while len(out) < 4096:
        try:
            chunk = os.pread(mem, 256, address + len(out))
        except OSError:
            return None
        if not chunk:
            return None
        end = chunk.find(b"\0")
        if end >= 0:
            return os.fsdecode(out + chunk[:end])
        out += chunk
    return None


def _base(pid: int, dirfd: int | None) -> str | None:
    try:
        if dirfd is None or dirfd & 0xFFFFFFFF == AT_FDCWD:
            return os.readlink(f"/proc/{pid}/cwd")
        return os.readlink(f"/proc/{pid}/fd/{dirfd & 0xFFFFFFFF}")
    except OSError:
        return None


def supervise(listener: int, out_fd: int, watch: "Watch | None" = None) -> None:
    """Answer every notification of ``listener`` with "continue", writing the paths each names to
    ``out_fd`` first (and arming ``watch`` on them, after it took in what happened before this
    call). Returns when the listener is gone (no process left to notify)."""
    machine = _machine()
    open_flags = {nr: flags for nr, _paths, flags in _ARCHES[machine][2].values() if flags is not None}
    opens = set(open_flags)
    calls = {nr: paths for nr, paths, _ in _ARCHES[machine][2].values()}
    seen: set[bytes] = set()  # paths already stamped: only the command's first write-intent call counts
    libc = ctypes.CDLL(None, use_errno=True)
    notif = ctypes.create_string_buffer(80)
    if watch is not None:  # its queue read as it fills too, not only at the command's calls
        threading.Thread(target=watch.keep_up, daemon=True).start()
    while True:
        ctypes.memset(notif, 0, 80)
        if libc.ioctl(listener, ctypes.c_ulong(NOTIF_RECV), notif) != 0:
            err = ctypes.get_errno()
            if err in (errno.EINTR, errno.ENOENT):
                continue
            return
        notif_id, pid, _flags, nr, _arch, _ip = struct.unpack_from("=QIIiIQ", notif.raw, 0)
        args = struct.unpack_from("=6Q", notif.raw, 32)
        record = b""
        named_now: list[bytes] = []
        try:
            mem = os.open(f"/proc/{pid}/mem", os.O_RDONLY | os.O_CLOEXEC)
            try:
                for dirfd_arg, path_arg in calls.get(nr, ()):
                    if path_arg is None:  # a call on a descriptor: the path the file is open by
                        text, base = _base(pid, args[dirfd_arg]), None
                        if text is not None and not text.startswith("/"):
                            continue  # a pipe or a socket ("pipe:[…]"): no file of the workspace
                    else:
                        text = _string(mem, args[path_arg])
                        base = None if text is None or text.startswith("/") else _base(
                            pid, None if dirfd_arg is None else args[dirfd_arg])
                    if text is None or (base is None and not text.startswith("/")):
                        record += INCOMPLETE
                        continue
                    named = os.fsencode(os.path.normpath(os.path.join(base or "/", text)))
                    record += named + b"\0"
                    named_now.append(named)
                    if named not in seen:
                        seen.add(named)
                        record += _stamp(named)
            finally:
                os.close(mem)
        except OSError:
            record = INCOMPLETE
        id_buf = ctypes.c_uint64(notif_id)
        if libc.ioctl(listener, ctypes.c_ulong(NOTIF_ID_VALID), ctypes.byref(id_buf)) != 0:
            record = b""  # the process is gone: nothing was changed by this call
        elif watch is not None and named_now:
            try:
                record += watch.arm(named_now, pid, nr in opens, args[open_flags[nr]] if nr in opens else 0)
            except Exception:  # noqa: BLE001 - answer the call whatever the watch did; the record then proves nothing
                record += INCOMPLETE
        if record:
            try:
                os.write(out_fd, record)
            except OSError:
                pass
        resp = struct.pack("=QqiI", notif_id, 0, 0, FLAG_CONTINUE)
        libc.ioctl(listener, ctypes.c_ulong(NOTIF_SEND), ctypes.create_string_buffer(resp, 24))


def _stamp(named: bytes) -> bytes:
    """The ``CHANGED`` entry of ``named`` as it is before the kernel acts (nothing when it is absent)."""
    try:
        ctime = os.stat(named).st_ctime_ns
    except OSError:
        return b""
    return CHANGED + str(ctime).encode() + b":" + named + b"\0"


def read_record(path: str) -> set[str] | None:
    """The paths a record names, or ``None`` when it proves nothing (no record, the filter was not
    in place, or a path could not be read)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    if not raw.startswith(LISTENING) or INCOMPLETE in raw:
        return None
    tokens = raw[len(LISTENING):].split(b"\0")
    marks = {m.strip(b"\0") for m in _ENTRY_MARKS}
    skip = {i + 1 for i, t in enumerate(tokens) if t in marks}
    return {os.fsdecode(t) for i, t in enumerate(tokens) if t and i not in skip and t not in marks}


def read_stamps(path: str, mark: bytes = CHANGED) -> dict[str, int]:
    """Each path's status-change time (ns) when the command first asked to change it, from the
    record's ``CHANGED`` entries (``{}`` without a record); with ``mark=LEFT``, when it ended."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    stamps: dict[str, int] = {}
    for entry in raw.split(mark)[1:]:
        head, _, _rest = entry.partition(b"\0")
        ctime, sep, named = head.partition(b":")
        if sep and ctime.isdigit():
            stamps.setdefault(os.fsdecode(named), int(ctime))
    return stamps


def read_unwatched(path: str) -> str | None:
    """Why the record's watch was blind (``UNWATCHED``: ``EMFILE``, ``ENOSPC``, ``OVERFLOW``), or ``None``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    _, found, rest = raw.partition(UNWATCHED)
    return (os.fsdecode(rest.partition(b"\0")[0]) or "EMFILE") if found else None


def read_unlistened(path: str) -> str | None:
    """Why the record's filter could not be loaded (``UNLISTENED``), or ``None``."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(4096)
    except OSError:
        return None
    if not raw.startswith(UNLISTENED):
        return None
    return raw[len(UNLISTENED):].partition(b"\0")[0].decode("utf-8", "replace") or "unknown"


def read_foreign(path: str) -> set[str]:
    """The paths another process changed after the command let go of them (``FOREIGN`` entries)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return set()
    return {os.fsdecode(entry.partition(b"\0")[0]) for entry in raw.split(FOREIGN)[1:]}


IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO = 0x2, 0x4, 0x8, 0x40, 0x80
IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF = 0x100, 0x200, 0x400, 0x800
IN_Q_OVERFLOW, IN_IGNORED, IN_ONLYDIR = 0x4000, 0x8000, 0x1000000
IN_ACCESS, IN_CLOSE_NOWRITE, IN_OPEN = 0x1, 0x10, 0x20
_CHANGES = IN_MODIFY | IN_ATTRIB | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
_WATCH_MASK = _CHANGES | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR
# a file the command opened for writing is watched itself for its opens and the reads that closed
# (its folder's watch would carry every read of every file there: a full queue) — added through an
# ``O_PATH`` descriptor of the very inode looked at, so its counts are that inode's, whatever its name
_OPENS = IN_OPEN | IN_CLOSE_NOWRITE
# (its reads too, counted for nothing: a reader's read stands between its open and the next one's, which
# the kernel would otherwise merge into one — a reader's open and a writer's, taken for the reader alone;
# and its closes after writing, counted for nothing: each stands between its folder's close events, two of
# which — another writer's and the command's — the kernel would merge into one, the other's save unseen)
_FILE_MASK = _OPENS | IN_ACCESS | IN_CLOSE_WRITE
_HELD, _OP, _LET_GO = 0, 1, 2  # a tracked path: open for writing, a path call in flight, let go
O_CREAT, O_EXCL = 0o100, 0o200
_PROBE = -1  # stands for the lease probe's own open among the command's (``Watch.own``)
# created files move to their own watch in batches (a marker each: bench/README.md) — or sooner once
# their folders' watches carry that many opens of other files (a build reading its sources there)
_SWITCH_BATCH, _SWITCH_NOISE = 64, 512
_FIONREAD = 0x541B
_FULL = 128 * 1024  # bytes queued (8,192 events at most) before ``keep_up`` reads: half the kernel's queue
_KEEP_UP_EVERY = 0.02  # seconds between two looks at a queue not that full
_READS = 16  # reads of 64 KiB a drain takes at most: more than the kernel's queue holds (16,384 events)
_BETWEEN = -2  # the pid of a read between the command's calls (``Watch.keep_up``): no process's
_TICK_NS = 20_000_000  # a status-change time's granularity (the kernel's coarse clock), and then some


def _inode(path: bytes) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _device(path: bytes) -> bool:
    """Whether ``path`` is a device, a fifo or a socket (followed): never a file a snapshot holds."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


class Watch:
    """Who wrote a file after the command's first write to it: inotify on the folders of the paths
    the command named, read in order with its notifications (``drain`` before each is answered).

    A path is *held* from the command's open for writing until a close-after-write event of it (an
    event of a path call — rename, unlink, chmod, truncate… — ends that call), then *let go*. An
    event of a let-go path while no process of the command holds it open for writing (a descriptor
    or a shared writable mapping, from ``/proc`` of the sandbox's own PID namespace) is another
    process's: the path becomes ``FOREIGN``. A folder no longer watched (removed, moved) makes its
    paths blind: foreign if they exist at the end; so does an overflow of the event queue (read once
    half full, ``keep_up``) for the paths changed since the last read that lost nothing or held then. While the
    command holds a path, a rename or removal of it that is not the command's path call is another
    process's too (an editor's atomic save). Another process's in-place save while the command holds
    the path ends the hold early (its close), so the command's own later close is seen as a change of
    a let-go path: foreign too.

    Such a save whose close the kernel merged with the command's own (two equal events with nothing
    between) is seen by counting opens, per inode (a rename moves nothing): each file the command
    opens for writing is watched itself (``IN_OPEN``, ``IN_CLOSE_NOWRITE``); a file the command
    creates, from before its creating open — its folder's watch carries the opens of that name until
    the file's own watch is in place, the switch marked in the queue by a watch of our own removed
    (its ``IN_IGNORED``: nobody else can make it). Its opens, less the command's write-opens and the
    reads that closed, come to zero by the end; one left over is another process's write —
    ``FOREIGN`` — unless a reader explains it: exactly one left over, every open of the file since
    its watch was counted (nobody else had it open then: a lease probe), and at the end somebody
    still has it open and nobody for writing (lease probes again, ``_only_read_now``): a ``tail -f``
    or an editor holding the file, not a write."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        self.unwatched = b""  # why the watch is blind, said once in the record (``UNWATCHED``)
        self.pending = b""
        if self.fd < 0:
            self._blind_because(errno.errorcode.get(ctypes.get_errno(), "EMFILE"))
        self.lock = threading.Lock()
        self.dirs: dict[int, set[bytes]] = {}  # watch descriptor -> the folder's spellings
        self.wd_of: dict[bytes, int] = {}
        self.state: dict[bytes, tuple[int, int]] = {}  # path -> (state, pid of a path call)
        self.foreign: set[bytes] = set()
        self.blind: set[bytes] = set()
        self.real: dict[bytes, bytes] = {}  # a path (or folder) as named -> resolved (both are followed)
        self.calls: dict[bytes, int] = {}  # paths of a path call in flight -> the calling process
        # per inode the command opened for writing (its own watch): the opens seen that are not the
        # command's write-opens (``own``: each one announced takes the next open seen), less the reads
        # that closed (never below 0: a close of an open not counted — merged into another's, or from
        # before the watch); above 0 at the end, an open no read explains: another process's write
        self.opens: dict[int, int] = {}
        self.own: dict[int | bytes, list[int]] = {}  # a file watch (or a created path) -> the pids of opens to come
        self.files: dict[int, tuple[int, int]] = {}  # a file's watch descriptor -> its inode (dev, ino)
        self.by_inode: dict[tuple[int, int], int] = {}
        self.alone: set[int] = set()  # file watches that have counted every open of their inode
        self.named_wd: dict[bytes, int] = {}  # a resolved path -> the file watch last taken for it
        # a file the command is creating: its opens counted by its folder's watch until its own is in place
        self.created: dict[bytes, int] = {}  # resolved path -> opens so far
        self.created_dir: dict[bytes, tuple[int, bytes]] = {}  # resolved path -> (its folder's wd, folder)
        self.open_dirs: dict[int, set[bytes]] = {}  # folder wd counting opens -> the created paths in it
        self.to_switch: set[bytes] = set()
        self.noise = 0  # opens of other files the folders counting a created file's carried since the last switch
        self.switching: dict[bytes, int] = {}  # created path -> its new file watch, until the marker
        self.fresh: set[int] = set()  # file watches whose events before the marker are the folder's
        self.marker: int | None = None
        self.memfd: int | None = None
        self.ended = False
        self.tainted: set[tuple[int, int]] = set()  # inodes whose opens were counted when the queue overflowed
        self.tainted_paths: set[bytes] = set()  # created files whose folder counted their opens then
        self.clean_read_ns = time.time_ns()  # the last read of the queue that lost nothing (no overflow)

    def keep_up(self) -> None:
        """Read the queue when it fills, between the command's calls (a thread): a command that reads
        and writes through descriptors it holds (a SQLite WAL loop) makes no call that would, and a
        queue left to fill overflows. Only once it holds ``_FULL`` bytes: a read between two equal
        events keeps them apart, and the opens and closes counted are right only when the kernel merged
        both or neither (a reader's two opens read apart, its two closes merged, would leave an open
        over: asked about). Bounded: at most a full queue's worth at a time, under the lock."""
        if self.fd < 0:
            return
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        queued = ctypes.c_int(0)
        while not self.ended:
            try:
                ready = poller.poll(1000)
            except OSError:
                return
            if not ready:
                continue
            if self.libc.ioctl(self.fd, _FIONREAD, ctypes.byref(queued)) != 0 or queued.value < _FULL:
                time.sleep(_KEEP_UP_EVERY)  # (the events wait in the queue: poll would wake at once again)
                continue
            with self.lock:
                if self.ended:
                    return
                self.pending += self._drain(_BETWEEN, bounded=True)

    def arm(self, paths: list[bytes], pid: int, is_open: bool, flags: int = O_CREAT) -> bytes:
        """Before the command's call on ``paths`` goes ahead: take in the events so far, then mark
        them held (``flags``: an open's). Returns the record entries to write (``FOREIGN`` ones)."""
        with self.lock:
            out = self._drain(pid)
            for named in paths:
                if _device(named):  # /dev/null, a fifo: no content a snapshot keeps, opened by everyone
                    continue
                spellings = self._spellings(named)
                for spelled in spellings:
                    self._track(spelled)
                    self.state[spelled] = (_HELD, 0) if is_open else (_OP, pid)
                    if is_open:
                        self.calls.pop(spelled, None)
                    else:
                        self.calls[spelled] = pid
                if is_open:
                    self._own_open(spellings[-1], flags, pid)
                    if spellings[-1] in self.tainted_paths or self.tainted and _inode(spellings[-1]) in self.tainted:
                        self.blind.update(spellings)  # its count lost opens in an overflow: held again, blind
            out, self.pending = out + self.pending, b""
            return out

    def _own_open(self, real: bytes, flags: int, pid: int) -> None:
        """The command's open for writing of ``real``, to come: its ``IN_OPEN`` is no other writer's."""
        if real in self.created:  # created by an earlier open whose file no event has shown yet
            if flags & O_CREAT:
                self.own.setdefault(real, []).append(pid)
            return
        watched = self._watch_file(real, probe=True)
        if watched is not None:
            if not (flags & O_CREAT and flags & O_EXCL):  # an exclusive create of a file there fails
                self.own.setdefault(watched[0], []).append(pid)
        elif flags & O_CREAT and self._count_in_folder(real):
            self.created[real] = 0
            self.own.setdefault(real, []).append(pid)

    def _blind_because(self, reason: str) -> None:
        if not self.unwatched:
            self.unwatched = reason.encode()
            self.pending += UNWATCHED + self.unwatched + b"\0"

    def _spellings(self, named: bytes) -> tuple[bytes, ...]:
        """``named`` and, if different, its resolved path (events name the folder they happen in)."""
        real = self.real.get(named)
        if real is None:
            folder, base = os.path.split(named)
            real_folder = self.real.get(folder)
            if real_folder is None:
                real_folder = self.real[folder] = os.fsencode(os.path.realpath(folder))
            real = os.path.join(real_folder, base)
            if os.path.islink(real):
                real = os.fsencode(os.path.realpath(real))
            self.real[named] = real
        return (named,) if real == named else (named, real)

    def finish(self) -> bytes:
        """When the command has ended: the last events, blind paths that exist, and a ``LEFT``
        stamp of every path followed (the recorder compares it with the file at its snapshot)."""
        with self.lock:
            self.ended = True
            out = self._drain(0, ended=True)
            readers: dict[bytes, bool] = {}
            for named in sorted(self.state):
                try:
                    st = os.stat(named)
                except OSError:
                    continue
                # blind, or opened by a process that is no write-open of the command's and closed no read:
                # another process's write (an in-place save whose close the kernel merged with the
                # command's own) — unless it is one reader, still there, of a file whose every open was counted
                if named not in self.foreign:
                    real = self._spellings(named)[-1]
                    wd = self.by_inode.get((st.st_dev, st.st_ino))
                    left_over = (self.opens.get(wd, 0) if wd is not None else 0) + self.created.get(real, 0)
                    if left_over == 1 and (wd in self.alone if wd is not None else real in self.created):
                        if real not in readers:
                            readers[real] = _only_read_now(real, (st.st_dev, st.st_ino))
                        left_over -= readers[real]
                    if named in self.blind or left_over > 0:
                        self.foreign.add(named)
                        out += FOREIGN + named + b"\0"
                out += LEFT + str(st.st_ctime_ns).encode() + b":" + named + b"\0"
            out, self.pending = out + self.pending, b""
            return out

    def _watch_file(self, real: bytes, probe: bool) -> tuple[int, bool] | None:
        """Watch the inode at ``real`` itself (its opens, ``_FILE_MASK``): ``(wd, new)``, or ``None``
        when nothing is there (yet). A new watch with ``probe`` has counted every open of its inode
        (``alone``) if nobody else had the file open right after it was placed."""
        if self.fd < 0:
            return None
        try:
            ref = os.open(real, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)  # no event: the inode looked at
        except OSError:
            return None
        try:
            st = os.fstat(ref)
            if not stat.S_ISREG(st.st_mode):
                return None
            wd = self.libc.inotify_add_watch(self.fd, b"/proc/self/fd/%d" % ref, _FILE_MASK)
        finally:
            os.close(ref)
        if wd < 0:
            return None
        self.named_wd[real] = wd
        if wd in self.files:
            return wd, False
        inode = (st.st_dev, st.st_ino)
        self.files[wd] = inode
        self.by_inode[inode] = wd
        if probe:
            opened, alone = _nobody_else_has_it_open(real, inode)
            if opened:  # the probe's own open (its event read later) is no other process's
                self.own.setdefault(wd, []).insert(0, _PROBE)
            if alone:
                self.alone.add(wd)
        return wd, True

    def _count_in_folder(self, real: bytes) -> bool:
        """Have ``real``'s folder count its opens (a file about to be created); ``False`` when the
        folder is not watched (its paths are blind anyway)."""
        folder = os.path.dirname(real)
        wd = self.wd_of.get(folder)
        if wd is None:
            return False
        if wd not in self.open_dirs:
            if self.libc.inotify_add_watch(self.fd, folder, _WATCH_MASK | _OPENS) != wd:
                return False
            self.open_dirs[wd] = set()
        self.open_dirs[wd].add(real)
        self.created_dir[real] = (wd, folder)
        return True

    def _switch(self) -> None:
        """The created files seen since: each gets its own watch, and a marker follows in the
        queue — before it, their opens are their folder's events; after it, their own watch's."""
        self.noise = 0
        if self._marker_inode() is None:  # no marker can be made: their folders go on counting
            self.to_switch.clear()
            return
        for real in sorted(self.to_switch):
            watched = self._watch_file(real, probe=False)
            if watched is None:
                continue  # gone again (or not a file): its folder goes on counting
            self.switching[real] = watched[0]
            if watched[1]:
                self.fresh.add(watched[0])
        self.to_switch.clear()
        if self.switching:
            wd = self.libc.inotify_add_watch(self.fd, b"/proc/self/fd/%d" % self.memfd, IN_ATTRIB)
            if wd < 0 or self.libc.inotify_rm_watch(self.fd, wd) != 0:
                self._switched(conservative=True)
            else:
                self.marker = wd  # its IN_IGNORED is in the queue now, after everything before the switch

    def _marker_inode(self) -> int | None:
        if self.memfd is None:
            try:
                self.memfd = os.memfd_create("agent-server-watch-marker", os.MFD_CLOEXEC)
            except (OSError, AttributeError):
                self.memfd = -1
        return None if self.memfd < 0 else self.memfd

    def _switched(self, conservative: bool = False) -> None:
        """The marker was read: the switched files' opens go on their own watch, with what their
        folder counted (``conservative``: no marker was read — counted twice, the safe side)."""
        for real, wd in self.switching.items():
            counted = self.created.pop(real, 0)
            own = self.own.pop(real, [])
            if wd in self.files:  # (conservative: its opens between the switch and now unknown — one more)
                self.opens[wd] = self.opens.get(wd, 0) + counted + conservative
                self.own[wd] = own + self.own.get(wd, [])
                if wd in self.fresh and not conservative:
                    self.alone.add(wd)  # every open since before its creation was counted
            self.fresh.discard(wd)
            self._uncount_in_folder(real)
        self.switching.clear()
        self.marker = None

    def _uncount_in_folder(self, real: bytes) -> None:
        folder_wd, folder = self.created_dir.pop(real, (None, b""))
        names = self.open_dirs.get(folder_wd) if folder_wd is not None else None
        if names is not None:
            names.discard(real)
            if not names:  # no created file left in it: the folder stops carrying every open
                del self.open_dirs[folder_wd]
                self.libc.inotify_add_watch(self.fd, folder, _WATCH_MASK)

    def _track(self, named: bytes) -> None:
        folder = os.path.dirname(named)
        if self.fd < 0:
            self.blind.add(named)
            return
        if folder in self.wd_of:
            return
        wd = self.libc.inotify_add_watch(self.fd, folder, _WATCH_MASK)
        if wd < 0:
            if ctypes.get_errno() in (errno.ENOSPC, errno.ENOMEM):  # no watch left (fs.inotify.max_user_watches)
                self._blind_because("ENOSPC")
            self.blind.add(named)  # the folder is not there (yet) or no watch is left: not seen
            return
        self.wd_of[folder] = wd
        self.dirs.setdefault(wd, set()).add(folder)

    def _read(self, bounded: bool = False) -> list[tuple[int, int, bytes]]:
        """The events queued — ``bounded``: at most a full queue's worth (``keep_up``: a command flooding
        it never keeps that read, and the lock it holds, going; the command's calls and its end read
        all, in order with them)."""
        events: list[tuple[int, int, bytes]] = []
        reads = 0
        while self.fd >= 0 and not (bounded and reads >= _READS):
            reads += 1
            try:
                raw = os.read(self.fd, 65536)
            except BlockingIOError:
                if not any(mask & IN_Q_OVERFLOW for _wd, mask, _name in events):
                    self.clean_read_ns = time.time_ns()  # the queue was empty: nothing lost up to here
                break
            except OSError:
                self._lose_all()
                break
            at = 0
            while at + 16 <= len(raw):
                wd, mask, _cookie, size = struct.unpack_from("=iIII", raw, at)
                events.append((wd, mask, raw[at + 16:at + 16 + size].rstrip(b"\0")))
                at += 16 + size
        return events

    def _take(self, raw: list[tuple[int, int, bytes]]) -> list[tuple[bytes, int]]:
        """Count the opens of ``raw`` events in order; returns the changes of paths, in order."""
        events: list[tuple[bytes, int]] = []
        for wd, mask, name in raw:
            if mask & IN_Q_OVERFLOW:
                self._overflowed()
            elif wd == self.marker:
                self._switched()
            elif wd in self.files:  # a file's own watch: its opens and the reads that closed
                if mask & IN_IGNORED:  # the inode is gone (replaced, removed): what it saw goes with it
                    self.by_inode.pop(self.files.pop(wd), None)
                    self.opens.pop(wd, None)
                    self.own.pop(wd, None)
                    self.alone.discard(wd)
                elif mask & _OPENS and wd not in self.fresh:
                    self._opened(self.opens, wd, mask)
            elif mask & (IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF):
                self._lose(wd)
            elif name:
                if mask & _OPENS and wd in self.open_dirs:  # a created file's open, by its folder
                    for folder in self.dirs.get(wd, ()):
                        spelled = os.path.join(folder, name)
                        if spelled in self.created:
                            self._opened(self.created, spelled, mask)
                            break
                    else:
                        self.noise += 1
                if mask & _CHANGES:
                    events.extend((os.path.join(folder, name), mask) for folder in self.dirs.get(wd, ()))
        return events

    def _opened(self, counts: dict, key: int | bytes, mask: int) -> None:
        """An open (``IN_OPEN``) or a read's close (``IN_CLOSE_NOWRITE``) of a counted file."""
        if mask & IN_OPEN:
            own = self.own.get(key)
            if own:  # the command's own write-open, announced before it
                own.pop(0)
                if not own:
                    del self.own[key]
            else:
                counts[key] = counts.get(key, 0) + 1
        elif counts.get(key, 0) > 0:
            counts[key] -= 1

    def _drain(self, pid: int, ended: bool = False, bounded: bool = False) -> bytes:
        out = b""
        while True:
            raw = self._read(bounded)
            out += self._judge(self._take(raw), pid, ended)
            if self.to_switch and not ended and (len(self.to_switch) >= _SWITCH_BATCH or self.noise >= _SWITCH_NOISE):
                self._switch()
            if self.marker is None or (not raw and self.fd >= 0):
                if self.marker is not None:  # the marker is queued before we read: not there, it was lost
                    self._switched(conservative=True)
                break
        if bounded:  # a read between the calls, maybe not to the end: what is announced stays announced
            return out
        # ``pid`` is making its next call, so its earlier opens are done: one no event showed failed
        for key in list(self.own):
            left = [] if ended else [p for p in self.own[key] if p not in (pid, _PROBE)]
            if left:
                self.own[key] = left
            else:
                del self.own[key]
        return out

    def _judge(self, events: list[tuple[bytes, int]], pid: int, ended: bool) -> bytes:
        out, suspects = b"", []
        for named, mask in events:
            state = self.state.get(named)
            if state is None or named in self.foreign:
                continue
            real = self._spellings(named)[-1]
            if real in self.created and real not in self.switching and mask & (IN_DELETE | IN_MOVED_FROM):
                self.created.pop(real)  # gone before its own watch: nothing left there to count
                self.own.pop(real, None)
                self.to_switch.discard(real)
                self._uncount_in_folder(real)
            if state[0] == _HELD:
                if real in self.created:  # created by the command's open: its own watch from now on
                    if real not in self.switching:
                        self.to_switch.add(real)
                elif real not in self.named_wd:  # not there at its open (nor counted by its folder)
                    self._watch_file(real, probe=False)
                if mask & (IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE):
                    # a rename or removal of the name is a path call, which the command's own would have
                    # made a call in flight: another process replaced the file (an editor's atomic save)
                    self.foreign.add(named)
                    out += FOREIGN + named + b"\0"
                elif mask & IN_CLOSE_WRITE:
                    self.state[named] = (_LET_GO, 0)
            elif state[0] == _OP:
                self.state[named] = (_LET_GO, 0)  # the path call's own event: it is done
                self.calls.pop(named, None)
            else:
                suspects.append(named)
        if suspects:
            held = set() if ended else _held_for_writing(set(suspects))
            for named in dict.fromkeys(suspects):
                if named not in held:
                    self.foreign.add(named)
                    out += FOREIGN + named + b"\0"
        for named, caller in list(self.calls.items()):
            if ended or caller == pid:
                self.state[named] = (_LET_GO, 0)  # that process made another call: its path call is done
                del self.calls[named]
        return out

    def _overflowed(self) -> None:
        """The queue overflowed: events since the last read that lost nothing are gone. A path
        changed since then (its status-change time, less a clock tick), one held open for writing (a
        save's close may have merged with the command's) cannot be told: blind (asked about if it
        exists at the end). The opens counted (per inode, per created file) start again from nothing,
        and a file whose count that was is blind once the command opens it for writing again. The watches stay: the other paths are followed on, so a command that floods the queue
        does not make every file it changed uncertain."""
        since = self.clean_read_ns - _TICK_NS
        for named, (state, _pid) in self.state.items():
            try:
                changed = os.stat(named).st_ctime_ns >= since
            except OSError:
                changed = True
            if changed or state != _LET_GO:
                self.blind.add(named)
        self.tainted.update(self.files.values())
        self.tainted_paths.update(self.created)
        self.created = dict.fromkeys(self.created, 0)
        self.own.clear()
        self.opens.clear()
        self.alone.clear()

    def _lose(self, wd: int) -> None:
        for folder in self.dirs.pop(wd, ()):
            self.wd_of.pop(folder, None)
            self.blind.update(p for p in self.state if os.path.dirname(p) == folder)
        self.open_dirs.pop(wd, None)

    def _lose_all(self) -> None:
        for wd in list(self.dirs):
            self._lose(wd)


def _lease(path: bytes, inode: tuple[int, int], kinds: tuple[int, ...]) -> tuple[bool, list[bool] | None]:
    """Try a lease of each kind in turn on a read-only descriptor of ``path`` (the inode ``inode``):
    whether the file was opened for it, and whether each could be taken (and was given back at once),
    or ``None`` when it cannot be said.
    A write lease is refused while any other descriptor of the file is open, a read lease while
    one is open for writing — in any process, inside the sandbox or out. Another process opening
    the file in that instant breaks the lease: its signal is ``SIGURG``, ignored unless handled."""
    try:  # the very inode looked at, and a regular file, before it is opened (a device's open can act)
        ref = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False, None
    try:
        st = os.fstat(ref)
        if (st.st_dev, st.st_ino) != inode or not stat.S_ISREG(st.st_mode):
            return False, None
        fd = os.open(f"/proc/self/fd/{ref}", os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return False, None
    finally:
        os.close(ref)
    try:
        fcntl.fcntl(fd, fcntl.F_SETSIG, signal.SIGURG)
        taken = []
        for kind in kinds:
            try:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, kind)
            except OSError as exc:
                if exc.errno != errno.EAGAIN:
                    return True, None
                taken.append(False)
            else:
                fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)
                taken.append(True)
        return True, taken
    except OSError:
        return True, None
    finally:
        os.close(fd)


def _nobody_else_has_it_open(path: bytes, inode: tuple[int, int]) -> tuple[bool, bool]:
    """Whether the file was opened to ask, and whether no other descriptor of it is open (a write
    lease could be taken)."""
    opened, taken = _lease(path, inode, (fcntl.F_WRLCK,))
    return opened, taken == [True]


def _only_read_now(path: bytes, inode: tuple[int, int]) -> bool:
    """Whether somebody has the file open and nobody for writing (a read lease could be taken, a
    write lease not): a reader holds it (``tail -f``, an editor)."""
    return _lease(path, inode, (fcntl.F_RDLCK, fcntl.F_WRLCK))[1] == [True, False]

def _held_for_writing(paths: set[bytes]) -> set[bytes]:
    """Which of ``paths`` a process of this PID namespace (but this one) holds open for writing: a
    descriptor opened for writing, or a shared writable mapping."""
    wanted = {os.fsencode(os.path.realpath(p)): p for p in paths}
    held: set[bytes] = set()
    me = str(os.getpid())
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or pid == me:
            continue
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.fsencode(os.readlink(f"/proc/{pid}/fd/{fd}"))
                if target not in wanted:
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as fh:
                    flags = next((int(line.split()[1], 8) for line in fh if line.startswith(b"flags:")), 0)
            except (OSError, ValueError):
                continue
            if flags & 0o3:
                held.add(wanted[target])
        try:
            with open(f"/proc/{pid}/maps", "rb") as fh:
                for line in fh:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[1][1:2] == b"w" and parts[1][3:4] == b"s":
                        target = parts[5].rstrip(b"\n")
                        if target in wanted:
                            held.add(wanted[target])
        except OSError:
            continue
    return held
