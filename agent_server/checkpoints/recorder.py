"""Recording what the agent changes: one ``checkpoint/file`` event per file, bytes in the blob store.

Role: ``Checkpoints`` belongs to one session. ``files(inner)`` wraps the session's workspace-file
seam so every write that lands — ``edit``, ``write``, a proposal the editor applied, a plain-ACP
write — records the file's bytes and mode before and after. ``shell(tool)`` wraps the ``bash`` tool so
that the working tree is snapshotted (``ShadowRepo``: a git workspace, or a plain folder within the
budget) right before and right after each call and every file the call changed is recorded — as
the agent's when the sandbox's record of the call's own writes names it (``sandbox_notify``), not
the call's at all when a complete record does not name it (another process wrote it: the user's save),
``uncertain`` without a record or when the record shows another process changed it during the call
(before the command wrote it, after the command let go of it, or since the command ended); a file that
existed before the call (birth time) is never its creation.
Edits the user makes between calls are never attributed to the agent.

Must never: fail a tool because a checkpoint could not be kept (the call's own result stands; the
failure is logged as ``checkpoint/failed``), or keep a secret file's bytes.
"""

from __future__ import annotations

import asyncio
import ctypes
import functools
import hashlib
import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from agent_server.checkpoints.blobs import LINK_MODE, BlobStore, FileState
from agent_server.policy.sandbox.sandbox_notify import (LEFT, SHELL_RECORD, read_foreign, read_record, read_stamps,
                                                        read_unlistened, read_unwatched)
from agent_server.tools import safe_fs
from agent_server.tools.files import CURRENT_TOOL_CALL, FileSnapshot, WriteOutcome, file_bytes

if TYPE_CHECKING:  # the shadow repository loads with the first shell call, in ``shadow()``
    from agent_server.checkpoints.shadow import ShadowRepo, Snapshot

log = logging.getLogger("agent_server.checkpoints")

#: Files larger than this are recorded by their size, mtime and hash, never copied.
DEFAULT_MAX_FILE_BYTES = 10 * 1024 * 1024
#: The shadow repositories are pruned after every this many snapshotted calls of a session.
PRUNE_EVERY = 25
#: A plain folder (no git) is snapshotted around shell calls only within this many files …
PLAIN_BUDGET_FILES = 20_000
#: … counted within this many seconds.
PLAIN_BUDGET_SECONDS = 2.0


