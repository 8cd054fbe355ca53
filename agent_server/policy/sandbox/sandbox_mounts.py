"""Namespaces and mounts of the confined shell (stdlib only; loaded by ``sandbox_exec``).

Role: ``enter_namespaces(net)`` puts the calling process into new mount and PID namespaces (and a
new network namespace when ``net``; a user namespace first when not root) — the *next* child it
forks is PID 1 of the new PID namespace. ``prepare_mounts(spec)``, called in that child, makes the
mounts private, mounts a fresh ``/proc`` (only the namespace's own processes are visible), hides
every path in ``spec["masks"]`` (a folder behind an empty mode-000 folder or a private tmpfs, a file
behind an empty mode-000 file; read-only, so reading gives "Permission denied" and writing
"Read-only file system"), keeps each path of ``spec["keep"]`` (read-write) and ``spec["keep_ro"]``
(read-only) that lies under a masked folder visible at its place, and bind-mounts each
``spec["ro_binds"]`` path read-only onto itself (``.git``).

Must never: leave a mask half-applied silently — a mask whose target is missing is skipped, any
other failure raises ``MountError`` (the command is then not run).
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
_SAFE = MS_NOSUID | MS_NODEV | MS_NOEXEC
_STORE = "/proc"  # the private tmpfs holding the empty file and folder, covered by the fresh /proc


class MountError(Exception):
    """A namespace or mount step failed; the command must not run."""


_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str, missing_ok: bool = False) -> bool:
    if result < 0:
        err = ctypes.get_errno()
        if missing_ok and err in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise MountError(f"{what}: {os.strerror(err)} (errno {err})")
    return True


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None,
           missing_ok: bool = False) -> bool:
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    return _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)),
                  f"mount {target}", missing_ok)


def _write(path: str, text: str) -> None:
    with open(path, "w") as handle:
        handle.write(text)


def enter_namespaces(net: bool) -> None:
    """Unshare mount + PID (+ network) namespaces; as non-root inside a new user namespace that
    maps our own uid/gid. Raises ``MountError``."""
    flags = CLONE_NEWNS | CLONE_NEWPID | (CLONE_NEWNET if net else 0)
    uid, gid = os.geteuid(), os.getegid()
    if uid == 0:
        _check(_libc.unshare(flags), "unshare(mount, PID" + (", network" if net else "") + " namespaces)")
        return
    _check(_libc.unshare(CLONE_NEWUSER | flags), "unshare(user namespace)")
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        raise MountError(f"cannot map the user namespace: {exc.strerror}") from None


def _locked_flags(path: str) -> int:
    """Mount flags of ``path``'s mount that a read-only remount must keep (nosuid, nodev …)."""
    f = os.statvfs(path).f_flag
    flags = 0
    for st, ms in ((os.ST_NOSUID, 2), (os.ST_NODEV, 4), (os.ST_NOEXEC, 8), (os.ST_NOATIME, 1024),
                   (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21)):
        if f & st:
            flags |= ms
    return flags


def _bind_ro(source: str, target: str, missing_ok: bool = False) -> bool:
    if not _mount(source, target, None, MS_BIND | MS_REC, missing_ok=missing_ok):
        return False
    keep = _locked_flags(target)
    _mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | keep, missing_ok=missing_ok)
    return True


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def prepare_mounts(spec: dict) -> None:
    """Apply the mount part of ``spec`` in the new namespaces (see the module docstring)."""
    _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make mounts private")
    masks = sorted({os.path.normpath(p) for p in spec.get("masks", [])}, key=lambda p: (p.count("/"), p))
    keep_rw = [os.path.normpath(p) for p in spec.get("keep", [])]
    keep_ro = [os.path.normpath(p) for p in spec.get("keep_ro", [])]
    kept = set(keep_rw) | set(keep_ro)
    masks = [m for m in masks if m not in kept]  # a root is never hidden, even if it looks secret
    # Open what must stay visible before anything is mounted over it.
    keep_fds: dict[str, tuple[int, bool]] = {}
    for path in keep_rw + keep_ro:
        if any(_under(path, m) for m in masks) and path not in keep_fds:
            try:
                keep_fds[path] = (os.open(path, os.O_PATH | os.O_CLOEXEC), path in keep_ro and path not in keep_rw)
            except OSError:
                continue  # not there: nothing to keep
    # The store: a tmpfs at /proc with an empty file and folder (mode 000), then the fresh /proc
    # mounted over it (the store stays reachable through the open fds).
    _mount("tmpfs", _STORE, "tmpfs", _SAFE, "size=16k,nr_inodes=16,mode=0711")
    empty_file = os.path.join(_STORE, "empty")
    empty_dir = os.path.join(_STORE, "emptydir")
    os.close(os.open(empty_file, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0))
    os.mkdir(empty_dir, 0)
    os.chmod(empty_file, 0)
    os.chmod(empty_dir, 0)
    file_fd = os.open(empty_file, os.O_PATH | os.O_CLOEXEC)
    dir_fd = os.open(empty_dir, os.O_PATH | os.O_CLOEXEC)
    _mount("proc", "/proc", "proc", _SAFE)
    try:
        for mask in masks:
            _mask(mask, file_fd, dir_fd, keep_fds)
        for path in spec.get("ro_binds", []):
            _bind_ro(path, path)
    finally:
        for fd in (file_fd, dir_fd, *(fd for fd, _ in keep_fds.values())):
            os.close(fd)


def _mask(mask: str, file_fd: int, dir_fd: int, keep_fds: dict[str, tuple[int, bool]]) -> None:
    try:
        st = os.stat(mask)
    except OSError:
        return  # missing (or already hidden by a mask above it): nothing to hide
    if not stat.S_ISDIR(st.st_mode):
        _bind_ro(f"/proc/self/fd/{file_fd}", mask, missing_ok=True)
        return
    inner = sorted(k for k in keep_fds if _under(k, mask))
    if not inner:
        _bind_ro(f"/proc/self/fd/{dir_fd}", mask, missing_ok=True)
        return
    # A private tmpfs with only the paths to keep, each bind-mounted back at its place.
    _mount("tmpfs", mask, "tmpfs", _SAFE, "size=16k,mode=0711")
    for keep in inner:
        rel = os.path.relpath(keep, mask)
        parts = rel.split("/")
        here = mask
        for part in parts[:-1]:
            here = os.path.join(here, part)
            if not os.path.isdir(here):
                os.mkdir(here, 0o711)
        fd, read_only = keep_fds[keep]
        target = os.path.join(mask, rel)
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            os.makedirs(target, 0o711, exist_ok=True)
        else:
            os.close(os.open(target, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        if read_only:
            _bind_ro(f"/proc/self/fd/{fd}", target)
        else:
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
    _mount(None, mask, None, MS_REMOUNT | MS_RDONLY | _SAFE)
