"""Opening files for the file tools without following a link twice (issue 11 §1 a, c, f).

Role: the low-level half of the file tools' access rules. A path is resolved *once*
(``os.path.realpath``); everything after that opens the resolved path with **no** further
link-following — ``openat2(RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS [| RESOLVE_BENEATH])``
through ``ctypes`` where the kernel has it (Linux ≥ 5.6), else component by component with
``O_NOFOLLOW``. So a symlink swapped into the path after the decision makes the open fail
(``ELOOP``) instead of landing somewhere else. Writes go beneath a directory fd: the temporary
file is created and renamed *inside* that fd (``renameat``), which replaces a name, never writes
through it.

Must never: follow a symlink after ``resolve_once``; open a non-regular file for reading.

Also here, because they hold for every caller: ``proc_refusal`` (the server's own ``/proc/<pid>``,
its ancestors', and any process's ``environ``/``mem``/``fd``/``maps``/``cmdline``…) and
``open_regular`` (read only *regular* files: a FIFO, device, socket or the server's own stdin is
refused before it is opened, and the open itself is non-blocking with an ``fstat`` check).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
from pathlib import Path

RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every Linux architecture (new syscalls are unified)
_AT_FDCWD = -100
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC

#: Entries of ``/proc/<pid>`` (and ``/proc/<pid>/task/<tid>``) that expose a process's secrets or
#: its open files — refused for every process.
PROC_SECRET_ENTRIES = frozenset({
    "environ", "mem", "fd", "fdinfo", "maps", "smaps", "smaps_rollup", "numa_maps", "pagemap", "cmdline",
    "auxv", "map_files", "syscall", "stack", "cwd", "root", "exe",
})


class PathRefused(PermissionError):
    """The file tools refuse this path by rule (not by file permissions); ``reason`` is a sentence
    for the model."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(errno.EACCES, reason, str(path))
        self.reason = reason


class NotRegularFileError(OSError):
    """The path is a FIFO, device, socket … — the file tools read regular files only."""

    def __init__(self, path: Path | str, kind: str) -> None:
        super().__init__(errno.EINVAL, f"not a regular file ({kind})", str(path))
        self.kind = kind


class PathChangedError(OSError):
    """A link appeared in the path after it was resolved (``ELOOP``/``ENOTDIR`` on a no-follow
    open), or the path now leads elsewhere than where policy's decision saw it lead (``detail``
    says where): someone is changing it right now; nothing was opened or written."""

    def __init__(self, path: Path | str, detail: str = "") -> None:
        super().__init__(errno.ELOOP, detail or "the path changed while it was being opened (a link appeared in it)",
                         str(path))
        self.detail = detail


def file_kind(mode: int) -> str:
    """A readable name of a file type: ``FIFO``, ``character device`` …"""
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


# -- openat2 ---------------------------------------------------------------------------------------


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        return libc
    except (OSError, AttributeError):
        return None


def _openat2_raw(dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    libc = _libc()
    if libc is None:
        raise OSError(errno.ENOSYS, "no libc")
    how = _OpenHow(flags, mode, resolve)
    fd = libc.syscall(ctypes.c_long(_SYS_OPENAT2), ctypes.c_int(dirfd), ctypes.c_char_p(os.fsencode(path)),
                      ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), path)
    return int(fd)


@functools.lru_cache(maxsize=1)
def has_openat2() -> bool:
    """Whether this kernel has ``openat2`` (Linux ≥ 5.6) and the C library lets us call it."""
    if not os.uname().sysname == "Linux":
        return False
    try:
        os.close(_openat2_raw(_AT_FDCWD, "/", os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_NO_SYMLINKS))
        return True
    except OSError:
        return False


