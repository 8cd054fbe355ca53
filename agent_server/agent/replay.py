"""Every model request a session log accounts for, rebuilt byte for byte from the log alone.

Role: ``logged_requests(events)`` walks the log and yields one ``LoggedRequest`` per HTTP request
the agent made (or may have made), each with the exact body ``encode_body(request_body(events,
seq))`` — the same two functions the agent used to build what it sent (image references resolved from the session folder when
``images`` is given: ``session.images``). Retries re-send their
step's body unchanged, so every attempt of a step has that body. The summarising request of a
compaction (``compaction/start``) is listed too, in log order, rebuilt by ``compaction_body``.

``iter_requests(events)`` yields the same requests one at a time, built by the session's memo
(``RequestMemo``: each message projected and encoded once, not once per request), so the whole
replay costs the log plus one body, and ``iter_requests(events, step=N)`` builds one body only
(``tests/agent/test_replay_stream.py`` holds it equal to ``logged_requests`` and bounds its memory).

Must never: read anything but the events (no config, no clock, no network), or guess a body.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from agent_server.agent.request import RequestRebuildError, compaction_body, compaction_body_of, request_body
from agent_server.agent.request_memo import RequestMemo
from agent_server.llm import encode_body
from agent_server.session import SessionEvent
from agent_server.session.images import ImageMissing


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


def logged_requests(events: Sequence[SessionEvent], *, inherited: bool = False,
                    images: Callable[[bytes], bytes] | None = None) -> list[LoggedRequest]:
    """The requests of ``events`` (oldest first), in the order they were made, each body built by
    the pure functions (``request_body``, ``compaction_body``): the reference ``iter_requests``
    equals.

    A step's requests are its failed tries (``assistant/attempt``) and its final one (its
    ``assistant`` event, interrupted ones included). A step with no ``assistant`` event in a turn
    that never ended, or was closed ``interrupted`` on load, adds one ``unknown`` request.
    In a fork's log (``session/header.forked_from.seq``), the requests of the history copied from
    the parent were made by the parent: they are left out unless ``inherited`` (``step_index``
    still counts their steps). ``images``: ``ImageStore.resolve`` of the session's folder, which
    turns the image references of a body into the bytes sent (without it they stay references).
    Raises ``RequestRebuildError`` for a ``step/start`` with no ``request/header`` before it, or
    an image the folder does not hold as the log names it.
    """
    out: list[LoggedRequest] = []
    for unit in _requests(events, inherited):
        start, kind = unit[0], unit[1]
        built = compaction_body(events, start.seq) if kind == "compaction" else request_body(events, start.seq)
        out += _made(unit, _resolved(encode_body(built), images), request_problem(built))
    return out


def _resolved(body: bytes, images: Callable[[bytes], bytes] | None) -> bytes:
    if images is None:
        return body
    try:
        return images(body)
    except ImageMissing as exc:
        raise RequestRebuildError(str(exc)) from None


def iter_requests(events: Sequence[SessionEvent], *, inherited: bool = False,
                  step: int | None = None, images: Callable[[bytes], bytes] | None = None) -> Iterator[LoggedRequest]:
    """``logged_requests(events, inherited=…)`` one request at a time, the bodies built by one
    ``RequestMemo`` over the growing prefix of ``events`` (cost: the log's messages encoded once,
    plus each body's bytes when it is yielded; memory: the memo plus one body). With ``step``, only
    the requests of that step (``kind == "step"``, ``step_index == step``) are yielded and no other
    body is built. Raises ``RequestRebuildError`` as ``logged_requests`` does."""
    memo, problems = RequestMemo(), _ProblemFold()
    prefix: list[SessionEvent] = []
    taken = 0  # events of ``events`` moved into ``prefix``
    for unit in _requests(events, inherited):
        start, kind, step_index = unit[0], unit[1], unit[3]
        if step is not None and (kind != "step" or step_index != step):
            continue
        upto = start.seq - 1 if kind == "compaction" else start.seq
        while taken < len(events) and events[taken].seq <= upto:
            prefix.append(events[taken])
            taken += 1
        if kind == "compaction":
            built = compaction_body_of(memo.surface(prefix), start, memo.transcript)
            body, problem = encode_body(built), request_problem(built)
        else:
            body = memo.request(prefix, start.seq)
            problem = problems.of(memo.messages, memo.messages_kept)
        yield from _made(unit, _resolved(body, images), problem)


def request_steps(events: Sequence[SessionEvent], *, inherited: bool = False) -> list[int]:
    """The ``step_index`` of every request of ``events`` (as ``logged_requests`` would list them),
    without building a body."""
    return [unit[3] for unit in _requests(events, inherited) for _ in unit[4]]


_Unit = tuple  # (start event, kind, index of its first request, step_index, [(outcome, certain)…])


def _requests(events: Sequence[SessionEvent], inherited: bool) -> Iterator[_Unit]:
    """Each step or compaction of ``events`` that made requests, with what ``LoggedRequest`` needs
    besides the body."""
    exits = {e.data.get("turn"): e.data.get("exit") for e in events if e.type == "turn/end"}
    forked = events[0].data.get("forked_from") if events and events[0].type == "session/header" else None
    copied = int(forked.get("seq") or 0) if isinstance(forked, dict) and not inherited else 0
    made = 0
    step_index = 0
    for start, outcomes in _units(events):
        turn = int(start.data.get("turn") or 0)
        if start.seq <= copied:
            step_index += start.type == "step/start"
            continue
        if start.type == "compaction/start":
            if not outcomes:  # the process died while it was being made
                outcomes.append(("unknown", False))
            kind = "compaction"
        else:
            step_index += 1
            if not any(o[0] in ("ok", "interrupted") for o in outcomes) and exits.get(turn) in (None, "interrupted"):
                outcomes.append(("unknown", False))
            if not outcomes:
                continue
            kind = "step"
        yield start, kind, made + 1, step_index, outcomes
        made += len(outcomes)


def _made(unit: _Unit, body: bytes, problem: str | None) -> list[LoggedRequest]:
    start, kind, first, step_index, outcomes = unit
    turn, step = int(start.data.get("turn") or 0), int(start.data.get("step") or 0)
    return [LoggedRequest(first + i, step_index, start.seq, turn, step, i + 1, outcome, certain, body, kind, problem)
            for i, (outcome, certain) in enumerate(outcomes)]


def request_problem(body: dict[str, Any]) -> str | None:
    """The first invariant a chat request ``body`` breaks, else ``None``: every ``tool_calls`` entry
    of an assistant message is answered by exactly one ``tool`` message right after it (before any
    other message), every ``tool`` message answers such a call, and no assistant message is empty
    (invariants 2 and 10 as a provider checks them: it answers HTTP 400 otherwise)."""
    state: tuple[str, ...] | str = ()
    for index, message in enumerate(body.get("messages") or []):
        state = _check(state, message, index)
        if isinstance(state, str):
            return state
    return _ending(state)


def _check(pending: tuple[str, ...] | str, message: dict[str, Any], index: int) -> tuple[str, ...] | str:
    """One message of ``request_problem``'s walk: the calls still waiting for a result after
    ``message`` (``messages[index]``), or the problem it is (a problem stays one)."""
    if isinstance(pending, str):
        return pending
    role = message.get("role")
    if role == "tool":
        call_id = message.get("tool_call_id")
        if call_id not in pending:
            return f"messages[{index}]: a tool result for {call_id!r}, which is no pending call"
        at = pending.index(call_id)
        return pending[:at] + pending[at + 1:]
    if pending:
        return f"messages[{index}]: tool call(s) {', '.join(pending)} have no result before this message"
    if role == "assistant":
        calls = message.get("tool_calls") or []
        if not calls and not message.get("content"):
            return f"messages[{index}]: an empty assistant message"
        return tuple(call.get("id") for call in calls)
    return pending


def _ending(pending: tuple[str, ...] | str) -> str | None:
    if isinstance(pending, str):
        return pending
    if pending:
        return f"the request ends with tool call(s) {', '.join(pending)} that have no result"
    return None


class _ProblemFold:
    """``request_problem`` of a body from its history (``(seq, message)`` pairs after the system
    message, which never changes the walk), resumed after the pairs unchanged since the last call:
    the walk's state after each message is kept (mostly the shared empty tuple)."""

    def __init__(self) -> None:
        self._states: list[tuple[str, ...] | str] = []

    def of(self, pairs: Sequence[tuple[int, dict[str, Any]]], kept: int) -> str | None:
        """The problem of ``[system, *messages of pairs]``; ``kept``: how many leading pairs are
        the same as at the last call."""
        states = self._states
        del states[kept:]
        state: tuple[str, ...] | str = states[-1] if states else ()
        for index in range(len(states), len(pairs)):
            state = _check(state, pairs[index][1], index + 1)
            states.append(state)
        return _ending(state)


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
