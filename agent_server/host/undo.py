"""``/undo``, ``/redo`` and ``/checkpoints``: taking back what the agent did, never over the user.

Role: run a plan of ``checkpoints.plan``. Every read, compare, write, chmod and unlink goes beneath
the file's root: its folder is opened from the root with no link followed (``safe_fs``), and the
file is looked at, replaced (``renameat``), chmodded (through its own descriptor) or removed
(``unlinkat``) inside that folder's descriptor — a path whose folder became a link is refused and
said. With an editor seam, the user's buffer is what is compared (the disk where the agent's change
lives there under a buffer with other, unsaved text: restored on disk, the buffer left alone) and a
text restore is sent through the seam (with our extension: an edit proposal, the editor's review; after a "Take the checkpoint"
answer: written without a second review, ``unreviewed()``).

Must never: drop a change of the user's — a file's other changes, an uncertain file — without an
explicit choice; follow a link on the way to a file it changes.

A file is restored only where
it still holds exactly what the agent left — bytes and permission bits (for ``/redo``: what the undo
put back); a file the user changed since, or one a shell call changed without evidence that the call
wrote it (``uncertain``), is asked about one file at a time with its diff — "Take the checkpoint"
(allow) or "Keep mine" / "Keep the file as it is" (reject; silence keeps it too, and says so); a
file changed since whose agent's change merges back alone (``merge_back``: a three-way merge of its
lines, each with its own ending) is offered that first, "Undo the agent's change, keep the rest"
(``AGENTS_CHANGE_ONLY``), the other changes kept — and done unasked in a headless run with no one to
ask (it drops none of them; an uncertain file's, offered as "the command's change", never). A file the
agent created is removed, one it deleted comes back; a state whose bytes were not kept (a secret, a
big file) says it cannot be taken back. After "Take the checkpoint" the file as it was is kept first
(``replaced`` in its outcome): ``/redo`` brings the user's bytes back, not the agent's. The run is logged (``checkpoint/undo`` or
``checkpoint/redo`` with each file's outcome) and told to the model in a ``notice``, so its picture
of the files matches the disk and replay stays byte-exact.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from agent_server.checkpoints.blobs import LINK_MODE, BlobStore, FileState
from agent_server.policy.approvals import ALLOW_ONCE, REJECT_ONCE, Answer, Ask
from agent_server.tools import safe_fs
from agent_server.tools.files import (UTF8_BOM, PROPOSAL_LABEL, DiskFiles, FileSnapshot, WriteOutcome, editor_text_of,
                                       file_bytes)

_READ_LIMIT = 1 << 31
#: The option of a question about a file that changed since the agent's edit that takes back (or
#: re-applies) only the agent's change, by a three-way merge: the file's other changes stay.
AGENTS_CHANGE_ONLY = "agents_change_only"
#: Bytes a side may have for that merge (line matching is quadratic at worst): past it, only the
#: whole checkpoint or the file as it is are offered.
MERGE_LIMIT = 2 << 20

if TYPE_CHECKING:  # the planning loads with the first /undo, /redo or /checkpoints
    from agent_server.checkpoints.plan import Restore

Emit = Callable[[dict[str, Any]], Awaitable[None]]


def checkpoints_report(events: list[Any], roots: list[str]) -> str:
    """``/checkpoints``: the turns that changed files, newest first, with the files and how."""
    from agent_server.checkpoints.plan import history, plan_redo, plan_undo

    past = history(events)
    if not past.turns:
        return "No checkpoints yet: the agent has not changed any file in this session."
    plan = plan_undo(events)
    redo = plan_redo(events)
    lines = ["Turns that changed files (newest first):"]
    for entry in reversed(past.turns):
        undid = past.undone_files.get(entry.turn, set())
        redid = past.redone.get(entry.turn, set())  # re-applied by a /redo a crash cut off
        undone = entry.turn in past.undone
        partly = undone and bool(undid) and not set(entry.files) <= undid
        cut = not undone and bool(undid) and entry.turn in past.interrupted  # an /undo a crash cut off
        state = ("partly undone (the /undo was interrupted)" if cut else "partly undone" if partly else "undone")
        marks = [m for m, on in ((state, undone or cut),
                                 ("next /undo", plan and plan[0] == entry.turn),
                                 ("next /redo", redo and redo[0] == entry.turn)) if on]

        def note(path: Path) -> str:
            if cut:
                return ", undone" if path in undid else ""
            if path in redid:
                return ", redone"
            return ", kept" if partly and path not in undid else ""

        files = ", ".join(f"{_show(c.path, roots)} ({_how(c.before, c.after)}{note(c.path)})"
                          for c in entry.files.values())
        lines.append(f"- turn {entry.turn}{' [' + ', '.join(marks) + ']' if marks else ''}: {files}")
    return "\n".join(lines)


def restore_call(which: str, turn: int, call_id: str, paths: list[str]) -> dict[str, Any]:
    """The ``tool_call`` update an ``/undo`` or ``/redo`` of ``turn`` is shown as (live and on load)."""
    return {"sessionUpdate": "tool_call", "toolCallId": call_id, "kind": "edit", "status": "in_progress",
            "title": f"{which.capitalize()} turn {turn}", "locations": [{"path": p} for p in paths]}


def restore_summary(outcomes: list[dict[str, Any]], roots: list[str]) -> str:
    """Each file's outcome of a restore, ``path: outcome; …``."""
    return "; ".join(f"{_show(Path(o['path']), roots)}: {o['outcome']}" for o in outcomes)


def restore_content(summary: str) -> list[dict[str, Any]]:
    """The ``content`` of a finished restore's tool call."""
    return [{"type": "content", "content": {"type": "text", "text": summary}}]


def restore_meta(which: str, turn: int, outcomes: list[dict[str, Any]], done: bool | None) -> dict[str, Any]:
    """The finished restore's ``_meta``: ``agentServer.restore {which, turn, done, changed}`` — whether
    the run counts (an undo whose restores the user all declined does not: the turn is still the next
    ``/undo``'s) and the files it changed (live and on load; ``done`` ``None``: from the outcomes)."""
    from agent_server.checkpoints.plan import file_changed, run_counts

    files = [o for o in outcomes if isinstance(o, dict) and "path" in o]
    return {"agentServer": {"restore": {
        "which": which, "turn": turn, "done": run_counts(files) if done is None else done,
        "changed": [str(o["path"]) for o in files if file_changed(o)]}}}


