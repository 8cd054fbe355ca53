"""``/undo`` and ``/redo`` planned from the log alone.

Role: from the log's ``checkpoint/file`` events (one per file the agent changed: ``{turn, call_id,
path, before, after, source}``, ``before``/``after`` a ``FileState`` JSON or ``null``: absent;
``uncertain: true`` when nothing shows the agent's own call wrote it) and its ``checkpoint/undo`` /
``checkpoint/redo`` events (``{turn, files: [{path, outcome, changed, replaced?}], done}``),
``history`` says which turns changed files, which are undone and what can be redone; ``plan_undo`` /
``plan_redo`` say which turn ``/undo`` / ``/redo`` takes back now and how each file must be restored
(guarded: only a file that still holds ``expect``).

Must never: read anything but the events (no disk, no clock): executing a plan is the caller's.

Rules: ``/undo`` takes back the newest turn with changes that is not undone yet. A run *counts*
(``done``) when it changed a file or the user held back none of its restores; one that changed no
file because the user said no (Keep mine, a rejected proposal, no answer) or changed the file while
it ran (a keystroke during the review: stale; a save just before the write) is no undo: the turn
stays the next ``/undo``'s. A counted undo makes the turn undone — for the files it changed; the others
keep what they hold, and ``/undo`` again steps one more turn back. The files an undo changed
accumulate over the runs of that turn (a run cut off by a crash counts as not done, its restores
kept: ``checkpoint/restored``; a redo cut off so: the next ``/redo`` leaves what it re-applied).
``/redo`` re-applies the turn the last counted ``/undo`` that changed files took back, only the files the undo changed — each as it was just before that undo:
``replaced`` (where the user took the checkpoint over their own change: the ``FileState`` it held
then, ``null`` absent), else what the agent left; a file the undo did not change is left alone. An
undo that took back the agent's change alone (a three-way merge over the file's other changes) names
what it left (``left``): the redo expects that, not the turn's ``before``. A
redo counts by the same rule. An agent change made after an undo clears what could be redone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from agent_server.checkpoints.blobs import FileState

#: A restore the editor answered "applied" but whose file, read back, is not the checkpoint (a client
#: that put the hunks elsewhere, a formatter, a keystroke just then): not done, /undo asks again.
NOT_AS_IT_WAS = "not restored as it was"
#: What a restore's outcome starts with when it changed the file (``/undo`` and ``/redo`` alike).
CHANGED_OUTCOMES = ("restored", "brought back", "removed (the agent had created it)",
                    "created again (the agent had created it)", "deleted again (the agent had deleted it)")
#: … and when the user held it back: said no (Keep mine, a rejected proposal, an unanswered
#: question) or changed the file while the run ran (a keystroke during the review, a save).
HELD_BACK_OUTCOMES = ("kept the user's version", "not restored (the user rejected the restore in the editor",
                      "not restored (stale", "not restored (it changed on disk just now)",
                      "not removed (it changed on disk just now)", NOT_AS_IT_WAS)
#: The outcome of a file ``/redo`` leaves alone because the undo it redoes did not change it.
LEFT_OUTCOME = "left as it is (the /undo did not change it)"
#: … and of one a ``/redo`` cut off by a crash had already re-applied (``checkpoint/restored``).
REDONE_OUTCOME = "already redone (the interrupted /redo re-applied it)"


@dataclass(frozen=True)
class FileChange:
    """A file's change over one turn: ``before`` the turn's first change, ``after`` its last;
    ``uncertain`` when any of its changes may not have been the agent's, or when one change does not
    start where the previous ended (someone else wrote it between two calls)."""

    path: Path
    before: FileState | None
    after: FileState | None
    uncertain: bool = False
    folders: int = 0
    """A file the turn created: how many of its enclosing folders (innermost up) its creation made."""
    bomless: bool = False
    """An ``edit`` of a log written before checkpoints held the file's bytes (no ``file_bytes``): one
    made through an editor kept the editor's text, without the file's BOM."""


@dataclass
class TurnChanges:
    """The files one agent turn changed, in the order they were first changed."""

    turn: int
    files: dict[Path, FileChange] = field(default_factory=dict)


@dataclass(frozen=True)
class Restore:
    """One guarded restore: replace ``path`` only if it holds ``expect``; make it ``target``
    (``None``: remove it; ``expect`` ``None``: it must not exist). ``uncertain``: the change may be
    someone else's, so it is asked about even when the file still holds ``expect``. ``leave``: the
    file is not touched (``/redo`` of a file its undo did not change). ``replaced``: a ``/redo`` whose
    undo took the whole checkpoint over another change (the user's): it re-applies that change too."""

    path: Path
    expect: FileState | None
    target: FileState | None
    uncertain: bool = False
    leave: bool = False
    replaced: bool = False
    redone: bool = False
    """A ``leave`` file a ``/redo`` of the turn cut off by a crash already re-applied."""
    folders: int = 0
    """``/undo`` of a file the agent created: how many of its enclosing folders (innermost up) the agent's
    write made — removed after it when empty then (never one holding anything)."""
    bomless: bool = False
    """The states may lack the file's BOM (``FileChange.bomless``): a BOM the file has is kept."""


@dataclass(frozen=True)
class Run:
    """One ``/undo`` or ``/redo`` as logged: its turn, whether it counted, whether it changed a file
    (``files``: which), whether a crash cut it off (``interrupted``: closed on load, not done)."""

    which: str
    turn: int
    done: bool
    changed: bool
    files: tuple[Path, ...] = ()
    interrupted: bool = False


@dataclass
class History:
    """What the log says about the checkpoints: ``turns`` with changes (oldest first), the ``undone``
    turns, the ``redo`` stack (newest last), per turn the files its undos changed and not redone
    (``undone_files``) and what they replaced that was not the agent's (``replaced``), and the last
    run of each kind since the agent last changed a file (``last``)."""

    turns: list[TurnChanges]
    undone: set[int]
    redo: list[int]
    undone_files: dict[int, set[Path]]
    replaced: dict[int, dict[Path, FileState | None]]
    last: dict[str, Run]
    left: dict[int, dict[Path, FileState]] = field(default_factory=dict)
    """Per turn, what an undo that took back only the agent's change (a merge) left in a file."""
    redone: dict[int, set[Path]] = field(default_factory=dict)
    """Per turn still undone, the files a ``/redo`` cut off by a crash re-applied (the next
    ``/redo`` leaves them: ``Restore.redone``)."""
    interrupted: dict[int, Run] = field(default_factory=dict)
    """Per turn, a run of it a crash cut off, until a run of that turn counts."""


def file_changed(entry: dict[str, Any]) -> bool:
    """Whether a run changed this file (``changed``; a log written before it: from the outcome)."""
    if isinstance(entry.get("changed"), bool):
        return entry["changed"]
    return str(entry.get("outcome", "")).startswith(CHANGED_OUTCOMES)


def file_held_back(entry: dict[str, Any]) -> bool:
    """Whether the user held this file's restore back (Keep mine, rejected, no answer, stale)."""
    return str(entry.get("outcome", "")).startswith(HELD_BACK_OUTCOMES)


def run_counts(files: Sequence[dict[str, Any]]) -> bool:
    """A run counts unless it changed no file because the user held a restore back."""
    return any(file_changed(f) for f in files) or not any(file_held_back(f) for f in files)


def _files(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in data.get("files") or [] if isinstance(f, dict) and "path" in f]


def history(events: Sequence[Any]) -> History:
    """Read the ``checkpoint/*`` events of a log (see the module's rules)."""
    turns: dict[int, TurnChanges] = {}
    undone: set[int] = set()
    redo: list[int] = []
    undone_files: dict[int, set[Path]] = {}
    replaced: dict[int, dict[Path, FileState | None]] = {}
    last: dict[str, Run] = {}
    left: dict[int, dict[Path, FileState]] = {}
    redone: dict[int, set[Path]] = {}
    interrupted: dict[int, Run] = {}
    for event in events:
        data = event.data
        if event.type == "checkpoint/file":
            turn = int(data["turn"])
            redo.clear()  # the agent changed files again: what was undone stays undone
            last.clear()
            entry = turns.setdefault(turn, TurnChanges(turn))
            path = Path(data["path"])
            before, after = FileState.from_json(data.get("before")), FileState.from_json(data.get("after"))
            uncertain = data.get("uncertain") is True
            bomless = data.get("source") == "edit" and data.get("file_bytes") is not True
            if path in entry.files:
                first = entry.files[path]
                # a change that does not start where the previous one ended: someone else wrote the
                # file between the two calls (the user's save), and the turn's change spans it
                entry.files[path] = FileChange(path, first.before, after,
                                               first.uncertain or uncertain or first.after != before, first.folders,
                                               first.bomless or bomless)
            else:
                folders = data.get("folders") if before is None and isinstance(data.get("folders"), int) else 0
                entry.files[path] = FileChange(path, before, after, uncertain, max(0, folders), bomless)
        elif event.type in ("checkpoint/undo", "checkpoint/redo"):
            which, turn, files = event.type.split("/")[1], int(data["turn"]), _files(data)
            done = data["done"] if isinstance(data.get("done"), bool) else run_counts(files)
            changed = {Path(f["path"]) for f in files if file_changed(f)}
            cut = data.get("interrupted") is True and not done
            last[which] = Run(which, turn, done, bool(changed),
                              tuple(Path(f["path"]) for f in files if file_changed(f)), cut)
            if cut:
                interrupted[turn] = last[which]
            elif done:
                interrupted.pop(turn, None)
            if which == "undo":
                undone_files.setdefault(turn, set()).update(changed)
                took = replaced.setdefault(turn, {})
                for f in files:
                    if "replaced" in f and Path(f["path"]) in changed:
                        took[Path(f["path"])] = FileState.from_json(f["replaced"])
                    merged = FileState.from_json(f.get("left")) if Path(f["path"]) in changed else None
                    if merged is not None:
                        left.setdefault(turn, {})[Path(f["path"])] = merged
                    elif Path(f["path"]) in changed:
                        left.get(turn, {}).pop(Path(f["path"]), None)
                redone.get(turn, set()).difference_update(changed)
                if done:
                    undone.add(turn)
                    if undone_files[turn] and turn not in redo:
                        redo.append(turn)
            else:
                if turn in undone_files:
                    undone_files[turn] -= changed
                    for path in changed:
                        replaced.get(turn, {}).pop(path, None)
                        left.get(turn, {}).pop(path, None)
                if done:
                    redone.pop(turn, None)
                else:
                    redone.setdefault(turn, set()).update(changed)
                if done:
                    undone.discard(turn)
                    if redo and redo[-1] == turn:
                        redo.pop()
    for entry in turns.values():  # a file put back exactly as it was is no change
        entry.files = {p: c for p, c in entry.files.items() if c.before != c.after}
    ordered = [turns[t] for t in sorted(turns) if turns[t].files]
    return History(ordered, undone, redo, undone_files, replaced, last, left, redone, interrupted)


def changed_turns(events: Sequence[Any]) -> list[TurnChanges]:
    """The turns that changed files, oldest first (for ``/checkpoints``, shown newest first)."""
    return history(events).turns


def plan_undo(events: Sequence[Any]) -> tuple[int, list[Restore]] | None:
    """``(turn, restores)`` for the next ``/undo``, or ``None`` when there is nothing to undo."""
    past = history(events)
    candidates = [t for t in past.turns if t.turn not in past.undone]
    if not candidates:
        return None
    last = candidates[-1]
    return last.turn, [Restore(c.path, c.after, c.before, c.uncertain, folders=c.folders if c.before is None else 0,
                               bomless=c.bomless)
                       for c in last.files.values()]


def plan_redo(events: Sequence[Any]) -> tuple[int, list[Restore]] | None:
    """``(turn, restores)`` for the next ``/redo``, or ``None`` when nothing can be redone: the
    files the turn's undo changed are restored, the others are ``leave`` (not touched)."""
    past = history(events)
    if not past.redo:
        return None
    by_turn = {t.turn: t for t in past.turns}
    entry = by_turn.get(past.redo[-1])
    if entry is None:
        return None
    took = past.replaced.get(entry.turn, {})  # the user's bytes the undo replaced come back, not the agent's
    undid = past.undone_files.get(entry.turn, set())
    redid = past.redone.get(entry.turn, set())  # re-applied by a redo a crash cut off
    merged = past.left.get(entry.turn, {})  # an undo of the agent's change alone left the merge, not ``before``
    # an uncertain file whose undo kept what it replaced gets those very bytes back: over what the undo
    # itself wrote (checked at the redo: else it is a file changed since, asked) nothing can be lost
    return entry.turn, [Restore(c.path, merged.get(c.path, c.before), took.get(c.path, c.after),
                                c.uncertain and c.path not in took, leave=c.path not in undid,
                                replaced=c.path in took and c.path not in merged and took[c.path] != c.after,
                                redone=c.path not in undid and c.path in redid,
                                bomless=c.bomless)
                        for c in entry.files.values()]
