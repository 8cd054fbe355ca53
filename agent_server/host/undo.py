"""``/undo``, ``/redo`` and ``/checkpoints``: taking back what the agent did, never over the user.

Role: run a plan of ``checkpoints.plan`` through the session's own file seam, so an undo reaches an
editor with our extension as an edit proposal (the user sees the diff; the stale rule applies) and a
plain client or the disk as a guarded write. Each file is restored only where it still holds exactly
what the agent left (for ``/redo``: what the undo put back); a file the user changed since is shown
and asked about — "Take the checkpoint" (allow) or "Keep mine" (reject, also on silence). A file the
agent created is removed, one it deleted comes back. The run is logged (``checkpoint/undo`` or
``checkpoint/redo`` with each file's outcome) and told to the model in a ``notice``, so its picture of
the files matches the disk and replay stays byte-exact.

Must never: overwrite a file the user changed without an explicit "take the checkpoint".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from agent_server.checkpoints.blobs import BlobStore, FileState
from agent_server.policy.approvals import ALLOW_ONCE, REJECT_ONCE, Ask
from agent_server.tools.files import FileSnapshot, sha256_hex

if TYPE_CHECKING:  # the planning loads with the first /undo, /redo or /checkpoints
    from agent_server.checkpoints.plan import Restore

Emit = Callable[[dict[str, Any]], Awaitable[None]]


def checkpoints_report(events: list[Any], roots: list[str]) -> str:
    """``/checkpoints``: the turns that changed files, newest first, with the files and how."""
    from agent_server.checkpoints.plan import changed_turns, plan_redo, plan_undo

    turns = changed_turns(events)
    if not turns:
        return "No checkpoints yet: the agent has not changed any file in this session."
    plan = plan_undo(events)
    redo = plan_redo(events)
    undone = {e.data["turn"] for e in events if e.type == "checkpoint/undo"} - {
        e.data["turn"] for e in events if e.type == "checkpoint/redo"}
    lines = ["Turns that changed files (newest first):"]
    for entry in reversed(turns):
        marks = [m for m, on in (("undone", entry.turn in undone), ("next /undo", plan and plan[0] == entry.turn),
                                 ("next /redo", redo and redo[0] == entry.turn)) if on]
        files = ", ".join(f"{_show(c.path, roots)} ({_how(c.before, c.after)})" for c in entry.files.values())
        lines.append(f"- turn {entry.turn}{' [' + ', '.join(marks) + ']' if marks else ''}: {files}")
    return "\n".join(lines)


def _how(before: FileState | None, after: FileState | None) -> str:
    return "created" if before is None else "deleted" if after is None else "changed"


def _show(path: Path, roots: list[str]) -> str:
    for root in roots:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            continue
    return str(path)


class Restorer:
    """Runs ``/undo`` and ``/redo`` for one session: ``log``, ``files`` (its seam), ``blobs``,
    ``approver`` (asks the user), ``emit`` (its updates), ``roots``."""

    def __init__(self, log: Any, files: Any, blobs: BlobStore, approver: Any, emit: Emit, roots: list[str]) -> None:
        self.log, self.files, self.blobs, self.approver, self.emit, self.roots = log, files, blobs, approver, emit, roots

    async def run(self, which: str) -> str:
        """``which`` is ``"undo"`` or ``"redo"``; returns the text for the user."""
        from agent_server.checkpoints.plan import plan_redo, plan_undo

        plan = plan_undo(self.log.events) if which == "undo" else plan_redo(self.log.events)
        if plan is None:
            return "Nothing to undo: no agent turn changed files." if which == "undo" else "Nothing to redo."
        turn, restores = plan
        call_id = f"{which}-{len(self.log.events) + 1}"
        await self.emit({"sessionUpdate": "tool_call", "toolCallId": call_id, "kind": "edit", "status": "in_progress",
                         "title": f"{which.capitalize()} turn {turn}",
                         "locations": [{"path": str(r.path)} for r in restores]})
        outcomes = [await self._restore(r, call_id) for r in restores]
        self.log.append(f"checkpoint/{which}", {"turn": turn, "files": outcomes})
        summary = "; ".join(f"{_show(Path(o['path']), self.roots)}: {o['outcome']}" for o in outcomes)
        verb = "undid" if which == "undo" else "redid"
        self.log.append("notice", {"reason": f"checkpoint_{which}", "text": (
            f"The user {verb} the file changes of turn {turn}: {summary}. The files on disk and in the editor "
            "may differ from what you last read: read a file again before you change it.")})
        await self.emit({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed",
                         "content": [{"type": "content", "content": {"type": "text", "text": summary}}]})
        return f"{which.capitalize()} of turn {turn}: {summary}."

    async def _current(self, path: Path) -> FileSnapshot | None:
        try:
            return await self.files.read(path)
        except FileNotFoundError:
            return None

    async def _restore(self, restore: Restore, call_id: str) -> dict[str, Any]:
        path = restore.path
        try:
            current = await self._current(path)
        except OSError as exc:  # a folder, a socket, no permission … now stands at that path
            return {"path": str(path), "outcome": f"not restored (it cannot be read now: {exc.strerror or exc})"}
        target = self.blobs.get(restore.target.blob) if restore.target else None
        if (current.raw if current else None) == target:
            return {"path": str(path), "outcome": "already as it was"}
        expected = current is None if restore.expect is None else (
            current is not None and current.sha256 == restore.expect.blob)
        if not expected and not await self._take_checkpoint(path, current, target, call_id):
            return {"path": str(path), "outcome": "kept the user's version (changed since the agent's edit)"}
        if target is None:
            return {"path": str(path), "outcome": self._remove(path, current)}
        outcome = await self.files.write(path, target, base=current)
        if outcome.status not in ("written", "partial"):
            return {"path": str(path), "outcome": f"not restored ({outcome.status}: {outcome.message})"}
        if restore.target and getattr(outcome, "saved", True) and os.path.exists(path):
            if (os.stat(path).st_mode & 0o7777) != restore.target.mode:
                os.chmod(path, restore.target.mode)
        return {"path": str(path), "outcome": "restored" if restore.expect is not None else "brought back"}

    def _remove(self, path: Path, current: FileSnapshot | None) -> str:
        """Remove a file the agent created, only if the disk still holds what was checked."""
        try:
            if current is not None and sha256_hex(path.read_bytes()) != current.sha256:
                return "not removed (it changed on disk just now)"
            path.unlink()
        except FileNotFoundError:
            return "already gone"
        except OSError as exc:
            return f"not removed ({exc.strerror or exc})"
        return "removed (the agent had created it)"

    async def _take_checkpoint(self, path: Path, current: FileSnapshot | None, target: bytes | None,
                               call_id: str) -> bool:
        """Ask about a file the user changed since; only an explicit allow takes the checkpoint."""
        import difflib

        from agent_server.tools.diff_view import diff_content

        def text(raw: bytes | None) -> str:
            return "" if raw is None else raw.decode("utf-8", errors="replace")
        diff = "".join(difflib.unified_diff(text(current.raw if current else None).splitlines(True),
                                            text(target).splitlines(True), "yours", "checkpoint"))
        ask = Ask(call_id, f"{_show(path, self.roots)} changed since the agent's edit", "edit", [
            {"type": "content", "content": {"type": "text", "text": (
                f"{path} was changed after the agent's edit. Allow: take the checkpoint (your changes "
                f"are replaced). Reject: keep your version.\n\n{diff[:4000]}")}},
            diff_content(path, text(current.raw if current else None), text(target))], {"path": str(path)}, options=(ALLOW_ONCE, REJECT_ONCE),
                  names=((ALLOW_ONCE, "Take the checkpoint"), (REJECT_ONCE, "Keep mine")))
        answer = await self.approver.ask(ask)
        return answer.allowed