def restore_text(which: str, turn: int, summary: str, outcomes: list[dict[str, Any]], done: bool,
                 again: str = "", earlier: frozenset[Path] = frozenset()) -> str:
    """What the user is answered after a run: what became of each file, and what ``/undo`` and
    ``/redo`` do next when the run did not take the whole turn back. ``again``: what the last run of
    the turn, not done, did (``again_text``); ``earlier``: the files earlier undos of the turn
    changed (a run a crash cut off) — ``/redo`` re-applies them too."""
    from agent_server.checkpoints.plan import LEFT_OUTCOME, file_changed

    name = which.capitalize()
    head = f"{name} of turn {turn}" + (f" again ({again})" if again else "")
    if not done:
        nothing = "Nothing was undone" if which == "undo" else "Nothing was redone"
        next_step = (f"turn {turn} is still the one /undo takes back (/undo asks about it again)" if which == "undo"
                     else f"turn {turn} stays undone (/redo offers it again)")
        return f"{head}: {summary}. {nothing}: {next_step}."
    changed = [o for o in outcomes if file_changed(o)]
    kept = [o for o in outcomes if not file_changed(o) and o.get("outcome") != LEFT_OUTCOME
            and Path(o["path"]) not in earlier]
    text = f"{head}: {summary}."
    if which == "undo" and changed and kept:
        text += (f" Turn {turn} is undone for the files restored: /redo re-applies only those, and /undo "
                 "again takes back the turn before it.")
    return text


def again_text(last: Any, roots: list[str]) -> str:
    """What the last run of a turn (a ``plan.Run``, not done) did, for the answer of the next one."""
    if last.interrupted:
        names = ", ".join(_show(p, roots) for p in last.files)
        return (f"the last /{last.which} of it was interrupted after "
                f"{'restoring' if last.which == 'undo' else 're-applying'} {names}")
    return f"the last /{last.which} of it changed no file"


def nothing_text(which: str, events: list[Any], roots: list[str] | None = None) -> str:
    """The answer when there is nothing to undo or redo, saying why."""
    from agent_server.checkpoints.plan import history

    past = history(events)
    if which == "undo":
        if past.turns:
            return ("Nothing to undo: every agent turn that changed files is undone"
                    + (" (/redo re-applies the last one)." if past.redo else "."))
        return "Nothing to undo: no agent turn changed files."
    last = past.last.get("undo")
    if last is not None and last.interrupted and last.turn not in past.undone:
        names = ", ".join(_show(p, roots or []) for p in last.files)
        return (f"Nothing to redo: the last /undo (turn {last.turn}) was interrupted before it ended ({names} "
                f"restored): /undo takes back the rest of turn {last.turn}.")
    if last is not None and not last.changed:
        return f"Nothing to redo: the last /undo (turn {last.turn}) changed no file."
    return "Nothing to redo."


def _notice(which: str, turn: int, summary: str, interrupted: bool = False) -> dict[str, Any]:
    verb = "undid" if which == "undo" else "redid"
    did = (f"The user {verb} the file changes of turn {turn}: {summary}." if not interrupted else
           f"The user's /{which} of the file changes of turn {turn} was interrupted (agent-server stopped before "
           f"it ended) after it had {'restored' if which == 'undo' else 're-applied'}: {summary}. The turn's other "
           f"files were not {'taken back' if which == 'undo' else 're-applied'}.")
    return {"reason": f"checkpoint_{which}", "text": (
        f"{did} The files on disk and in the editor may differ from what you last read: read a file again "
        "before you change it.")}


def recover_restore(log: Any) -> bool:
    """Close an ``/undo`` or ``/redo`` a dead process left open: its files restored before it died
    (``checkpoint/restored``) are logged as that run (``done: false``, ``interrupted: true``: the user
    had not answered about every file — the next ``/undo`` asks about that turn again, and a file
    already put back is taken as it is), the model is told, and the command is shown as interrupted.
    Reads the log's tail only; ``False`` when nothing was open."""
    restored: list[Any] = []
    for event in reversed(log.events):
        if event.type == "checkpoint/restored":
            if restored and event.data.get("call_id") != restored[0].data.get("call_id"):
                break
            restored.append(event)
        elif event.type in ("checkpoint/undo", "checkpoint/redo", "command", "turn/start", "turn/end", "user",
                            "checkpoint/file"):
            break
    if not restored:
        return False
    first = restored[-1].data
    which, turn, call_id = str(first.get("which")), int(first.get("turn") or 0), str(first.get("call_id"))
    files = [{k: v for k, v in e.data.items() if k not in ("call_id", "which", "turn")} for e in reversed(restored)]
    header = log.events[0].data if log.events and log.events[0].type == "session/header" else {}
    roots = [str(r) for r in [header.get("cwd") or "/", *(header.get("additional_directories") or [])]]
    summary = restore_summary(files, roots)
    log.append(f"checkpoint/{which}", {"turn": turn, "files": files, "call_id": call_id, "done": False,
                                       "interrupted": True})
    log.append("notice", _notice(which, turn, summary, interrupted=True))
    rest = (f"/undo asks about the rest of turn {turn} again" if which == "undo"
            else f"/redo re-applies the rest of turn {turn}")
    log.append("command", {"name": which, "argument": "", "outcome": (
        f"{which.capitalize()} of turn {turn} was interrupted (agent-server stopped before it ended): {summary}. "
        f"{rest}.")})
    return True


def _how(before: FileState | None, after: FileState | None) -> str:
    if before is None or after is None:
        return "created" if before is None else "deleted"
    if LINK_MODE in (before.mode, after.mode) or before.mode == after.mode:
        return "changed"
    mode = f"mode {before.mode:o} → {after.mode:o}"
    return mode if before.blob == after.blob else f"changed, {mode}"


def _show(path: Path, roots: list[str]) -> str:
    for root in roots:
        try:
            return str(Path(path).relative_to(root))
        except ValueError:
            continue
    return str(path)
_BOM = UTF8_BOM


