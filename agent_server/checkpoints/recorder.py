"""Recording what the agent changes: one ``checkpoint/file`` event per file, bytes in the blob store.

Role: ``Checkpoints`` belongs to one session. ``files(inner)`` wraps the session's workspace-file
seam so every write that lands — ``edit``, ``write``, a proposal the editor applied, a plain-ACP
write — records the file's bytes and mode before and after. ``shell(tool)`` wraps the ``bash`` tool so
that, in a git workspace, the working tree is snapshotted (``ShadowRepo``) right before and right
after each call and every file the call changed is recorded. Edits the user makes between calls are
never attributed to the agent.

Must never: fail a tool because a checkpoint could not be kept (the call's own result stands; the
failure is logged as ``checkpoint/failed``), or keep a secret file's bytes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from agent_server.checkpoints.blobs import BlobStore, FileState
from agent_server.tools.files import CURRENT_TOOL_CALL, FileSnapshot, WriteOutcome

if TYPE_CHECKING:  # the shadow repository loads with the first shell call, in ``shadow()``
    from agent_server.checkpoints.shadow import ShadowRepo

log = logging.getLogger("agent_server.checkpoints")


def _mode(path: Path) -> int | None:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return None


def current_turn(events: list[Any]) -> int:
    """The number of the newest ``turn/start`` of ``events`` (0 before the first turn)."""
    return next((int(e.data.get("turn") or 0) for e in reversed(events) if e.type == "turn/start"), 0)


class Checkpoints:
    """Checkpoints of one session: ``log`` (its ``EventLog``), ``blobs`` (the shared store),
    ``roots`` (workspace roots), ``state_dir`` (for shadow repositories), ``is_secret(path)``."""

    def __init__(self, log: Any, blobs: BlobStore, roots: list[Path], state_dir: Path,
                 is_secret: Callable[[Path], object], name_patterns: tuple[str, ...]) -> None:
        self.log = log
        self.blobs = blobs
        self.roots = [Path(r) for r in roots]
        self.state_dir = Path(state_dir)
        self.is_secret = is_secret
        self.name_patterns = name_patterns

    # -- recording ------------------------------------------------------------------------------

    def record(self, path: Path, before: FileState | None, after: FileState | None, source: str) -> None:
        """Append one ``checkpoint/file`` event (nothing when nothing changed)."""
        if before == after:
            return
        self.log.append("checkpoint/file", {
            "turn": current_turn(self.log.events), "call_id": CURRENT_TOOL_CALL.get(), "path": str(path),
            "before": before.to_json() if before else None, "after": after.to_json() if after else None,
            "source": source})

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
        """The shadow repository of the first root, when it is a git workspace."""
        from agent_server.checkpoints.shadow import ShadowRepo

        root = self.roots[0]
        if not ShadowRepo.is_git_workspace(root):
            return None
        key = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:24]
        return ShadowRepo(self.state_dir / "shadow" / f"{key}.git", root, is_secret=self.is_secret,
                          name_patterns=self.name_patterns)

    def shell(self, tool: Any) -> Any:
        """``tool`` (the ``bash`` tool) with a snapshot of the working tree before and after each call."""
        checkpoints = self
        base = type(tool)

        class SnapshottingShell(base):  # type: ignore[misc, valid-type]
            async def execute(self, args: Any, ctx: Any) -> Any:
                repo = checkpoints.shadow()
                before = await checkpoints._snapshot(repo)
                try:
                    return await super().execute(args, ctx)
                finally:
                    if before is not None:
                        await asyncio.shield(checkpoints._after_shell(repo, before))

        SnapshottingShell.__name__ = SnapshottingShell.__qualname__ = base.__name__
        wrapped = SnapshottingShell.__new__(SnapshottingShell)
        wrapped.__dict__.update(tool.__dict__)
        return wrapped

    async def _snapshot(self, repo: ShadowRepo | None) -> str | None:
        if repo is None:
            return None
        from agent_server.checkpoints.shadow import ShadowError  # loaded: repo is a ShadowRepo

        try:
            return await asyncio.to_thread(repo.snapshot)
        except ShadowError as exc:
            self._failed("snapshot before a shell call", exc)
            return None

    async def _after_shell(self, repo: ShadowRepo, before: str) -> None:
        from agent_server.checkpoints.shadow import ShadowError

        try:
            after = await asyncio.to_thread(repo.snapshot)
            changes = await asyncio.to_thread(repo.changes, before, after, self.blobs)
        except (ShadowError, OSError) as exc:
            self._failed("snapshot after a shell call", exc)
            return
        for change in changes:
            self.record(change.path, change.before, change.after, "shell")


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
        outcome = await self.inner.write(path, raw, base=base)
        if outcome.status in ("written", "partial") and outcome.snapshot is not None:
            try:
                before = (FileState(self.checkpoints.blobs.put(base.raw), mode_before or 0o644)
                          if base is not None else None)
                after = FileState(self.checkpoints.blobs.put(outcome.snapshot.raw),
                                  _mode(path) or mode_before or 0o644)
                self.checkpoints.record(Path(path), before, after, "edit")
            except OSError as exc:
                self.checkpoints._failed(f"write of {path}", exc)
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