def _open_nofollow(dirfd: int, rel: str, flags: int, mode: int = 0, *, beneath: bool) -> int:
    """Open ``rel`` (no ``..``, no empty parts) relative to ``dirfd`` following no link at any
    component. Raises ``PathChangedError`` when a component is a link (or not a folder)."""
    if has_openat2():
        resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (RESOLVE_BENEATH if beneath else 0)
        try:
            return _openat2_raw(dirfd, rel, flags, mode, resolve)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EXDEV):
                raise PathChangedError(rel) from None
            if exc.errno not in (errno.ENOSYS, errno.EPERM, errno.E2BIG):  # a seccomp filter may refuse it
                raise
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise PathRefused(rel, "the path has `.`/`..` parts after resolution")
    current = os.open("/" if rel.startswith("/") else ".", _DIR_FLAGS) if dirfd == _AT_FDCWD else os.dup(dirfd)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=current)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise PathChangedError(rel) from None
                raise
            os.close(current)
            current = nxt
        if not parts:
            return os.dup(current)
        try:
            return os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=current)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathChangedError(rel) from None
            raise
    finally:
        os.close(current)


# -- reading ----------------------------------------------------------------------------------------


def resolve_once(path: Path | str) -> str:
    """``path`` with every symlink of every existing component followed, once. Raises
    ``PathRefused`` for a NUL byte, ``PathChangedError`` when the path keeps changing under the
    resolution (a component flipping between a link and a file makes ``readlink`` fail)."""
    text = os.fspath(path)
    if "\x00" in text:
        raise PathRefused(text, "invalid path: it contains a NUL byte")
    for _ in range(8):
        try:
            return os.path.realpath(text)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOENT, errno.ENOTDIR):
                raise
    raise PathChangedError(text)