class Restorer:
    """Runs ``/undo`` and ``/redo`` for one session: ``log``, ``files`` (its seam), ``blobs``,
    ``approver`` (asks the user), ``emit`` (its updates), ``roots``."""

    def __init__(self, log: Any, files: Any, blobs: BlobStore, approver: Any, emit: Emit, roots: list[str],
                 is_secret: Callable[[Path], object] = lambda _path: None) -> None:
        self.log, self.files, self.blobs, self.approver, self.emit, self.roots = log, files, blobs, approver, emit, roots
        self.is_secret = is_secret
        self._title = "Restore"  # "Undo turn 3" while a run restores: the editor's review is titled with it
        # one run at a time: two at once (a double-click) planned the same turn under one call id
        self._running = asyncio.Lock()
        # runs waiting or running, and the latest one's command: a prompt sent meanwhile (while a
        # question of the run waits) starts its turn only once none is left (``idle``)
        self._runs = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.which = "undo"
        self._disk_paths: set[Path] = set()  # a /redo's files its undo restored on disk (under an unsaved buffer)

    async def run(self, which: str, turn_running: Callable[[], bool] = lambda: False) -> str:
        """``which`` is ``"undo"`` or ``"redo"``; returns the text for the user. A run waits for the
        one before it (it plans on what that one restored); ``turn_running`` is asked once its turn
        has come — a turn may have started while it waited (a prompt sent during the first's
        question) — and a run never restores under a running turn."""
        self._runs += 1
        self._idle.clear()
        self.which = which
        try:
            async with self._running:
                if turn_running():
                    return f"A turn is running: /{which} once it has ended (or cancel it first)."
                self.which = which
                return await self._run(which)
        finally:
            self._runs -= 1
            if self._runs == 0:
                self._idle.set()

    @property
    def busy(self) -> bool:
        """Whether a run is waiting or running: a prompt sent now waits for ``idle``."""
        return self._runs > 0

    async def idle(self) -> None:
        """Until no run is waiting or running."""
        await self._idle.wait()

    async def _run(self, which: str) -> str:
        from agent_server.checkpoints.plan import (LEFT_OUTCOME, REDONE_OUTCOME, file_changed, history, plan_redo,
                                                   plan_undo, run_counts)

        events = self.log.events
        plan = plan_undo(events) if which == "undo" else plan_redo(events)
        if plan is None:
            return nothing_text(which, events, self.roots)
        turn, restores = plan
        past = history(events)
        last = past.last.get(which)
        again = again_text(last, self.roots) if last is not None and last.turn == turn and not last.done else ""
        # files earlier undos of the turn changed (one a crash cut off): /redo re-applies them too
        earlier = frozenset(past.undone_files.get(turn, set())) if which == "undo" else frozenset()
        self._title = f"{which.capitalize()} turn {turn}"
        self._disk_paths = _restored_on_disk(events, turn) if which == "redo" else set()
        call_id = f"{which}-{len(self.log.events) + 1}"
        await self.emit(restore_call(which, turn, call_id, [str(r.path) for r in restores]))
        outcomes = []
        for restore in restores:
            outcome = (_said(restore.path, REDONE_OUTCOME if restore.redone else LEFT_OUTCOME) if restore.leave
                       else await self._restore(restore, call_id))
            outcome["changed"] = file_changed(outcome)
            if outcome["changed"]:  # kept at once: a crash before the run's end loses no restore (recover_restore)
                self.log.append("checkpoint/restored", {"call_id": call_id, "which": which, "turn": turn, **outcome})
            outcomes.append(outcome)
        done = run_counts(outcomes)
        self.log.append(f"checkpoint/{which}", {"turn": turn, "files": outcomes, "call_id": call_id, "done": done})
        summary = restore_summary(outcomes, self.roots)
        if any(o["changed"] for o in outcomes):  # the model is told only of files that changed
            self.log.append("notice", _notice(which, turn, summary))
        await self.emit({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "completed",
                         "content": restore_content(summary), "_meta": restore_meta(which, turn, outcomes, done)})
        return restore_text(which, turn, summary, outcomes, done, again, earlier)

    def _editor(self) -> tuple[bool, bool]:
        """``(reads buffers, writes through the editor)`` of the session's seam: the disk backend
        neither; an editor seam as its capabilities say (an unknown seam: both)."""
        if isinstance(self.files, DiskFiles):
            return False, False
        caps = getattr(self.files, "caps", None)
        if caps is None:
            return True, True
        return bool(caps.read_text), bool(caps.apply_workspace_edit or caps.write_text)

    async def _restore(self, restore: Restore, call_id: str) -> dict[str, Any]:
        path = restore.path
        anchor, parts = _beneath(path, self.roots)
        try:
            dirfd = safe_fs.open_dir_beneath(anchor, parts[:-1], create=restore.target is not None)
        except safe_fs.PathChangedError:
            return _said(path, "not restored (a link now stands in its path, which could lead outside the "
                               "workspace: nothing was read, written or removed)")
        except FileNotFoundError:
            return _said(path, "already gone")
        except OSError as exc:
            return _said(path, f"not restored (it cannot be read now: {exc.strerror or exc})")
        try:
            outcome = await self._restore_in(dirfd, parts[-1], restore, call_id)
        finally:
            os.close(dirfd)
        if restore.folders and restore.target is None and outcome.get("outcome") == "removed (the agent had created it)":
            removed = _remove_folders(anchor, parts[:-1], restore.folders)
            if removed:  # /redo makes them again (its write opens the file's folder, making what is missing)
                outcome["folders"] = removed
                names = ", ".join(_show(Path(f), self.roots) + "/" for f in removed)
                outcome["outcome"] += (f", and the empty folder{'s' if len(removed) > 1 else ''} its creation "
                                       f"had made: {names}")
        return outcome

    async def _restore_in(self, dirfd: int, name: str, restore: Restore, call_id: str) -> dict[str, Any]:
        path, target, expect = restore.path, restore.target, restore.expect
        try:
            disk = _look(dirfd, name)
        except OSError as exc:  # a folder, a socket, no permission … now stands at that path
            return _said(path, f"not restored (it cannot be read now: {exc.strerror or exc})")
        reads_buffer, writes_editor = self._editor()
        links = (disk is not None and disk[1] == LINK_MODE) or (target is not None and target.mode == LINK_MODE)
        if links:  # a link (now, or to bring back) is the disk's business: an editor would follow it
            reads_buffer = writes_editor = False
        current = None if disk is None else FileSnapshot.of(path, disk[0])
        seen = current  # what the seam read: the base of its write
        if reads_buffer and disk is not None:
            try:  # the editor's buffer is what the user sees (unsaved text included)
                seen = await self.files.read(path)
            except FileNotFoundError:
                seen = None
            except OSError as exc:
                return _said(path, f"not restored (it cannot be read now: {exc.strerror or exc})")
            # compared, merged and kept as the file's bytes: an editor's text never holds the file's BOM
            current = None if seen is None else FileSnapshot.of(path, file_bytes(seen, disk[0]), seen.version)
        mode = None if disk is None else disk[1]
        if restore.bomless and disk is not None and disk[1] != LINK_MODE and disk[0].startswith(_BOM):
            # a log from before checkpoints held the file's bytes: an editor's write kept its text,
            # without the file's BOM — the BOM the file has is the file's (or the user's), kept
            restore = self._with_bom(restore)
            target, expect = restore.target, restore.expect
        # a buffer with unsaved text over a disk the agent's shell call changed: the agent's change
        # lives on the disk (the buffer is the text from before it): the disk is what is restored,
        # compared and shown, and the user's unsaved text is left alone
        on_disk = (reads_buffer and disk is not None and disk[1] != LINK_MODE and current is not None
                   and not _same_text(current.raw, disk[0])
                   and await asyncio.to_thread(self._on_disk, restore, current.raw))
        if on_disk:
            assert disk is not None
            current, writes_editor = FileSnapshot.of(path, disk[0]), False
        if _holds(target, current, mode):
            return _said(path, "already as it was")
        if target is not None and not target.kept:
            return _said(path, "cannot be taken back (its bytes were not kept: a secret file, or larger than the "
                               "checkpoint size limit)")
        target_raw = self.blobs.get(target.blob) if target is not None else None
        bytes_only = target is not None and current is not None and current.raw == target_raw and not links
        # the user's file (changed since), or one nothing shows was the agent's: the question comes first,
        # in every front end, before any proposal or write — an editor's review of a restore reads as a
        # plain edit and never says that the text it replaces is the user's
        asked = restore.uncertain or not _holds(expect, current, mode)
        said = _said
        target_mode = None if target is None else target.mode
        redo = self._title.startswith("Redo")
        done_word = "restored" if expect is not None else "created again (the agent had created it)" if redo else "brought back"
        merging, left = False, None
        if asked:
            # a file that changed since the agent's edit (by the user, their editor, another window's
            # agent): the agent's own change alone is taken back (re-applied) where it merges cleanly;
            # an uncertain file that changed again after the call: the call's change alone, offered too
            merge = None
            since = not _holds(expect, current, mode)
            if (not links and expect is not None and target is not None and current is not None
                    and (since or not restore.uncertain)):
                merge = await asyncio.to_thread(merge_back, self.blobs.get(expect.blob) if expect.kept else None,
                                                current.raw, target_raw)
            link_now = os.fsdecode(disk[0]) if disk is not None and disk[1] == LINK_MODE else None
            answer = await self._take_checkpoint(path, current, target_raw, call_id, restore.uncertain, merge,
                                                 link_now, restore.replaced, on_disk=on_disk)
            merging = answer.kind == "selected" and answer.option == AGENTS_CHANGE_ONLY and isinstance(merge, bytes)
            # a headless run (no one to ask at all) of a file the agent's change merges out of alone: that
            # is what /undo asked for, and it drops none of the file's other changes — never an uncertain
            # file's (its change may be the user's) nor the whole checkpoint
            unasked = (not merging and answer.kind == "unavailable" and answer.headless and not restore.uncertain
                       and isinstance(merge, bytes))
            if not (answer.allowed or merging or unasked):
                return _said(path, _kept(restore.uncertain, answer))
            if merging or unasked:
                assert isinstance(merge, bytes) and expect is not None and target is not None
                target_raw, merging = merge, True
                # the mode as the bytes: the agent's change of it is taken back only where it is still there
                target_mode = target.mode if mode is None or mode == expect.mode else mode
                whose, rest = (("the command's change", "what changed after it kept") if restore.uncertain
                               else ("the agent's change", "the file's other changes kept"))
                done_word = (f"restored (only {whose} " + ("taken back" if self._title.startswith("Undo") else "re-applied")
                             + f"; {rest}" + ("; a headless run has no one to ask, and this drops none of them"
                                              if unasked else "") + ")")
                bytes_only = current.raw == merge if current is not None else False
                try:  # what the run leaves: a /redo of it starts from there, without a question
                    left = self.blobs.keep(merge, target_mode, secret=self.is_secret(path) is not None)
                except OSError as exc:
                    return _said(path, f"not restored (the merged file could not be kept first: {exc.strerror or exc})")
            # what the checkpoint replaces is kept first (never the size limit: the user's bytes), so a
            # /redo brings it back — the file as it was just before this run, not the agent's state
            try:
                replaced = self._keep(path, current, mode)
            except OSError as exc:
                return _said(path, f"not restored (the file as it is now could not be kept first: "
                                   f"{exc.strerror or exc})")

            def said(path: Path, outcome: str) -> dict[str, Any]:
                extra = {"left": left.to_json()} if left is not None and outcome.startswith("restored") else {}
                return {**_said(path, outcome), "replaced": replaced.to_json() if replaced else None, **extra}
        if on_disk:
            done_word += (" (on disk; the editor's buffer keeps your unsaved changes as they are) (when you save them, "
                          "your editor may say the file changed on disk: this restore wrote it)")
        if target is None or target_mode is None:
            return said(path, _remove(dirfd, name, disk, "deleted again (the agent had deleted it)" if redo
                                      else "removed (the agent had created it)"))
        # the BOM is a property of the file, never an editor's text (docs/protocol.md): a restore that
        # adds or removes it is written on disk where the editor holds nothing unsaved (it reloads the
        # file), else the text goes through the editor and the file keeps its BOM, as said
        bom_kept = ""
        if writes_editor and current is not None and current.raw.startswith(UTF8_BOM) != target_raw.startswith(UTF8_BOM):
            if disk is not None and current.raw == disk[0]:
                bytes_only, writes_editor = False, False
            else:
                bom_kept = (f" (its text; the file {'keeps its' if current.raw.startswith(UTF8_BOM) else 'has no'} "
                            "byte order mark: the editor holds unsaved text, and an editor's text cannot change it)")
        if bytes_only or not writes_editor or not _is_text(target_raw):
            done = said(path, _replace(dirfd, name, disk, target_raw, target_mode, bytes_only, done_word))
            # where it went: a /redo of it goes to the disk too (the buffer still holds the text from before)
            return {**done, "on_disk": True} if on_disk and done["outcome"] == done_word else done
        # the editor's review of this restore is titled as what it is ("Undo turn 3: app.py"), not "Edit app.py";
        # after an explicit "Take the checkpoint" it is written without a second review (still guarded by
        # the text just read: a keystroke since makes it stale)
        seam = self.files
        if asked and hasattr(seam, "unreviewed"):
            seam = seam.unreviewed()
        label = PROPOSAL_LABEL.set(f"{self._title}: {path.name}")
        try:
            outcome = await seam.write(path, editor_text_of(target_raw, seen), base=seen)
        finally:
            PROPOSAL_LABEL.reset(label)
        if outcome.status == "rejected" and asked:
            return said(path, "kept the user's version (the user rejected the checkpoint in the editor)")
        if outcome.status == "rejected":  # the editor's review of the restore, declined
            return said(path, "not restored (the user rejected the restore in the editor"
                         + (f": {outcome.message})" if outcome.message else ")"))
        if outcome.status not in ("written", "partial"):
            return said(path, f"not restored ({outcome.status}" + (f": {outcome.message})" if outcome.message else ")"))
        from agent_server.checkpoints.plan import NOT_AS_IT_WAS

        reformatted = None  # the file as the editor's save left the restored text
        if not outcome.merged:  # what landed, read back: never "restored" on the editor's word alone
            wrong = await self._not_the_checkpoint(dirfd, name, path, target_raw, outcome, bool(bom_kept))
            reformatted = None if not wrong else self._saved_over(dirfd, name, path, outcome, target_mode,
                                                                  None if current is None else current.raw, expect)
            if wrong and reformatted is None:
                return said(path, f"{NOT_AS_IT_WAS} ({wrong}; /{'undo' if self._title.startswith('Undo') else 'redo'} "
                                  "asks about it again)")
            if reformatted is not None:
                done_word += (" (then the editor's save changed it: format-on-save or another save participant "
                              "rewrote the restored text, so the file differs from the checkpoint only by what "
                              "that save changed)")
        saved = getattr(outcome, "saved", True)
        if not saved and getattr(outcome, "save_failed", False):  # the buffer was clean: the disk must hold the checkpoint
            try:
                now = _look(dirfd, name)
            except OSError:
                now = None
            if now is None or now[0].removeprefix(UTF8_BOM) != target_raw.removeprefix(UTF8_BOM):
                if now is not None:  # the permission bits are the file's, set whatever the editor's save did
                    try:
                        _chmod(dirfd, name, target_mode)
                    except OSError:
                        pass
                what = "the agent's change" if self._title.startswith("Undo") else "what the /undo left"
                return said(path, f"restored in the editor, not saved (the editor's save did not complete: a save "
                                  f"participant such as format-on-save may still be running, or the write failed): "
                                  f"the file on disk still holds {what} until the editor's buffer of it is saved")
            saved = True  # the disk holds the checkpoint all the same
        if saved:
            _chmod(dirfd, name, target_mode)
            try:
                landed = _look(dirfd, name)
            except OSError:
                landed = None
            done = said(path, done_word + bom_kept + ("" if landed is None else _mode_note(landed[1], target_mode)))
            # what the run left is the saved file, not the checkpoint: a /redo of it starts from there
            return done if reformatted is None else {**done, "left": reformatted.to_json()}
        # the buffer has unsaved changes (kept): the restore is in it; a disk that holds the change too keeps
        # it — said, so that nobody takes the file on disk for restored (a revert of the buffer brings it back).
        # The permission bits are the file's, never the buffer's (an editor's save keeps them): set now
        try:
            _chmod(dirfd, name, target_mode)
            now = _look(dirfd, name)
        except OSError:
            now = None
        note = "" if now is None else _mode_note(now[1], target_mode)
        if expect is None or now is None or expect.holds(now[0]) is not True:
            return said(path, done_word + bom_kept + note)  # the disk never held the change (an unsaved buffer's edit)
        what = "the agent's change" if self._title.startswith("Undo") else "what the /undo left"
        return said(path, done_word + bom_kept + note + f" (in the editor's buffer only, which has unsaved changes: "
                                                         f"the file on disk keeps {what} until you save it)")

    def _saved_over(self, dirfd: int, name: str, path: Path, outcome: WriteOutcome, mode: int | None,
                    replaced: bytes | None, expect: FileState | None) -> FileState | None:
        """The file as the editor's save left a restore it applied exactly (kept: what the run
        leaves), when that save alone made it differ from the checkpoint — the editor applied every
        hunk as sent and saved, then a save participant (format-on-save) rewrote it — and the file is
        neither what the run replaced nor the state it takes back (``expect``: a save that put the
        agent's change back restored nothing); else ``None``: not restored as it was."""
        if not (outcome.status == "written" and outcome.as_sent and outcome.landed_by == "editor"
                and getattr(outcome, "saved", True)):
            return None
        try:
            now = _look(dirfd, name)
        except OSError:
            return None
        if (now is None or now[1] == LINK_MODE or replaced is None or now[0] == replaced
                or (expect is not None and expect.holds(now[0]) is True)):
            return None
        try:
            return self.blobs.keep(now[0], mode if mode is not None else now[1], secret=self.is_secret(path) is not None)
        except OSError:
            return None

    async def _not_the_checkpoint(self, dirfd: int, name: str, path: Path, target: bytes,
                                  outcome: WriteOutcome, bom_kept: bool = False) -> str | None:
        """Why the file does not hold ``target`` after the editor applied its restore (``None``: it
        does): a saved file's bytes on disk (``bom_kept``: its text, the file's BOM aside), an
        unsaved buffer's text (its BOM is the file's, not text) — a client that put the hunks
        elsewhere answered "applied" all the same."""
        try:
            if getattr(outcome, "saved", True):
                found = _look(dirfd, name)
                if found is not None and (found[0] == target or bom_kept and found[0].removeprefix(UTF8_BOM)
                                          == target.removeprefix(UTF8_BOM)):
                    return None
            else:
                now = await self.files.read(path)
                if now.raw.removeprefix(UTF8_BOM) == target.removeprefix(UTF8_BOM):
                    return None
        except OSError as exc:
            return f"it cannot be read back: {exc.strerror or exc}"
        if outcome.status == "partial" and outcome.hunks_total:
            return (f"the editor applied {outcome.hunks_applied} of its {outcome.hunks_total} changes, so the file "
                    "is not the checkpoint")
        if getattr(outcome, "landed_by", "") == "editor" and getattr(outcome, "saved", True):
            return ("the editor's save changed it: format-on-save or another save participant rewrote the "
                    "restored text, so the file on disk is not the checkpoint")
        return ("after the editor applied it, the file holds other text than the checkpoint (the editor "
                "changed it while writing, or it changed just then)")

    def _with_bom(self, restore: Restore) -> Restore:
        """``restore`` with the file's BOM before each kept text state that lacks it (``Restore.bomless``)."""
        import dataclasses

        states = [s for s in (restore.expect, restore.target) if s is not None]
        try:  # an editor's text, both sides: no BOM in either (a state with one is the file's bytes already)
            if any(not s.kept or s.mode == LINK_MODE or self.blobs.get(s.blob).startswith(_BOM) for s in states):
                return restore

            def bom(state: FileState | None) -> FileState | None:
                return None if state is None else self.blobs.keep(_BOM + self.blobs.get(state.blob), state.mode)
            return dataclasses.replace(restore, expect=bom(restore.expect), target=bom(restore.target))
        except OSError:  # a blob that cannot be read or kept: the states as logged (asked, since they differ)
            return restore

    def _on_disk(self, restore: Restore, buffer: bytes) -> bool:
        """Whether the change to take back (``restore.expect`` → ``restore.target``) lives on the
        disk, not in the editor's buffer, which holds other (unsaved) text: the buffer does not hold
        ``expect`` and taking the change out of it would change nothing there (the buffer is the text
        from before the agent's change: a shell command changed the file under it); for ``/redo``,
        also where the undo it redoes restored the file on disk."""
        expect, target = restore.expect, restore.target
        if expect is None or target is None or expect.holds(buffer) is True:
            return False
        if restore.path in self._disk_paths:
            return True
        if not (expect.kept and target.kept) or LINK_MODE in (expect.mode, target.mode):
            return False
        base, other = (self.blobs.get(state.blob) for state in (expect, target))
        if not buffer.startswith(_BOM):  # the editor's text never holds the file's BOM
            base, other = base.removeprefix(_BOM), other.removeprefix(_BOM)
        merged = merge_back(base, buffer, other)
        return isinstance(merged, bytes) and merged == buffer

    def _keep(self, path: Path, current: FileSnapshot | None, mode: int | None) -> FileState | None:
        """The state of the file as it is now (``current``, ``mode`` on disk), its bytes kept in the
        store (a secret's never: then named only); ``None`` when it is absent."""
        if current is None:
            return None
        return self.blobs.keep(current.raw, 0o644 if mode is None else mode, secret=self.is_secret(path) is not None)

    async def _take_checkpoint(self, path: Path, current: FileSnapshot | None, target: bytes | None,
                               call_id: str, uncertain: bool, merge: bytes | str | None = None,
                               link_now: str | None = None, yours_too: bool = False, *,
                               on_disk: bool = False) -> Answer:
        """Ask about one file (never one answer for several). A file that changed since the agent's
        edit whose agent's change merges back alone (``merge``: the merged bytes) is offered that
        first — "Undo the agent's change, keep the rest" (``AGENTS_CHANGE_ONLY``; its diff is
        exactly what it changes) —, then "Take the checkpoint" (the whole file) or "Keep the file as
        it is"; where it does not (``merge`` says why), the last two. An uncertain file: "Take the
        checkpoint" or "Keep mine" — and "Undo the command's change, keep later changes" first where
        the file changed again after the call and that merges. Only an explicit choice changes the
        file (silence: it stays; ``_restore_in`` merges unasked in a headless run). A ``/redo`` says
        what it re-applies: what its undo took back (``yours_too``: the user's own changes the undo
        replaced with the checkpoint too). The diff is of the file's text: its BOM, a property of the
        file, is said in words when the sides differ in it, never shown as a character of line 1."""
        from agent_server.tools.diff_view import diff_content

        def text(raw: bytes | None) -> str:
            return "" if raw is None else raw.removeprefix(UTF8_BOM).decode("utf-8", errors="replace")
        shown = _show(path, self.roots)
        verb = "Undo" if self._title.startswith("Undo") else "Redo"
        now = text(current.raw if current else None)
        if uncertain:
            title = f"{shown}: keep yours or take the checkpoint?"
            why = (f"{path} changed while an agent shell command ran, and nothing shows whose write it was (the "
                   "command's, or yours, your editor's, another program's).")
            keep = "Keep mine"
            body = (f"{why} Allow: take the checkpoint (the file as it is now is replaced). Reject: keep your "
                    "version. Its diff goes from yours to the checkpoint.")
            if isinstance(merge, bytes):
                body = (f"{why} It changed again after the command. {verb} the command's change, keep later "
                        f"changes: only the lines that changed while the command ran "
                        f"{'go back' if verb == 'Undo' else 'change again'} (a write of yours during it too), every "
                        "change made after it stays (the diff shows exactly what changes). Take the checkpoint: the "
                        "whole file is replaced by the checkpoint. Keep mine: nothing changes.")
        else:
            since = "the agent's edit" if verb == "Undo" else "the /undo"
            title = f"{shown} changed since {since}"
            why = f"{path} changed since {since} (by you, your editor, another program or another agent)."
            keep = "Keep the file as it is"
            if isinstance(merge, bytes) and verb == "Redo" and yours_too:
                body = (f"{why} Redo what the /undo took back, keep the rest: the lines the /undo changed — the "
                        "agent's change and your own changes it replaced with the checkpoint — change back to "
                        "what they were just before it, every change made since stays (the diff shows exactly "
                        "what changes). Take the checkpoint: the whole file is replaced by the file as it was just "
                        "before the /undo (the changes made since are lost). Keep the file as it is: nothing is redone.")
            elif isinstance(merge, bytes):
                body = (f"{why} {verb} the agent's change, keep the rest: only the lines the agent changed "
                        f"{'go back' if verb == 'Undo' else 'change again'}, every other change stays (the diff "
                        "shows exactly what changes). Take the checkpoint: the whole file is replaced by the "
                        "checkpoint (the other changes are lost too). Keep the file as it is: nothing is "
                        f"{'undone' if verb == 'Undo' else 'redone'}.")
            else:
                body = (f"{why} " + (f"The agent's change cannot be {'taken back' if verb == 'Undo' else 're-applied'} "
                                     f"alone: {merge}. " if merge else "")
                        + "Take the checkpoint: the file as it is now is replaced (its other changes too). Keep the "
                        "file as it is: nothing changes. The diff goes from the file as it is to the checkpoint.")
        if link_now is not None:  # the diff's "now" is the link's target, as a link is kept: say what it is
            body = (f"{path} is a symbolic link now (to {link_now}), not the file the agent left. Take the checkpoint: "
                    "the link itself is replaced by the checkpoint — where it points is never read or written. "
                    f"{keep}: the link stays. The diff goes from the link's target path to the checkpoint.")
        if on_disk:  # the question is about the disk: the editor's unsaved buffer is not touched, say so
            body += (" This is about the file on disk: your editor's buffer of it has unsaved changes, which are "
                     "left as they are; the diff goes from the file on disk.")
        options: tuple[str, ...] = (ALLOW_ONCE, REJECT_ONCE)
        names: tuple[tuple[str, str], ...] = ((ALLOW_ONCE, "Take the checkpoint"), (REJECT_ONCE, keep))
        shown_after = text(target)
        if isinstance(merge, bytes):
            options = (AGENTS_CHANGE_ONLY, *options)
            names = ((AGENTS_CHANGE_ONLY, f"{verb} the command's change, keep later changes" if uncertain
                      else "Redo what the /undo took back, keep the rest" if verb == "Redo" and yours_too
                      else f"{verb} the agent's change, keep the rest"), *names)
            shown_after = text(merge)
        body += _bom_said(current.raw if current else None, target, merge)
        ask = Ask(call_id, title, "other", [
            {"type": "content", "content": {"type": "text", "text": body}},  # the diff once: its own block
            diff_content(path, now, shown_after)], {"path": str(path)},
            options=options, names=names, locations=[{"path": str(path)}],
            kinds=((AGENTS_CHANGE_ONLY, ALLOW_ONCE),))
        return await self.approver.ask(ask)


