"""Where a session may be forked, and the history a fork starts from.

Role: a fork is a new session whose log begins with its own ``session/header`` (saying where it
came from: ``forked_from {session_id, turn, seq}``) followed by the parent's events up to the end
of a closed turn, copied verbatim — same types, seqs, times and data — so the projection, the
request bodies and the replay of the fork are those of the parent at that point. ``fork_history``
chooses that prefix; ``EventLog.create_from`` writes it.

Must never: change the parent's log, or cut a turn (or a compaction) in the middle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from agent_server.session.events import SessionEvent


class ForkError(Exception):
    """The fork point named does not exist: ``turn`` is not a closed turn of the parent."""


@dataclass(frozen=True)
class ForkPoint:
    """``turn``: the last turn the fork keeps (``None``: the parent had no closed turn);
    ``seq``: the last parent event copied (1: none but the header); ``history``: the copied
    events (``seq`` 2 … ``seq``)."""

    turn: int | None
    seq: int
    history: tuple[SessionEvent, ...]


def closed_turns(events: Sequence[SessionEvent]) -> dict[int, int]:
    """Turn number → seq of its ``turn/end``, for every turn that ended."""
    return {int(e.data.get("turn") or 0): e.seq for e in events if e.type == "turn/end"}


def _busy(events: Sequence[SessionEvent]) -> bool:
    """Whether a turn or a compaction is open at the end of ``events``."""
    for event in reversed(events):
        if event.type in ("turn/end", "compaction/end"):
            return False
        if event.type in ("turn/start", "compaction/start"):
            return True
    return False


def fork_history(events: Sequence[SessionEvent], turn: int | None = None) -> ForkPoint:
    """The prefix of the parent's ``events`` a fork starts from.

    ``turn`` given: everything up to and including that turn's ``turn/end``. ``turn`` omitted:
    the whole log when nothing is running, else up to the ``turn/end`` of the last closed turn
    (a turn or ``/compact`` in progress is left out whole). Raises ``ForkError`` when ``turn``
    did not end (or never started).
    """
    ended = closed_turns(events)
    if turn is not None:
        if turn not in ended:
            known = ", ".join(str(t) for t in sorted(ended)) or "none"
            raise ForkError(f"turn {turn} is not a closed turn of this session (closed turns: {known})")
        cut = ended[turn]
    elif not _busy(events):
        cut = events[-1].seq
        turn = max(ended) if ended else None
    elif ended:
        turn = max(ended)
        cut = ended[turn]
    else:
        cut = 1
    history = tuple(e for e in events if 1 < e.seq <= cut)
    return ForkPoint(turn, cut, history)