def _process_ancestors() -> set[int]:
    """This process's pid and every ancestor's (read from ``/proc/<pid>/stat``)."""
    found: set[int] = set()
    pid = os.getpid()
    while pid > 0 and pid not in found and len(found) < 256:
        found.add(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                data = fh.read()
            pid = int(data[data.rindex(b")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def _thread_group(pid: int) -> int:
    """The process (thread group) a ``/proc/<n>`` number belongs to — a thread id has its own
    ``/proc/<tid>`` entry even though ``/proc`` does not list it."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Tgid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return pid


def proc_refusal(resolved: str) -> str | None:
    """Why the tools refuse ``resolved`` (a ``resolve_once`` result) under ``/proc``, or ``None``.

    Refused: anything under the server's own ``/proc/<pid>`` or an ancestor's (thread ids
    included), and for every process the entries in ``PROC_SECRET_ENTRIES`` (environment, memory,
    open files, command line …). ``/proc/self`` is already resolved to the pid by ``realpath``.
    """
    if resolved != "/proc" and not resolved.startswith("/proc/"):
        return None
    parts = resolved.split("/")[2:]
    if not parts or not parts[0]:
        return None
    head = parts[0]
    if head in ("self", "thread-self"):  # not resolved (e.g. no procfs here): refuse outright
        return "it is the server's own process folder"
    if not head.isdigit():
        return None
    if _thread_group(int(head)) in _process_ancestors():
        return "it is the agent server's own process folder (or one of its parent processes')"
    if any(p in PROC_SECRET_ENTRIES for p in parts[1:]):
        return "it exposes a process's environment, memory, open files or command line"
    return None


def open_regular(resolved: str) -> int:
    """A read-only fd of the regular file at ``resolved`` (already resolved, absolute), opened
    without following any link, non-blocking, and checked with ``fstat``.

    Raises ``IsADirectoryError`` for a folder, ``NotRegularFileError`` for a FIFO, device or
    socket (checked with ``lstat`` *before* opening, so opening has no side effect), ``PathRefused``
    for ``/proc`` entries (``proc_refusal``), ``PathChangedError`` when a link appeared in the path,
    and the usual ``OSError``s (``FileNotFoundError`` …)."""
    reason = proc_refusal(resolved)
    if reason:
        raise PathRefused(resolved, reason)
    st = os.lstat(resolved)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", resolved)
    if not stat.S_ISREG(st.st_mode):
        if stat.S_ISLNK(st.st_mode):
            raise PathChangedError(resolved)
        raise NotRegularFileError(resolved, file_kind(st.st_mode))
    fd = _open_nofollow(_AT_FDCWD, resolved, _READ_FLAGS, beneath=False)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(resolved, file_kind(st.st_mode))
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def fd_path(fd: int) -> str | None:
    """The path the open file description ``fd`` has now, as the kernel names it
    (``/proc/self/fd/N``; macOS ``F_GETPATH``), or ``None`` when it cannot be told (no procfs, a
    deleted file, a pipe)."""
    try:
        real = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        real = None
        import fcntl

        getpath = getattr(fcntl, "F_GETPATH", None)
        if getpath is not None:
            try:
                real = os.fsdecode(fcntl.fcntl(fd, getpath, bytes(1024)).rstrip(b"\0"))
            except OSError:
                return None
    if not real or not real.startswith("/") or real.endswith(" (deleted)"):
        return None
    return real


# -- writing ----------------------------------------------------------------------------------------


def open_dir_beneath(anchor: str, rel_parts: list[str], *, create: bool) -> int:
    """A directory fd (``O_RDONLY``) of ``anchor/rel_parts…``, reached beneath ``anchor`` without
    following links; missing folders are made when ``create``. ``anchor`` itself is opened as
    written (it is a resolved root)."""
    root = os.open(anchor, _DIR_FLAGS)
    try:
        if not rel_parts:
            return os.dup(root)
        try:
            return _open_nofollow(root, "/".join(rel_parts), _DIR_FLAGS, beneath=True)
        except FileNotFoundError:
            if not create:
                raise
        current = os.dup(root)
        try:
            for part in rel_parts:
                try:
                    nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=current)
                except FileNotFoundError:
                    try:
                        os.mkdir(part, 0o777, dir_fd=current)
                    except FileExistsError:
                        pass
                    try:
                        nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=current)
                    except OSError as exc:
                        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                            raise PathChangedError("/".join(rel_parts)) from None
                        raise
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise PathChangedError("/".join(rel_parts)) from None
                    raise
                os.close(current)
                current = nxt
            result, current = current, -1
            return result
        finally:
            if current >= 0:
                os.close(current)
    finally:
        os.close(root)


def read_entry(dirfd: int, name: str, limit: int) -> tuple[bytes, os.stat_result] | None:
    """The bytes (at most ``limit + 1``) and ``fstat`` of the regular file ``name`` in ``dirfd``,
    opened without following a link; ``None`` when there is no such entry. Raises
    ``PathChangedError`` when ``name`` is a link, ``IsADirectoryError``, ``NotRegularFileError``."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise PathChangedError(name)
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", name)
    if not stat.S_ISREG(st.st_mode):
        raise NotRegularFileError(name, file_kind(st.st_mode))
    try:
        fd = os.open(name, _READ_FLAGS | os.O_NOFOLLOW, dir_fd=dirfd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathChangedError(name) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFileError(name, file_kind(st.st_mode))
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit and (chunk := os.read(fd, min(1 << 20, limit + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def replace_entry(dirfd: int, name: str, raw: bytes, mode: int) -> None:
    """Atomically make ``name`` in ``dirfd`` a new regular file holding ``raw`` with permission
    bits ``mode``: a temporary file created in ``dirfd`` (``O_EXCL | O_NOFOLLOW``), written,
    ``fsync``ed, then ``renameat`` over ``name`` — which replaces the *entry* (a link there is
    replaced, not followed). Raises ``OSError``; the temporary file never stays behind."""
    tmp = None
    for attempt in range(100):
        candidate = f".{name[:200]}.{os.getpid()}.{os.urandom(4).hex()}.tmp"
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=dirfd)
        except FileExistsError:
            continue
        tmp = candidate
        break
    if tmp is None:
        raise FileExistsError(errno.EEXIST, "no free temporary name", name)
    try:
        try:
            view = memoryview(raw)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
        tmp = None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp, dir_fd=dirfd)
            except OSError:
                pass
    try:
        os.fsync(dirfd)
    except OSError:
        pass
