"""Every model request a session log accounts for, rebuilt byte for byte from the log alone.

Role: ``logged_requests(events)`` walks the log and yields one ``LoggedRequest`` per HTTP request
the agent made (or may have made), each with the exact body ``encode_body(request_body(events,
seq))`` — the same two functions the agent used to build what it sent. Retries re-send their
step's body unchanged, so every attempt of a step has that body. The summarising request of a
compaction (``compaction/start``) is listed too, in log order, rebuilt by ``compaction_body``.

Must never: read anything but the events (no config, no clock, no network), or guess a body.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from agent_server.agent.request import compaction_body, request_body
from agent_server.llm import encode_body
from agent_server.session import SessionEvent


@dataclass(frozen=True)
class LoggedRequest:
    """One model request of the log.

    ``index``: 1-based order of the request in the log; ``step_index``: 1-based order of its step
    (``step/start``) in the log; ``seq``: that ``step/start``'s seq; ``turn``, ``step`` (within the
    turn), ``attempt`` (1-based try of the step); ``outcome``: ``"ok"``, ``"interrupted"``
    (cancelled while streaming), ``"error:<CODE>"`` (a failed try), or ``"unknown"`` (the process
    died with the step open: the request may or may not have gone out); ``certain``: ``False``
    when the log cannot tell whether the request reached the endpoint (``unknown``, or cancelled
    before anything came back); ``body``: the exact bytes; ``kind``: ``"step"``, or
    ``"compaction"`` for a summarising request (then ``seq`` is its ``compaction/start``,
    ``step_index`` that of the last step before it, ``step`` the step it was made for);
    ``problem``: see ``request_problem`` (a rebuilt body is checked, not only its bytes).
    """

    index: int
    step_index: int
    seq: int
    turn: int
    step: int
    attempt: int
    outcome: str
    certain: bool
    body: bytes
    kind: str = "step"
    problem: str | None = None
    """Why a provider would refuse this body (a tool call without its result, a result without its
    call, an empty assistant message), or ``None`` when it keeps those invariants."""

    @property
    def sha256(self) -> str:
        """Hex sha256 of ``body``."""
        return hashlib.sha256(self.body).hexdigest()

    def as_json(self) -> dict[str, Any]:
        """The ``replay --json`` line: the fields above, ``sha256``, ``bytes`` and ``body`` as text."""
        return {"request": self.index, "step_index": self.step_index, "seq": self.seq, "turn": self.turn,
                "step": self.step, "attempt": self.attempt, "outcome": self.outcome, "certain": self.certain,
                "sha256": self.sha256, "bytes": len(self.body), "kind": self.kind,
                "valid": self.problem is None, "problem": self.problem, "body": self.body.decode("utf-8")}


def logged_requests(events: Sequence[SessionEvent], *, inherited: bool = False) -> list[LoggedRequest]:
    """The requests of ``events`` (oldest first), in the order they were made.

    A step's requests are its failed tries (``assistant/attempt``) and its final one (its
    ``assistant`` event, interrupted ones included). A step with no ``assistant`` event in a turn
    that never ended, or was closed ``interrupted`` on load, adds one ``unknown`` request.
    In a fork's log (``session/header.forked_from.seq``), the requests of the history copied from
    the parent were made by the parent: they are left out unless ``inherited`` (``step_index``
    still counts their steps). Raises ``RequestRebuildError`` for a ``step/start`` with no
    ``request/header`` before it.
    """
    exits = {e.data.get("turn"): e.data.get("exit") for e in events if e.type == "turn/end"}
    forked = events[0].data.get("forked_from") if events and events[0].type == "session/header" else None
    copied = int(forked.get("seq") or 0) if isinstance(forked, dict) and not inherited else 0
    out: list[LoggedRequest] = []
    step_index = 0
    for start, outcomes in _units(events):
        turn = int(start.data.get("turn") or 0)
        if start.seq <= copied:
            step_index += start.type == "step/start"
            continue
        if start.type == "compaction/start":
            if not outcomes:  # the process died while it was being made
                outcomes.append(("unknown", False))
            built = compaction_body(events, start.seq)
            kind = "compaction"
        else:
            step_index += 1
            if not any(o[0] in ("ok", "interrupted") for o in outcomes) and exits.get(turn) in (None, "interrupted"):
                outcomes.append(("unknown", False))
            if not outcomes:
                continue
            built = request_body(events, start.seq)
            kind = "step"
        body, problem = encode_body(built), request_problem(built)
        for attempt, (outcome, certain) in enumerate(outcomes, start=1):
            out.append(LoggedRequest(len(out) + 1, step_index, start.seq, turn, int(start.data.get("step") or 0),
                                     attempt, outcome, certain, body, kind, problem))
    return out


def request_problem(body: dict[str, Any]) -> str | None:
    """The first invariant a chat request ``body`` breaks, else ``None``: every ``tool_calls`` entry
    of an assistant message is answered by exactly one ``tool`` message right after it (before any
    other message), every ``tool`` message answers such a call, and no assistant message is empty
    (invariants 2 and 10 as a provider checks them: it answers HTTP 400 otherwise)."""
    pending: list[str] = []
    for index, message in enumerate(body.get("messages") or []):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return f"messages[{index}]: a tool result for {call_id!r}, which is no pending call"
            pending.remove(call_id)
            continue
        if pending:
            return f"messages[{index}]: tool call(s) {', '.join(pending)} have no result before this message"
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if not calls and not message.get("content"):
                return f"messages[{index}]: an empty assistant message"
            pending = [call.get("id") for call in calls]
    if pending:
        return f"the request ends with tool call(s) {', '.join(pending)} that have no result"
    return None


def _units(events: Sequence[SessionEvent]) -> Iterator[tuple[SessionEvent, list[tuple[str, bool]]]]:
    """Each ``step/start`` and ``compaction/start`` with the ``(outcome, certain)`` of the tries
    logged for it (a compaction's: ``compaction/attempt`` and ``compaction/summary``)."""
    current: tuple[SessionEvent, list[tuple[str, bool]]] | None = None
    compaction: tuple[SessionEvent, list[tuple[str, bool]]] | None = None
    for event in events:
        if event.type == "compaction/start":
            if current is not None:  # the step before it was made (and finished) first
                yield current
                current = None
            compaction = (event, [])
        elif compaction is not None and event.type in ("compaction/attempt", "compaction/summary"):
            if event.type == "compaction/summary":
                compaction[1].append(("ok", True))
            elif event.data.get("cancelled"):
                compaction[1].append(("interrupted", False))
            else:
                compaction[1].append((f"error:{(event.data.get('error') or {}).get('code', 'ERROR')}", True))
        if compaction is not None and event.type in ("compaction/end", "step/start", "turn/end"):
            yield compaction
            compaction = None
        if event.type == "step/start":
            if current is not None:
                yield current
            current = (event, [])
        elif current is None:
            continue
        elif event.type == "assistant/attempt":
            code = (event.data.get("error") or {}).get("code", "ERROR")
            current[1].append((f"error:{code}", True))
        elif event.type == "assistant":
            if event.data.get("interrupted"):
                got_something = bool(event.data.get("text") or event.data.get("reasoning"))
                current[1].append(("interrupted", got_something))
            else:
                current[1].append(("ok", True))
    if compaction is not None:
        yield compaction
    if current is not None:
        yield current
