"""Repeated identical tool calls: a soft reminder at the 3rd, 5th and 8th (DESIGN.md §8).

Role: ``repeat_reminder(events, turn, name, arguments, call_seq)`` counts the ``tool/call`` events
of ``turn`` with the same tool name and the same arguments (as JSON: key order and spacing do not
count) up to the call logged at
``call_seq``, and returns the reminder to append to that call's result (``""`` otherwise). The
pipeline appends it before logging ``tool/result``, so the model sees it and replay holds.
``RepeatCounter`` gives the same counts to the pipeline without a walk of the turn per call (a
walk per call made an answer of 10,000 calls quadratic, issue 32 §7): it walks a turn once, then
counts the calls as they are committed (in model order, one result each: invariants 2 and 3).

Must never: block, change, or skip a call — it only adds words to a result.
"""

from __future__ import annotations

import json
from typing import Sequence

from agent_server.session import SessionEvent

REMIND_AT = (3, 5, 8)
"""Which identical call of a turn gets the reminder."""


def repeat_count(events: Sequence[SessionEvent], turn: int, name: str, arguments: str, call_seq: int) -> int:
    """How many ``tool/call``\\s of ``turn`` up to ``call_seq`` have this ``name`` and ``arguments``."""
    count = 0
    wanted = same_arguments(arguments)
    for event in reversed(events):
        if event.type == "turn/start" and event.data.get("turn") == turn:
            break
        if (event.type == "tool/call" and event.seq <= call_seq and event.data.get("turn") == turn
                and event.data.get("name") == name and same_arguments(event.data.get("arguments", "")) == wanted):
            count += 1
    return count


def same_arguments(arguments: str) -> str:
    """A canonical form of a call's JSON arguments (key order and spacing do not make a call new);
    text that is not JSON stands for itself."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments


class RepeatCounter:
    """``repeat_count`` for calls committed in log order, in O(1) work per call (plus one walk of
    the turn the first time it is asked about it). ``walked`` counts the events walked."""

    def __init__(self) -> None:
        self.turn: int | None = None
        self.last_seq = 0
        self.counts: dict[tuple[str, str], int] = {}
        self.walked = 0

    def count(self, events: Sequence[SessionEvent], turn: int, name: str, arguments: str, call_seq: int) -> int:
        key = (name, same_arguments(arguments))
        if turn != self.turn or call_seq <= self.last_seq:  # a new turn (or out of order): walk it once
            self.turn, self.counts = turn, {}
            for event in reversed(events):
                self.walked += 1
                if event.type == "turn/start" and event.data.get("turn") == turn:
                    break
                if event.type == "tool/call" and event.seq < call_seq and event.data.get("turn") == turn:
                    seen = (event.data.get("name"), same_arguments(event.data.get("arguments", "")))
                    self.counts[seen] = self.counts.get(seen, 0) + 1  # type: ignore[index]
        self.last_seq = call_seq
        self.counts[key] = self.counts.get(key, 0) + 1
        return self.counts[key]


def repeat_reminder(events: Sequence[SessionEvent], turn: int, name: str, arguments: str, call_seq: int,
                    counter: RepeatCounter | None = None) -> str:
    """The reminder for the call at ``call_seq`` when it is the 3rd, 5th or 8th identical one, else
    ``""``; ``counter``: count with it (calls asked about in log order) instead of a walk."""
    count = (counter.count(events, turn, name, arguments, call_seq) if counter is not None
             else repeat_count(events, turn, name, arguments, call_seq))
    if count not in REMIND_AT:
        return ""
    return (f"\n\n[agent-server reminder] This is call number {count} of {name} with exactly these arguments in "
            "this turn. Its result will not change unless something else changed in between: use the results "
            "you already have, or try a different approach.")