def merge_back(base: bytes | None, current: bytes, other: bytes | None) -> bytes | str:
    """``current`` with the change ``base`` → ``other`` applied to it by a three-way merge of their
    lines (``git merge-file``: bytes as they are, so CRLF and a last line without one stay), each
    line with its own ending: the merged bytes, or why it cannot be done (the changes overlap or
    touch, a side is not text or too big, git is missing). A UTF-8 BOM is the file's property, not
    part of its first line: merged on its own (the side that changed it wins), so a BOM added or
    removed never makes the first line a change."""
    if base is None or other is None:
        return "its bytes were not kept"
    boms = [raw.startswith(UTF8_BOM) for raw in (base, current, other)]
    base, current, other = (raw[len(UTF8_BOM):] if bom else raw for raw, bom in zip((base, current, other), boms))
    bom = boms[1] if boms[1] != boms[0] else boms[2]
    if max(len(base), len(current), len(other)) > MERGE_LIMIT:
        return f"the file is larger than {MERGE_LIMIT >> 20} MiB"
    if not all(_is_text(raw) for raw in (base, current, other)):
        return "it is not UTF-8 text"
    git = shutil.which("git")
    if git is None:
        return "git, which makes the merge, is not installed"
    with tempfile.TemporaryDirectory(prefix="agent-server-merge-") as folder:  # 0700: the file's text
        names = []
        for name, raw in (("current", current), ("base", base), ("other", other)):
            path = os.path.join(folder, name)
            with open(path, "xb") as fh:
                fh.write(raw)
            names.append(path)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, "HOME": folder, "LC_ALL": "C"}
        try:
            done = subprocess.run([git, "merge-file", "-p", "-q", *names], cwd=folder, env=env,
                                  capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the merge could not run ({exc})"
    if done.returncode != 0:  # the number of conflicts, or (negative, 255) an error
        if 0 < done.returncode < 128:
            return "the file's other changes touch the same lines as the agent's change, or lines next to them"
        return f"the merge failed ({done.stderr.decode('utf-8', 'replace').strip() or done.returncode})"
    return UTF8_BOM + done.stdout if bom else done.stdout


def _bom_said(now: bytes | None, target: bytes | None, merge: bytes | str | None) -> str:
    """A sentence for a question whose sides differ in the file's BOM (a property of the file, not
    a character its diff can show), else ``""``."""
    has = [raw.startswith(UTF8_BOM) for raw in (now, target, merge) if isinstance(raw, bytes)]
    if now is None or len(set(has)) < 2:
        return ""

    def say(raw: bytes) -> str:
        return "has a UTF-8 byte order mark (BOM)" if raw.startswith(UTF8_BOM) else "has no byte order mark (BOM)"
    text = f" The file as it is {say(now)}"
    if target is not None:
        text += f"; the checkpoint {say(target)}"
    if isinstance(merge, bytes):
        text += f"; the first choice's result {say(merge)}"
    return text + " (the diff shows the text only)."


def _restored_on_disk(events: list[Any], turn: int) -> set[Path]:
    """The files the undo runs of ``turn`` last restored on disk under a buffer with unsaved text."""
    where: dict[Path, bool] = {}
    for event in events:
        data = event.data
        if event.type == "checkpoint/undo" and data.get("turn") == turn:
            for entry in data.get("files") or []:
                if isinstance(entry, dict) and entry.get("changed") and isinstance(entry.get("path"), str):
                    where[Path(entry["path"])] = entry.get("on_disk") is True
    return {path for path, on_disk in where.items() if on_disk}


def _said(path: Path, outcome: str) -> dict[str, Any]:
    return {"path": str(path), "outcome": outcome}


def _kept(uncertain: bool, answer: Answer) -> str:
    why = ("a shell command changed it, and it may have been someone else's write" if uncertain
           else "changed since the agent's edit")
    if answer.kind == "selected":
        return f"kept the user's version ({why})"
    if answer.headless:
        return (f"kept the user's version ({why}; a headless run has no one to ask, so nothing was replaced: "
                "/undo on a terminal or in an editor offers the choice)")
    return f"kept the user's version ({why}; no answer, so nothing was replaced)"


def _beneath(path: Path, roots: list[str]) -> tuple[str, list[str]]:
    """``(anchor, parts)``: the resolved root that contains ``path`` and the path's parts below it
    (taken from the path as written, never resolved); outside every root, ``/`` and all its parts."""
    lexical = os.path.normpath(str(path))
    best: tuple[str, str] | None = None
    for root in roots:
        for spelled in {os.path.normpath(root), os.path.realpath(root)}:
            if lexical.startswith(spelled.rstrip("/") + "/") and (best is None or len(spelled) > len(best[1])):
                best = (os.path.realpath(root), spelled)
    if best is None:
        return "/", [p for p in lexical.split("/") if p]
    return best[0], os.path.relpath(lexical, best[1]).split("/")


def _look(dirfd: int, name: str) -> tuple[bytes, int] | None:
    """The bytes and permission bits of the regular file ``name`` in ``dirfd`` (no link followed);
    ``None`` when absent. Raises ``OSError`` for anything else standing there."""
    try:
        st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):  # a link is its target's text, never followed
        return os.fsencode(os.readlink(name, dir_fd=dirfd)), LINK_MODE
    found = safe_fs.read_entry(dirfd, name, _READ_LIMIT)
    if found is None:
        return None
    return found[0], found[1].st_mode & 0o7777