def _mode(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return None


def _head(path: Path) -> bytes | None:
    """The file's first three bytes (whether it has a BOM), ``None`` when it cannot be read."""
    try:
        fd = safe_fs.open_regular(safe_fs.resolve_once(path))
    except (OSError, ValueError):
        return None
    try:
        return os.read(fd, 3)
    except OSError:
        return None
    finally:
        os.close(fd)


def current_turn(events: list[Any]) -> int:
    """The number of the newest ``turn/start`` of ``events`` (0 before the first turn)."""
    return next((int(e.data.get("turn") or 0) for e in reversed(events) if e.type == "turn/start"), 0)


class Checkpoints:
    """Checkpoints of one session: ``log`` (its ``EventLog``), ``blobs`` (the shared store),
    ``roots`` (workspace roots), ``state_dir`` (for shadow repositories), ``is_secret(path)`` (the
    pattern a secret path matches, else ``None``), ``max_file_bytes`` (the size limit)."""

    def __init__(self, log: Any, blobs: BlobStore, roots: list[Path], state_dir: Path,
                 is_secret: Callable[[Path], object], name_patterns: tuple[str, ...],
                 max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, emit: Any = None,
                 plain_budget_files: int = PLAIN_BUDGET_FILES, plain_budget_seconds: float = PLAIN_BUDGET_SECONDS) -> None:
        self.log = log
        self.max_file_bytes = max_file_bytes
        self.emit = emit
        self.plain_budget_files, self.plain_budget_seconds = plain_budget_files, plain_budget_seconds
        self.capture_off: str | None = None
        self.nested_said: set[str] = set()
        left = log.count("checkpoint/nested")  # the walk stops at the last one (none: no walk)
        for event in log.events if left else ():
            if event.type == "checkpoint/nested":
                self.nested_said.update(event.data.get("names") or [])
                left -= 1
                if not left:
                    break
        self.plain_checked = False
        self.index_path = Path(log.path).parent / "shadow-index"
        self.record_path = Path(log.path).parent / "shell-writes"
        self.shadow_memo: dict[str, Any] = {}
        self.calls = 0
        self.blobs = blobs
        self.roots = [Path(r) for r in roots]
        self.state_dir = Path(state_dir)
        self.is_secret = is_secret
        self.name_patterns = name_patterns

    # -- recording ------------------------------------------------------------------------------

    def record(self, path: Path, before: FileState | None, after: FileState | None, source: str,
               uncertain: bool = False, folders: int = 0) -> bool:
        """Append one ``checkpoint/file`` event (nothing when nothing changed: ``False``); ``uncertain``:
        nothing shows that the agent's own call wrote it; ``folders``: how many of a created file's
        enclosing folders (innermost up) the write created — ``/undo`` removes them when empty then."""
        if before == after:
            return False
        data = {"turn": current_turn(self.log.events), "call_id": CURRENT_TOOL_CALL.get(), "path": str(path),
                "before": before.to_json() if before else None, "after": after.to_json() if after else None,
                "source": source}
        if uncertain:
            data["uncertain"] = True
        if folders and before is None and after is not None:
            data["folders"] = folders
        if source == "edit":  # its states are the file's bytes, BOM included (a log before 0912347: an
            data["file_bytes"] = True  # editor's write kept the editor's text, without the file's BOM)
        lines = self._line_counts(before, after)
        if lines is not None:
            data["lines"] = lines
        self.log.append("checkpoint/file", data)
        return True

    def _line_counts(self, before: FileState | None, after: FileState | None) -> list[int] | None:
        """``[added, removed]`` lines from ``before`` to ``after`` (a multiset count of lines, as the
        VS Code panel counts a diff), for the Changes box of a call without a diff and of a loaded
        session; ``None`` when a side's bytes are not kept or over ``LINE_COUNT_BYTES``."""
        sides: list[bytes] = []
        for state in (before, after):
            if state is None:
                sides.append(b"")
                continue
            if not state.kept:
                return None
            try:
                raw = self.blobs.get(state.blob)
            except OSError:
                return None
            if len(raw) > LINE_COUNT_BYTES:
                return None
            sides.append(raw)
        left: dict[bytes, int] = {}
        for line in _lines(sides[0]):
            left[line] = left.get(line, 0) + 1
        added = 0
        for line in _lines(sides[1]):
            if left.get(line, 0) > 0:
                left[line] -= 1
            else:
                added += 1
        return [added, sum(left.values())]

    async def say_changed(self, paths: list[Path]) -> None:
        """Tell the client which files the running call changed, as recorded for ``/undo``: a
        ``tool_call_update`` of that call with ``_meta.agentServer.changedFiles`` (the VS Code panel's
        Changes box names the turn ``/undo`` takes back from it — a shell call's changes carry no diff)."""
        call_id = CURRENT_TOOL_CALL.get()
        if not paths or not call_id or self.emit is None:
            return
        firsts: list[Any] = []  # this call's checkpoint/file events: the newest of the log
        for event in reversed(self.log.events):
            if event.type != "checkpoint/file" or event.data.get("call_id") != call_id:
                break
            firsts.append(event)
        await self.emit({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                         "_meta": {"agentServer": changed_files_meta(reversed(firsts), [str(p) for p in paths])}})

    def missing_folders(self, path: Path, absent: Callable[[Path], bool] = lambda p: not p.exists()) -> int:
        """How many enclosing folders of ``path``, innermost up and beneath its workspace root, are
        ``absent`` (before a write: missing; after a shell call: born during it)."""
        folder, count = Path(path).parent, 0
        while any(folder != root and folder.is_relative_to(root) for root in self.roots) and absent(folder):
            count += 1
            folder = folder.parent
        return count

    def _failed(self, what: str, exc: BaseException) -> None:
        log.warning("checkpoint not kept (%s): %s", what, exc)
        try:
            self.log.append("checkpoint/failed", {"turn": current_turn(self.log.events), "what": what,
                                                  "error": str(exc)[:300]})
        except Exception:  # noqa: BLE001 - the log reports its own failures
            pass

    def files(self, inner: Any) -> "CheckpointedFiles":
        """The session's file seam, recording every write that lands."""
        return CheckpointedFiles(inner, self)

    # -- shell ------------------------------------------------------------------------------------

    def shadow(self) -> ShadowRepo | None:
        """The shadow repository of the first root (a git workspace, or a plain folder within the
        budget), with this session's own index; ``None`` when capture is off for the session."""
        from agent_server.checkpoints.shadow import ShadowRepo

        if self.capture_off is not None:
            return None
        root = self.roots[0]
        if not self.plain_checked and not ShadowRepo.is_git_workspace(root):
            reason = _over_budget(root, self.plain_budget_files, self.plain_budget_seconds)
            if reason is not None:
                self.capture_off = reason
                return None
        self.plain_checked = True  # counted once a session: git's own walk follows what changed
        key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
        return ShadowRepo(self.state_dir / "shadow" / f"{key}.git", root, index=self.index_path,
                          is_secret=self.is_secret, name_patterns=self.name_patterns,
                          max_file_bytes=self.max_file_bytes, memo=self.shadow_memo)

    def shell(self, tool: Any) -> Any:
        """``tool`` (the ``bash`` tool) with a snapshot of the working tree before and after each call
        (an instance of ``_snapshotting(type(tool))``, one class for every session: a class made per
        session was kept for ever by the tools' class-keyed schema cache, and this session with it)."""
        wrapped = _snapshotting(type(tool)).__new__(_snapshotting(type(tool)))
        wrapped.__dict__.update(tool.__dict__)
        wrapped._checkpoints = self
        return wrapped

    async def _say_capture_off(self) -> None:
        """Tell the user at once, in the turn, that shell changes are not captured (once a session)."""
        if self.capture_off is None or any(e.type == "checkpoint/off" for e in self.log.events):
            return
        text = capture_off_text(self.capture_off)
        try:
            self.log.append("checkpoint/off", {"turn": current_turn(self.log.events), "reason": self.capture_off})
        except Exception:  # noqa: BLE001 - the log reports its own failures
            return
        if self.emit is not None:
            await self.emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
                             "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})

    async def _say_unwatched(self, reason: str, detail: str = "") -> None:
        """Tell the user at once, in the turn, once a session, that the sandbox could not watch for
        other writers (``reason``: ``EMFILE``, ``ENOSPC``, ``OVERFLOW``) or record the command's own
        writes at all (``UNLISTENED``, ``detail`` the error), so /undo asks about every file a shell
        command changes: logged ``checkpoint/unwatched``, replayed on load."""
        if any(e.type == "checkpoint/unwatched" for e in self.log.events):
            return
        data = {"turn": current_turn(self.log.events), "reason": reason, **({"detail": detail} if detail else {})}
        try:
            self.log.append("checkpoint/unwatched", data)
        except Exception:  # noqa: BLE001 - the log reports its own failures
            return
        if self.emit is not None:
            await self.emit({"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": unwatched_text(reason, detail)},
                             "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})

    async def _snapshot(self, repo: ShadowRepo | None) -> Snapshot | None:
        if repo is None:
            return None
        from agent_server.checkpoints.shadow import ShadowError  # loaded: repo is a ShadowRepo

        try:
            return await asyncio.to_thread(repo.snapshot)
        except (ShadowError, OSError) as exc:
            self._failed("snapshot before a shell call", exc)
            return None

    async def _after_shell(self, repo: ShadowRepo, before: Snapshot, started_ns: int) -> None:
        from agent_server.checkpoints.shadow import ShadowError

        try:
            after = await asyncio.to_thread(repo.snapshot)
            changes = await asyncio.to_thread(repo.changes, before, after, self.blobs)
        except (ShadowError, OSError) as exc:
            self._failed("snapshot after a shell call", exc)
            return
        written = read_record(str(self.record_path))  # the call's own writes, or None: no evidence
        stamps = _Stamps(str(self.record_path)) if written is not None else _Stamps(None)
        recorded: list[Path] = []
        for change in changes:
            if change.before is None and _existed_before(change.path, started_ns):
                continue  # not the call's creation: it was there, only hidden (ignored) before
            if _someone_elses(change.path, written):
                continue  # the call's complete record does not name it: another process wrote it
            folders = (self.missing_folders(Path(change.path), lambda p: not _existed_before(p, started_ns))
                       if change.before is None and change.after is not None else 0)
            if self.record(change.path, change.before, change.after, "shell",
                           uncertain=not _named(change.path, written) or _written_meanwhile(change.path, stamps, started_ns),
                           folders=folders):
                recorded.append(Path(change.path))
        for name in sorted(set(before.big) | set(after.big)):
            old, new = before.big.get(name), after.big.get(name)
            if old == new:
                continue
            path = repo.root / name
            if old is None and _existed_before(path, started_ns) or _someone_elses(path, written):
                continue
            if self.record(path, _big_state(old), _big_state(new), "shell",
                           uncertain=not _named(path, written) or _written_meanwhile(path, stamps, started_ns)):
                recorded.append(path)
        await self.say_changed(recorded)
        if recorded:  # a blind watch, or no record at all although the command ran confined: said once
            if written is not None:
                unwatched = read_unwatched(str(self.record_path))
                if unwatched is not None:
                    await self._say_unwatched(unwatched)
            else:
                unlistened = read_unlistened(str(self.record_path))
                if unlistened is not None:
                    await self._say_unwatched("UNLISTENED", unlistened)
        self.calls += 1
        if self.calls % PRUNE_EVERY == 0:
            await asyncio.to_thread(prune_shadows, self.state_dir)
        nested = list(dict.fromkeys([*before.nested, *after.nested]))  # walked only in part by a snapshot
        for name in nested:
            self._failed(f"files inside the nested repository {name}", RuntimeError(
                "too many files to capture at once: this call's changes inside it may not be undone"))
        await self._say_nested(nested)

    async def _say_nested(self, names: list[str]) -> None:
        """Tell the user at once, in the turn, which nested repositories are not captured (once each
        a session): /undo would otherwise leave their changes without a word."""
        new = [n for n in names if n not in self.nested_said]
        if not new:
            return
        self.nested_said.update(new)
        try:
            self.log.append("checkpoint/nested", {"turn": current_turn(self.log.events), "names": new})
        except Exception:  # noqa: BLE001 - the log reports its own failures
            return
        if self.emit is not None:
            await self.emit({"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": nested_off_text(new)}, "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})


#: Files larger than this (either side) get no line count in their ``checkpoint/file`` event.
LINE_COUNT_BYTES = 256 * 1024


def _lines(raw: bytes) -> list[bytes]:
    """The lines of ``raw``, each with its newline (a last line without one as it is): an empty file has
    none — a created file's "before" is not one empty line removed."""
    return _LINE.findall(raw)


_LINE = re.compile(rb"[^\n]*\n|[^\n]+$")


def changed_files_meta(events: Any, paths: list[str]) -> dict[str, Any]:
    """``_meta.agentServer`` of a call that changed ``paths`` (absolute), from its ``checkpoint/file``
    ``events`` in log order: ``changedFiles`` (each path once), ``created`` / ``deleted`` — the
    files it made or removed (absent when none), so a client can say which —, and ``lineCounts``
    (``{path: [added, removed]}``, for the files whose every event counted its lines), and ``modes``
    (``{path: [before, after]}``, octal text, for the files whose permission bits changed)."""
    first: dict[str, Any] = {}
    last: dict[str, Any] = {}
    counts: dict[str, list[int] | None] = {}
    for event in events:
        path = str(event.data.get("path"))
        first.setdefault(path, event.data)
        last[path] = event.data
        lines = event.data.get("lines")
        seen = counts.get(path, [0, 0])
        counts[path] = ([seen[0] + int(lines[0]), seen[1] + int(lines[1])]
                        if seen is not None and isinstance(lines, list) and len(lines) == 2 else None)
    ordered = list(dict.fromkeys(paths))
    meta: dict[str, Any] = {"changedFiles": ordered}
    created = [p for p in ordered if p in first and first[p].get("before") is None and last[p].get("after") is not None]
    deleted = [p for p in ordered if p in last and last[p].get("after") is None and first[p].get("before") is not None]
    if created:
        meta["created"] = created
    if deleted:
        meta["deleted"] = deleted
    line_counts = {p: counts[p] for p in ordered if counts.get(p) is not None}
    if line_counts:
        meta["lineCounts"] = line_counts
    modes = {}
    for p in ordered:
        old, new = (first.get(p) or {}).get("before"), (last.get(p) or {}).get("after")
        if old and new and old.get("mode") != new.get("mode") and LINK_MODE not in (old.get("mode"), new.get("mode")):
            modes[p] = [f"{int(old['mode']):o}", f"{int(new['mode']):o}"]
    if modes:  # a change of the permission bits (a mode-only change has no line counted)
        meta["modes"] = modes
    return meta


def prune_shadows(state_dir: Path) -> None:
    """Prune every shadow repository of the state folder down to what the live sessions' indexes
    need (after ``session/delete``, and now and then after a call). Never raises."""
    from agent_server.checkpoints.shadow import ShadowError, ShadowRepo

    indexes = sorted(Path(state_dir).glob("sessions/*/shadow-index"))
    for git_dir in sorted(Path(state_dir).glob("shadow/*.git")):
        try:
            ShadowRepo(git_dir, Path(state_dir)).prune(indexes)
        except (ShadowError, OSError) as exc:
            log.warning("shadow repository %s not pruned: %s", git_dir, exc)


def storage_text(state_dir: Path) -> str:
    """The size of the checkpoints' storage, for ``/checkpoints``."""
    from agent_server.checkpoints.shadow import ShadowError, ShadowRepo

    shadow = 0
    for git_dir in Path(state_dir).glob("shadow/*.git"):
        try:
            shadow += ShadowRepo(git_dir, Path(state_dir)).size_bytes()
        except (ShadowError, OSError):
            pass
    blobs = 0
    for path in (Path(state_dir) / "blobs").rglob("*"):
        try:
            blobs += path.stat().st_size if path.is_file() else 0
        except OSError:
            pass
    return (f"Checkpoint storage (shared by the sessions of this state folder): shadow repositories "
            f"{shadow / 1048576:.1f} MiB, stored file versions {blobs / 1048576:.1f} MiB.")


def _someone_elses(path: Path, written: set[str] | None) -> bool:
    """Whether a complete write record (not ``None``) proves the call never wrote ``path``: its
    change is then another process's (the user's save, their editor's) and never the call's."""
    return written is not None and not _named(path, written)


class _Stamps:
    """What the record says of other writers: the ``CHANGED`` stamps (before the command's first
    write), the ``FOREIGN`` paths (changed after the command let go of them) and the ``LEFT`` stamps
    (each path's status-change time when the command ended)."""

    def __init__(self, record: str | None) -> None:
        self.first = read_stamps(record) if record else {}
        self.foreign = read_foreign(record) if record else set()
        self.left = read_stamps(record, LEFT) if record else {}


def _written_meanwhile(path: Path, stamps: _Stamps, started_ns: int) -> bool:
    """Whether someone else changed ``path`` during the call too: before the command first asked to
    change it (its status-change time then is later than the start), after the command let go of it
    (the watch saw it), or after the command ended (its status-change time is not the one it left).
    The user's save during the command — the command's own write does not make the file its alone."""
    spellings = (os.path.normpath(path), os.path.realpath(path))
    if any(spelled in stamps.foreign for spelled in spellings):
        return True
    left = next((stamps.left[s] for s in spellings if s in stamps.left), None)
    if left is not None:
        try:
            if os.stat(path).st_ctime_ns != left:
                return True
        except OSError:
            return True
    for spelled in spellings:
        if spelled in stamps.first:
            return stamps.first[spelled] > started_ns
    return False


def _named(path: Path, written: set[str] | None) -> bool:
    """Whether the call's write record names ``path`` (as written, or resolved)."""
    if not written:
        return False
    return os.path.normpath(path) in written or os.path.realpath(path) in written


def nested_off_text(names: list[str]) -> str:
    """What the user reads when nested repositories are too big to capture."""
    return (f"\n\n[agent-server] Changes inside the nested repositor{'ies' if len(names) > 1 else 'y'} "
            f"{', '.join(n.rstrip('/') for n in names)} may not be captured for /undo (too many files to "
            "snapshot at once); changes elsewhere are.\n\n")


def unwatched_text(reason: str, detail: str = "") -> str:
    """What the user reads when a shell command ran without a watch for other writers (``reason``),
    or without a record of its own writes (``UNLISTENED``: ``detail`` says why)."""
    if reason == "UNLISTENED":
        return ("\n\n[agent-server] agent-server cannot record which files a shell command writes itself (the "
                f"system refused the sandbox's seccomp listener: {detail or 'unknown'}; this happens inside another "
                "sandbox or container that uses one, or on a Linux kernel older than 5.0). So it cannot tell your "
                "own saves from the command's writes, and /undo will ask you about every file a shell command "
                "changes instead of taking it back on its own (nothing of yours is replaced without your "
                "answer).\n\n")
    why = {
        "ENOSPC": ("the system's limit of watched folders is reached (fs.inotify.max_user_watches); raise it, "
                   "e.g. `sudo sysctl fs.inotify.max_user_watches=524288`, or close some file watchers"),
        "OVERFLOW": ("a command changed files faster than the system could report them (the inotify event "
                     "queue overflowed)"),
    }.get(reason, ("no inotify instance is left for your user (Linux allows 128 by default, and editors, "
                   "file watchers and dev servers use them up); raise the limit, e.g. "
                   "`sudo sysctl fs.inotify.max_user_instances=512`, or close some of them"))
    return ("\n\n[agent-server] agent-server cannot watch your files for changes while shell commands run: "
            f"{why}. So it cannot tell your own saves from the command's writes, and /undo will ask you about "
            "every file a shell command changes instead of taking it back on its own (nothing of yours is "
            "replaced without your answer).\n\n")


def capture_off_text(reason: str) -> str:
    """What the user reads when shell changes are not captured for the session."""
    return (f"\n\n[agent-server] Changes made by shell commands in this folder are not captured for /undo "
            f"({reason}); edits made with the agent's file tools still are.\n\n")


def _over_budget(root: Path, files: int, seconds: float) -> str | None:
    """Why the plain folder ``root`` is too big to snapshot (more than ``files`` entries, or longer
    than ``seconds`` to count them), or ``None``."""
    deadline = time.monotonic() + seconds
    count = 0
    for _here, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        count += len(names)
        if count > files:
            return f"it is not a git repository and holds more than {files:,} files"
        if time.monotonic() > deadline:
            return f"it is not a git repository and counting its files took more than {seconds:g} s"
    return None


def _big_state(info: tuple[int, int, int, int] | None) -> FileState | None:
    if info is None:
        return None
    size, mtime_ns, inode, mode = info
    return FileState(f"size:{size}:mtime:{mtime_ns}:inode:{inode}", mode, kept=False)


class _Statx(ctypes.Structure):
    _fields_ = [("mask", ctypes.c_uint32), ("blksize", ctypes.c_uint32), ("attributes", ctypes.c_uint64),
                ("nlink", ctypes.c_uint32), ("uid", ctypes.c_uint32), ("gid", ctypes.c_uint32),
                ("mode", ctypes.c_uint16), ("spare0", ctypes.c_uint16), ("ino", ctypes.c_uint64),
                ("size", ctypes.c_uint64), ("blocks", ctypes.c_uint64), ("attributes_mask", ctypes.c_uint64),
                ("atime", ctypes.c_int64 * 2), ("btime_sec", ctypes.c_int64), ("btime_nsec", ctypes.c_uint32),
                ("btime_pad", ctypes.c_int32), ("rest", ctypes.c_uint64 * 24)]


_STATX_BTIME, _AT_SYMLINK_NOFOLLOW, _AT_FDCWD = 0x800, 0x100, -100


def _birth_ns(path: Path) -> int | None:
    """The birth time of ``path`` in ns (``statx``), or ``None`` where the system does not say."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.statx
    except (OSError, AttributeError):
        return None
    buf = _Statx()
    if fn(_AT_FDCWD, os.fsencode(path), _AT_SYMLINK_NOFOLLOW, _STATX_BTIME, ctypes.byref(buf)) != 0:
        return None
    if not buf.mask & _STATX_BTIME:
        return None
    return buf.btime_sec * 1_000_000_000 + buf.btime_nsec


def _existed_before(path: Path, started_ns: int) -> bool:
    """Whether ``path``, absent from the snapshot before a call, was nonetheless there before the
    call started (an ignored file that an edit of ``.gitignore`` made visible): its birth time is
    before the start. Where there is no birth time, it is taken as there before (never as the
    call's creation: a file the call may not have created is not removed by ``/undo``)."""
    born = _birth_ns(path)
    return born is None or born < started_ns


class CheckpointedFiles:
    """A ``WorkspaceFiles`` that records each write that landed; everything else is the inner seam's."""

    def __init__(self, inner: Any, checkpoints: Checkpoints) -> None:
        self.inner = inner
        self.checkpoints = checkpoints

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def read(self, path: Path) -> FileSnapshot:
        """The inner seam's read."""
        return await self.inner.read(path)

    async def write(self, path: Path, raw: bytes, *, base: FileSnapshot | None) -> WriteOutcome:
        """The inner seam's write; when it landed (``written``, ``partial``), the file's bytes and mode
        before (``base``) and after (what really landed) are kept and logged."""
        mode_before = _mode(path)
        folders = self.checkpoints.missing_folders(Path(path)) if base is None else 0
        outcome = await self.inner.write(path, raw, base=base)
        if outcome.status in ("written", "partial") and outcome.snapshot is not None:
            cp = self.checkpoints
            try:
                secret = cp.is_secret(Path(path)) is not None
                # the file's bytes, never an editor's text: that lacks the file's BOM (kept by the write)
                head = _head(Path(path)) if base is not None and base.editor_text or outcome.snapshot.editor_text else None
                before = (cp.blobs.keep(file_bytes(base, head), mode_before or 0o644, secret=secret,
                                        limit=cp.max_file_bytes) if base is not None else None)
                after = cp.blobs.keep(file_bytes(outcome.snapshot, head), _mode(path) or mode_before or 0o644,
                                      secret=secret, limit=cp.max_file_bytes)
                recorded = cp.record(Path(path), before, after, "edit", folders=folders)
            except OSError as exc:
                self.checkpoints._failed(f"write of {path}", exc)
            else:
                if recorded:
                    await cp.say_changed([Path(path)])
        return outcome


_BLOB_REF = re.compile(rb'"blob":"([0-9a-f]{64})"')


def collect_blobs(store: Any) -> int:
    """Remove the blobs no stored session's log references any more (after ``session/delete``);
    returns how many were removed. Blobs are shared between sessions of one state folder."""
    keep: set[str] = set()
    root = Path(store.root)
    if root.is_dir():
        for log_path in root.glob("*/events.jsonl"):
            try:
                keep.update(m.decode() for m in _BLOB_REF.findall(log_path.read_bytes()))
            except OSError:
                return 0  # cannot tell what is referenced: remove nothing
    return BlobStore(root.parent / "blobs").collect(keep)


@functools.cache
def _snapshotting(base: type) -> type:
    """The ``bash`` tool class ``base`` whose calls are snapshotted by the instance's
    ``_checkpoints`` (``Checkpoints.shell``), named as ``base``."""

    class SnapshottingShell(base):  # type: ignore[misc, valid-type]
        _checkpoints: Checkpoints

        async def execute(self, args: Any, ctx: Any) -> Any:
            checkpoints = self._checkpoints
            repo = checkpoints.shadow()
            if repo is None:
                await checkpoints._say_capture_off()
            started = time.time_ns()
            before = await checkpoints._snapshot(repo)
            record = checkpoints.record_path if before is not None else None
            token = SHELL_RECORD.set(str(record)) if record is not None else None
            try:
                if record is not None:
                    record.unlink(missing_ok=True)
                return await super().execute(args, ctx)
            finally:
                if token is not None:
                    SHELL_RECORD.reset(token)
                if before is not None:
                    await asyncio.shield(checkpoints._after_shell(repo, before, started))

    SnapshottingShell.__name__ = SnapshottingShell.__qualname__ = base.__name__
    return SnapshottingShell
