"""``/undo`` and ``/redo`` planned from the log alone.

Role: from the log's ``checkpoint/file`` events (one per file the agent changed: ``{turn, call_id,
path, before, after, source}``, ``before``/``after`` a ``FileState`` JSON or ``null``: absent;
``uncertain: true`` when nothing shows the agent's own call wrote it) and its ``checkpoint/undo`` /
``checkpoint/redo`` events (``{turn, files: [{path, outcome, replaced?}]}``), ``changed_turns`` lists
the turns that changed files, ``plan_undo`` / ``plan_redo`` say which turn ``/undo`` / ``/redo``
takes back now and how each file must be restored (guarded: only a file that still holds ``expect``).

Must never: read anything but the events (no disk, no clock): executing a plan is the caller's.

Rules: ``/undo`` takes back the newest turn with changes that is not undone yet; ``/undo`` again
steps one more turn back. ``/redo`` re-applies the turn the last ``/undo`` took back: each file as it
was just before that undo — ``replaced`` (the undo's outcome names it where the user took the
checkpoint over their own change: the ``FileState`` it held then, ``null`` absent), else what the
agent left. An agent change made after an undo clears what could be redone (as in every editor).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from agent_server.checkpoints.blobs import FileState


@dataclass(frozen=True)
class FileChange:
    """A file's change over one turn: ``before`` the turn's first change, ``after`` its last;
    ``uncertain`` when any of its changes may not have been the agent's, or when one change does not
    start where the previous ended (someone else wrote it between two calls)."""

    path: Path
    before: FileState | None
    after: FileState | None
    uncertain: bool = False


@dataclass
class TurnChanges:
    """The files one agent turn changed, in the order they were first changed."""

    turn: int
    files: dict[Path, FileChange] = field(default_factory=dict)


@dataclass(frozen=True)
class Restore:
    """One guarded restore: replace ``path`` only if it holds ``expect``; make it ``target``
    (``None``: remove it; ``expect`` ``None``: it must not exist). ``uncertain``: the change may be
    someone else's, so it is asked about even when the file still holds ``expect``."""

    path: Path
    expect: FileState | None
    target: FileState | None
    uncertain: bool = False


_Replaced = dict[int, dict[Path, FileState | None]]


def _turn_changes(events: Sequence[Any]) -> tuple[list[TurnChanges], set[int], list[int], _Replaced]:
    """``(turns with changes, the undone turns, the redo stack, what each turn's last undo replaced
    that was not the agent's)`` — newest last on the stack."""
    turns: dict[int, TurnChanges] = {}
    undone: set[int] = set()
    redo: list[int] = []
    replaced: _Replaced = {}
    for event in events:
        data = event.data
        if event.type == "checkpoint/file":
            turn = int(data["turn"])
            redo.clear()  # the agent changed files again: what was undone stays undone
            entry = turns.setdefault(turn, TurnChanges(turn))
            path = Path(data["path"])
            before, after = FileState.from_json(data.get("before")), FileState.from_json(data.get("after"))
            uncertain = data.get("uncertain") is True
            if path in entry.files:
                first = entry.files[path]
                # a change that does not start where the previous one ended: someone else wrote the
                # file between the two calls (the user's save), and the turn's change spans it
                entry.files[path] = FileChange(path, first.before, after,
                                               first.uncertain or uncertain or first.after != before)
            else:
                entry.files[path] = FileChange(path, before, after, uncertain)
        elif event.type == "checkpoint/undo":
            undone.add(int(data["turn"]))
            redo.append(int(data["turn"]))
            replaced[int(data["turn"])] = {Path(f["path"]): FileState.from_json(f["replaced"])
                                           for f in data.get("files") or [] if isinstance(f, dict) and "replaced" in f}
        elif event.type == "checkpoint/redo":
            undone.discard(int(data["turn"]))
            if redo and redo[-1] == int(data["turn"]):
                redo.pop()
    for entry in turns.values():  # a file put back exactly as it was is no change
        entry.files = {p: c for p, c in entry.files.items() if c.before != c.after}
    ordered = [turns[t] for t in sorted(turns) if turns[t].files]
    return ordered, undone, redo, replaced


def changed_turns(events: Sequence[Any]) -> list[TurnChanges]:
    """The turns that changed files, oldest first (for ``/checkpoints``, shown newest first)."""
    return _turn_changes(events)[0]


def plan_undo(events: Sequence[Any]) -> tuple[int, list[Restore]] | None:
    """``(turn, restores)`` for the next ``/undo``, or ``None`` when there is nothing to undo."""
    turns, undone, _, _ = _turn_changes(events)
    candidates = [t for t in turns if t.turn not in undone]
    if not candidates:
        return None
    last = candidates[-1]
    return last.turn, [Restore(c.path, c.after, c.before, c.uncertain) for c in last.files.values()]


def plan_redo(events: Sequence[Any]) -> tuple[int, list[Restore]] | None:
    """``(turn, restores)`` for the next ``/redo``, or ``None`` when nothing can be redone."""
    turns, _, redo, replaced = _turn_changes(events)
    if not redo:
        return None
    by_turn = {t.turn: t for t in turns}
    entry = by_turn.get(redo[-1])
    if entry is None:
        return None
    took = replaced.get(entry.turn, {})  # the user's bytes the undo replaced come back, not the agent's
    return entry.turn, [Restore(c.path, c.before, took.get(c.path, c.after), c.uncertain) for c in entry.files.values()]