def _same_text(buffer: bytes, disk: bytes) -> bool:
    """Whether an editor's text is the disk's bytes (the editor's text never holds the file's BOM)."""
    return buffer == disk or (disk.startswith(_BOM) and buffer == disk[len(_BOM):])


def _holds(state: FileState | None, current: FileSnapshot | None, mode: int | None) -> bool:
    """Whether the file (``current`` bytes, ``mode`` on disk) is in ``state``: bytes and mode."""
    if state is None or current is None:
        return state is None and current is None
    return state.holds(current.raw) is True and (mode is None or mode == state.mode)


def _is_text(raw: bytes | None) -> bool:
    try:
        (raw or b"").decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _remove(dirfd: int, name: str, checked: tuple[bytes, int] | None, done: str) -> str:
    """Remove a file the agent created (``/undo``) or deleted (``/redo``) — ``unlinkat`` in its folder's
    fd —, only if the disk still holds what was checked; ``done`` says which."""
    try:
        if _look(dirfd, name) != checked:
            return "not removed (it changed on disk just now)"
        if checked is None:
            return "already gone"
        os.unlink(name, dir_fd=dirfd)
    except FileNotFoundError:
        return "already gone"
    except OSError as exc:
        return f"not removed ({exc.strerror or exc})"
    return done


