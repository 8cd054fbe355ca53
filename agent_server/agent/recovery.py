"""Closing a turn that did not finish: cancelled in this process, or left open by a dead one.

Role: make the log's history valid and honest again before the next request. For the turn being
closed it (0) logs what its open step had streamed before the process died (the stream journal,
``session.journal``) as the interrupted ``assistant`` event a cancel logs, (1) gives every tool call
of the latest assistant message that has no ``tool/result`` a synthetic one (``reason: "aborted"``
— it never ran — or ``"interrupted"`` — it may have run), (2) appends one interruption ``notice``
that tells the model the turn was cut short and which calls did not run or may have half-run, and,
on load after a crash, (3) appends ``turn/end {exit: "interrupted"}`` and marks every prompt still
waiting in the inbox as ``inbox/dropped``.

Must never: truncate or rewrite an event (everything here is appended), run a tool, or invent
model output — only journaled text (what the user was shown) is logged; a reply lost is said lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from agent_server.session import EventLog, SessionEvent
from agent_server.session.journal import journal_path, read_journal, remove
from agent_server.tools.pipeline import ABORTED_BEFORE_DISPATCH

NOT_RUN_CANCELLED = (f"{ABORTED_BEFORE_DISPATCH}: this call was not run because the turn was cancelled "
                     "before it started.")
NOT_RUN_CRASHED = (f"{ABORTED_BEFORE_DISPATCH}: this call was not run: agent-server stopped (the process "
                   "ended) before it started.")
NOT_RUN_UNDECIDED = (f"{ABORTED_BEFORE_DISPATCH}: this call was not run: agent-server stopped (the process ended) "
                     "before its permission check let it run (its question to the user had no answer yet).")
MAY_HAVE_RUN_CRASHED = ("Interrupted: agent-server stopped (the process ended) while this call was pending "
                        "or running; it may have had part or all of its effect, or none.")
NOT_RUN_LOG_FAILED = (f"{ABORTED_BEFORE_DISPATCH}: this call was not run: the session log could not be written "
                      "(the disk was full or failing), so the turn was stopped before it started.")
MAY_HAVE_RUN_LOG_FAILED = ("Interrupted: the session log could not be written (the disk was full or failing) while "
                           "this call was pending or running, so its result was lost; it may have had part or all "
                           "of its effect, or none.")

CRASH = "crash"
"""``close_open_turn`` cause: the process that wrote the log died."""
LOG_FAILED = "log_write_failed"
"""``close_open_turn`` cause: an append failed (disk full, I/O error) and the turn was stopped."""


NOT_RUN_REASONS = ("aborted", "cancelled")
"""``tool/result.reason`` values of calls that certainly did not run: ``aborted`` (never dispatched) and
``cancelled`` (the pipeline's: cancelled while its checks, e.g. a permission request, were pending).
``interrupted`` means it was running, or (after a crash) may have been."""


@dataclass(frozen=True)
class OpenCall:
    """A tool call of the latest assistant message without a result.

    ``call_seq``: seq of its ``tool/call`` event, ``None`` if it was never logged (then it
    certainly never ran); ``tool_call_id``: the editor's id when it was announced.
    """

    call_id: str
    name: str
    arguments: str
    call_seq: int | None

    @property
    def tool_call_id(self) -> str | None:
        """``tc-<seq>`` of its ``tool/call`` (the pipeline's id), or ``None``."""
        return None if self.call_seq is None else f"tc-{self.call_seq}"


@dataclass
class Recovery:
    """What ``close_open_turn`` did: the ``turn`` it closed (``None``: none was open), the
    interrupted ``assistant`` event of the journaled text (``streamed``), the synthetic ``tool/result`` events, the ``notice`` event, and the ``inbox/dropped`` events."""

    turn: int | None = None
    streamed: SessionEvent | None = None
    results: list[SessionEvent] = field(default_factory=list)
    notice: SessionEvent | None = None
    dropped: list[SessionEvent] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether anything was appended."""
        return self.turn is not None or bool(self.dropped)


def open_calls(events: Sequence[SessionEvent]) -> list[OpenCall]:
    """Calls of the latest ``assistant`` event that have no ``tool/result`` after it, in model order.

    ``tool/call`` and ``tool/result`` events after that assistant event are matched to its calls
    by ``call_id``, first unmatched first (the pipeline logs both in model order).
    """
    start = next((i for i in range(len(events) - 1, -1, -1) if events[i].type == "assistant"), None)
    if start is None:
        return []
    calls = events[start].data.get("tool_calls") or []
    after = events[start + 1:]
    logged: dict[str, list[int]] = {}
    answered: dict[str, int] = {}
    for event in after:
        if event.type == "tool/call":
            logged.setdefault(event.data["call_id"], []).append(event.seq)
        elif event.type == "tool/result":
            answered[event.data["call_id"]] = answered.get(event.data["call_id"], 0) + 1
    missing: list[OpenCall] = []
    for call in calls:
        seqs = logged.get(call["id"]) or []
        seq = seqs.pop(0) if seqs else None
        if answered.get(call["id"], 0) > 0:
            answered[call["id"]] -= 1
            continue
        missing.append(OpenCall(call["id"], call["name"], call["arguments"], seq))
    return missing


def settle_open_calls(log: EventLog, turn: int, *, crashed: bool, cause: str = CRASH,
                      sync_later: bool = False) -> list[SessionEvent]:
    """Append a synthetic ``tool/result`` for each of ``open_calls(log.events)``; return them.

    ``crashed=False`` (cancel in this process): the pipeline already settled every call it
    dispatched, so an open call never ran → ``reason: "aborted"``. ``crashed=True`` (load after
    a dead process): a call whose ``tool/call`` and policy ``allow`` are on disk may have run →
    ``"interrupted"``; one without either (still asking the user, or never announced) → ``"aborted"``. ``cause`` (with ``crashed``): ``CRASH`` or ``LOG_FAILED`` — which
    words the results use. ``sync_later``: appended unsynced (``EventLog.append``), for the caller's
    next durable append to ``fsync`` with its own.
    """
    appended = []
    calls = open_calls(log.events)
    # every call that runs has its policy/decision "allow" logged first (the pipeline's guard): one
    # announced without it was still asking (or being checked) when the process died — it never ran
    first = min((c.call_seq for c in calls if c.call_seq is not None), default=None)
    allowed: set[tuple[Any, int]] = set()
    # (not after a failed append: an unsynced decision may have been lost while its call ran)
    for event in reversed(log.events if crashed and cause == CRASH and first is not None else ()):
        if event.seq <= first:  # type: ignore[operator]
            break
        if event.type == "policy/decision" and event.data.get("outcome") == "allow":
            allowed.add((event.data.get("call_id"), event.seq))
    for call in calls:
        may_have_run = crashed and call.call_seq is not None
        undecided = (may_have_run and cause == CRASH
                     and not any(cid == call.call_id and seq > call.call_seq for cid, seq in allowed))
        if may_have_run and not undecided:
            text, reason = (MAY_HAVE_RUN_LOG_FAILED if cause == LOG_FAILED else MAY_HAVE_RUN_CRASHED), "interrupted"
        elif undecided:
            text, reason = NOT_RUN_UNDECIDED, "aborted"
        else:
            text = NOT_RUN_CANCELLED if not crashed else NOT_RUN_LOG_FAILED if cause == LOG_FAILED else NOT_RUN_CRASHED
            reason = "aborted"
        tool_call_id = call.tool_call_id or f"tc-{log.last_seq + 1}"
        appended.append(log.append("tool/result", {
            "turn": turn, "call_id": call.call_id, "tool_call_id": tool_call_id, "name": call.name,
            "status": "failed", "content": text, "reason": reason, "synthetic": True,
            "announced": call.call_seq is not None,
        }, sync_later=sync_later))
    return appended


def interruption_notice(log: EventLog, turn: int, *, crashed: bool, cause: str = CRASH,
                        sync_later: bool = False) -> SessionEvent:
    """Append the ``notice`` that tells the model turn ``turn`` was cut short; return it.

    Data: ``{"turn", "reason": "cancelled" | "interrupted", "text", "not_run": [call_id],
    "may_have_run": [call_id], "cut_off": bool, "reply_lost": bool}``. The text names the calls
    that did not run and those that may have partly run, so the model does not redo a side
    effect blindly.
    """
    events = _turn_events(log.events, turn)
    not_run, may_have_run = [], []
    for event in events:
        reason = event.data.get("reason") if event.type == "tool/result" else None
        if reason in NOT_RUN_REASONS or reason == "interrupted":
            label = f"{event.data.get('name')} (call {event.data['call_id']})"
            (not_run if reason in NOT_RUN_REASONS else may_have_run).append((event.data["call_id"], label))
    cut_off = any(e.type == "assistant" and e.data.get("interrupted") and (e.data.get("text") or "").strip()
                  for e in events)
    reply_lost = crashed and _open_step(events)
    if crashed and cause == LOG_FAILED:
        parts = ["The previous turn was interrupted: the session log could not be written (the disk was full "
                 "or failing), so agent-server stopped the turn before it was finished."]
    elif crashed:
        parts = ["The previous turn was interrupted: agent-server stopped (the process ended) before the "
                 "turn was finished."]
    else:
        parts = ["The user cancelled the previous turn before it was finished."]
    if cut_off:
        parts.append("Your last reply was cut off where it ends above.")
    if reply_lost:
        parts.append("Your reply to the last request, if you had started one, was lost.")
    if not_run:
        parts.append("These tool calls did not run: " + ", ".join(label for _, label in not_run) + ".")
    if may_have_run:
        parts.append("These tool calls were interrupted and may have had part of their effect: "
                     + ", ".join(label for _, label in may_have_run) + ".")
    if not_run or may_have_run:
        parts.append("Do not assume they succeeded or failed: check the current state before repeating "
                     "anything with side effects.")
    return log.append("notice", {
        "turn": turn, "reason": "interrupted" if crashed else "cancelled", "text": " ".join(parts),
        "not_run": [c for c, _ in not_run], "may_have_run": [c for c, _ in may_have_run],
        "cut_off": cut_off, "reply_lost": reply_lost,
    }, sync_later=sync_later)


def close_cancelled_turn(log: EventLog, turn: int) -> list[SessionEvent]:
    """For a turn cancelled in this process, before its ``turn/end``: settle the calls the
    pipeline never reached and append the interruption notice. Returns the synthetic results.
    They are written unsynced: the caller's ``turn/end`` (durable) syncs them with its own —
    one ``fsync`` where each had its own. A crash before it leaves the turn open, which the next
    load closes with its own results and notice (the user's prompt was durable before the turn
    began); a failed ``turn/end`` cuts them off with it (memory equals disk)."""
    results = settle_open_calls(log, turn, crashed=False, sync_later=True)
    interruption_notice(log, turn, crashed=False, sync_later=True)
    return results


def open_turn(events: Sequence[SessionEvent]) -> int | None:
    """The number of the last turn if it has a ``turn/start`` but no ``turn/end``, else ``None``."""
    for event in reversed(events):
        if event.type == "turn/end":
            return None
        if event.type == "turn/start":
            return int(event.data.get("turn", 0))
    return None


def waiting_prompts(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """``inbox/queued`` events whose prompt was neither started, cancelled nor dropped."""
    closed = {e.data.get("queued_seq") for e in events
              if e.type in ("inbox/started", "inbox/cancelled", "inbox/dropped")}
    return [e for e in events if e.type == "inbox/queued" and e.seq not in closed]


def close_open_turn(log: EventLog, *, cause: str = CRASH) -> Recovery:
    """On load (``cause=CRASH``), or after a failed append once the log is writable again
    (``cause=LOG_FAILED``): close what was left open; append only, in this order.

    A turn with ``turn/start`` and no ``turn/end`` gets the text its open step streamed, when the
    stream journal holds it (``log_streamed_text``), synthetic results for its open calls,
    the interruption notice and ``turn/end {exit: "interrupted"}`` (with ``cause`` when it is
    not a crash). A closed turn whose last assistant message still has calls without results (a
    log written before failed appends stopped the turn: its ``turn/end`` was written after a lost
    ``tool/result``) gets those results and the notice too, so the next request is valid. Prompts
    still queued are marked ``inbox/dropped`` (``reason: "process_ended"``, on load only): they
    are kept in the log and reported to the editor, but not run — whoever sent them is gone, and
    a prompt must not start work nobody is watching. A log with nothing open is left untouched.
    The stream journal is removed in every case (used, or stale: an older step's).
    """
    recovery = Recovery()
    turn = open_turn(log.events)
    if turn is None and open_calls(log.events):  # only a failed append leaves this behind
        turn = _assistant_turn(log.events)
        recovery.turn = turn
        recovery.results = settle_open_calls(log, turn, crashed=True, cause=LOG_FAILED)
        recovery.notice = interruption_notice(log, turn, crashed=True, cause=LOG_FAILED)
    elif turn is not None:
        recovery.turn = turn
        recovery.streamed = log_streamed_text(log, turn)
        recovery.results = settle_open_calls(log, turn, crashed=True, cause=cause)
        recovery.notice = interruption_notice(log, turn, crashed=True, cause=cause)
        end: dict[str, Any] = {"turn": turn, "exit": "interrupted"}
        if cause != CRASH:
            end["cause"] = cause
        log.append("turn/end", end)
    remove(journal_path(log.path))  # logged above, or not this open step's: never to be read again
    if cause != CRASH:
        return recovery
    for queued in waiting_prompts(log.events) if log.count("inbox/queued") else ():  # (none: no walk)
        recovery.dropped.append(log.append("inbox/dropped", {
            "queued_seq": queued.seq, "reason": "process_ended", "content": queued.data.get("content", ""),
        }))
    return recovery


def log_streamed_text(log: EventLog, turn: int) -> SessionEvent | None:
    """If the stream journal holds what the open step of ``turn`` streamed before the process
    died, append the interrupted ``assistant`` event a cancel at that point logs
    (``AgentSession._commit_interrupted``: the same data) and return it; else ``None``.

    The journal is used only when it names the latest ``step/start`` of the log, that step has no
    ``assistant`` event, no ``assistant/attempt`` logged that attempt (or a later one) already,
    and it holds some text or reasoning. Its removal is the caller's.
    """
    journaled = read_journal(journal_path(log.path))
    if journaled is None or not (journaled.text or journaled.reasoning):
        return None
    events = _turn_events(log.events, turn)
    start = next((i for i in range(len(events) - 1, -1, -1) if events[i].type == "step/start"), None)
    if start is None or events[start].seq != journaled.step_seq or journaled.turn != turn:
        return None
    for event in events[start + 1:]:
        if event.type == "assistant":
            return None
        if event.type == "assistant/attempt" and int(event.data.get("attempt") or 0) >= journaled.attempt:
            return None
    return log.append("assistant", {
        "turn": turn, "step": journaled.step, "text": journaled.text, "reasoning": journaled.reasoning,
        "tool_calls": [], "finish_reason": None, "usage": None, "interrupted": True,
    })


def _assistant_turn(events: Sequence[SessionEvent]) -> int:
    """The turn of the latest ``assistant`` event."""
    return next((int(e.data.get("turn", 0)) for e in reversed(events) if e.type == "assistant"), 0)


def _turn_events(events: Sequence[SessionEvent], turn: int) -> list[SessionEvent]:
    start = next((i for i in range(len(events) - 1, -1, -1)
                  if events[i].type == "turn/start" and events[i].data.get("turn") == turn), None)
    return list(events[start:]) if start is not None else []


def _open_step(events: Sequence[SessionEvent]) -> bool:
    """Whether the last ``step/start`` among ``events`` has no ``assistant`` event after it."""
    for event in reversed(events):
        if event.type == "assistant":
            return False
        if event.type == "step/start":
            return True
    return False


def describe(recovery: Recovery) -> dict[str, Any]:
    """A JSON summary of ``recovery`` (for logs and the load response's ``_meta``)."""
    return {
        "closedTurn": recovery.turn,
        "settledCalls": [e.data["call_id"] for e in recovery.results],
        "droppedPrompts": [e.data["queued_seq"] for e in recovery.dropped],
    }