def _remove_folders(anchor: str, folders: list[str], count: int) -> list[str]:
    """Remove the innermost ``count`` of ``folders`` (beneath ``anchor``) that the agent's write made,
    innermost first, each only while it is empty (``rmdir``: never a folder holding anything, never
    through a link); stops at the first one that stays. Returns the paths removed."""
    removed: list[str] = []
    for depth in range(len(folders), max(len(folders) - count, 0), -1):
        try:
            dirfd = safe_fs.open_dir_beneath(anchor, folders[:depth - 1], create=False)
        except (OSError, safe_fs.PathChangedError):
            break
        try:
            os.rmdir(folders[depth - 1], dir_fd=dirfd)
        except OSError:  # not empty (the user's or another turn's files), a link now, gone
            break
        finally:
            os.close(dirfd)
        removed.append(os.path.join(anchor, *folders[:depth]))
    return removed


def _replace(dirfd: int, name: str, checked: tuple[bytes, int] | None, raw: bytes, mode: int, mode_only: bool,
             done: str) -> str:
    """Make ``name`` in ``dirfd`` hold ``raw`` with ``mode`` (``mode_only``: the bytes already are),
    only if the disk still holds what was checked."""
    try:
        if _look(dirfd, name) != checked:
            return "not restored (it changed on disk just now)"
        if mode_only:
            _chmod(dirfd, name, mode)
        elif mode == LINK_MODE:
            _link_entry(dirfd, name, raw)
        else:
            safe_fs.replace_entry(dirfd, name, raw, mode & 0o1777)
        landed = _look(dirfd, name)
    except OSError as exc:
        return f"not restored ({exc.strerror or exc})"
    if landed is None or landed[0] != raw:  # "restored" only when the disk holds it afterwards
        return "not restored (it changed on disk just now: after the write it does not hold the restore)"
    return done + _mode_note(landed[1], mode)


def _mode_note(landed: int, mode: int) -> str:
    """What an outcome adds when the file's permission bits (``landed``) are not the restore's."""
    if mode == LINK_MODE or landed == mode:
        return ""
    why = ("/undo and /redo never set the setuid or setgid bit" if landed == mode & 0o1777
           else "the permission bits could not be set")
    return f", but its mode is {landed:o}, not {mode:o} ({why})"


def _link_entry(dirfd: int, name: str, target: bytes) -> None:
    """Make ``name`` in ``dirfd`` a symbolic link to ``target``: made under a temporary name, then
    renamed over the entry (a file or link there is replaced, never followed)."""
    tmp = f".{name[:200]}.{os.getpid()}.{os.urandom(4).hex()}.link"
    os.symlink(target, tmp, dir_fd=dirfd)
    try:
        os.rename(tmp, name, src_dir_fd=dirfd, dst_dir_fd=dirfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dirfd)
        except OSError:
            pass
        raise


def _chmod(dirfd: int, name: str, mode: int) -> None:
    """Set the permission bits of the regular file ``name`` in ``dirfd`` through its own descriptor
    (a link there is refused, never followed); never setuid or setgid."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dirfd)
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode) and (os.fstat(fd).st_mode & 0o7777) != (mode & 0o1777):
            os.fchmod(fd, mode & 0o1777)
    finally:
        os.close(fd)
