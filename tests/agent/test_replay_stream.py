"""``iter_requests`` (what ``agent-server replay`` prints, built one request at a time by the
session's memo) equals ``logged_requests`` (the pure functions, request by request), and costs one
body for ``step=N`` and the memo plus one body for the whole replay (issue 14: replay of a long
log was quadratic in time and memory, ``--step`` included)."""

from __future__ import annotations

import json
import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.agent.replay import iter_requests, logged_requests, request_steps
from agent_server.session import SessionEvent

HEADERS = [
    {"system": "sys", "model": "m", "params": {}, "tools": [{"type": "function", "function": {"name": "read"}}]},
    {"system": "sys é", "model": "m2", "params": {"temperature": 0.5}, "tools": [], "reasoning_content": "echo"},
]
COMPACTION = {"model": "m", "params": {}, "system": "summarise", "instruction": "Summarise.",
              "max_transcript_chars": 60}


def _event(seq: int, kind: str, data: dict) -> SessionEvent:
    return SessionEvent(type=kind, seq=seq, time=float(seq), data=data)


@st.composite
def logs(draw) -> list[SessionEvent]:
    """Turns of steps with failed tries, interrupted replies, calls with results (some late),
    invalid histories (a call left without its result), refusals, compactions (their summarising
    request, finished, failed or cut off), open last turns, forked headers."""
    forked = draw(st.integers(0, 6))
    header = {"format_version": 1, **({"forked_from": {"session_id": "p", "seq": forked}} if forked else {})}
    events: list[SessionEvent] = [_event(1, "session/header", header)]

    def add(kind: str, data: dict) -> None:
        events.append(_event(len(events) + 1, kind, data))

    turns = draw(st.integers(1, 5))
    for turn in range(1, turns + 1):
        add("turn/start", {"turn": turn})
        add("user", {"turn": turn, "content": f"prompt {turn} ü"})
        late: list[str] = []
        for step in range(1, draw(st.integers(1, 3)) + 1):
            if step == 1 or draw(st.integers(0, 4)) == 0:
                add("request/header", draw(st.sampled_from(HEADERS)))
            add("step/start", {"turn": turn, "step": step})
            for _ in range(draw(st.integers(0, 1))):
                add("assistant/attempt", {"turn": turn, "error": {"code": "NETWORK"}})
            if turn == turns and draw(st.integers(0, 4)) == 0:
                break  # the process died with the step open
            calls = [{"id": f"c{turn}-{step}-{i}", "name": "read", "arguments": "{}"}
                     for i in range(draw(st.integers(0, 2)))]
            add("assistant", {"turn": turn, "text": draw(st.sampled_from(["", "ok", "é"])), "tool_calls": calls,
                              "reasoning": draw(st.sampled_from(["", "thinking"])),
                              "interrupted": draw(st.integers(0, 5)) == 0})
            for call in calls:
                choice = draw(st.integers(0, 6))
                if choice == 0:
                    late.append(call["id"])
                elif choice != 1:  # 1: no result at all (replay reports it)
                    add("tool/result", {"call_id": call["id"], "content": "x" * draw(st.integers(0, 30))})
        for call_id in late:
            add("tool/result", {"call_id": call_id, "content": "late"})
        if draw(st.integers(0, 2)) == 0 and len(events) > 4:
            first = draw(st.integers(2, len(events) - 1))
            span = {"first_seq": first, "last_seq": draw(st.integers(first, len(events)))}
            add("compaction/start", {**COMPACTION, **span, "turn": turn})
            outcome = draw(st.sampled_from(["summary", "attempt", "cancelled", "none"]))
            if outcome == "summary":
                add("compaction/summary", {"text": "s"})
                add("compaction/end", {**span, "message": "checkpoint"})
            elif outcome != "none":
                add("compaction/attempt", {"error": {"code": "NETWORK"}, "cancelled": outcome == "cancelled"})
                add("compaction/end", span)
        if turn < turns or draw(st.booleans()):
            add("turn/end", {"turn": turn, "exit": draw(st.sampled_from(["end_turn", "end_turn", "refusal",
                                                                         "interrupted"]))})
    return events


@settings(max_examples=150, deadline=None)
@given(logs())
def test_the_streamed_requests_equal_the_pure_functions_request_by_request(events):
    pure = logged_requests(events)
    assert list(iter_requests(events)) == pure
    assert request_steps(events) == [r.step_index for r in pure]
    for step in sorted({r.step_index for r in pure}) + [0, 99]:
        assert list(iter_requests(events, step=step)) == [r for r in pure if r.step_index == step and r.kind == "step"]
    inherited = logged_requests(events, inherited=True)
    assert list(iter_requests(events, inherited=True)) == inherited


def long_log(turns: int) -> list[SessionEvent]:
    """A session of ``turns`` turns, each a prompt, a call with a 2 KB result and an answer."""
    events: list[SessionEvent] = [_event(1, "session/header", {"format_version": 1})]

    def add(kind: str, data: dict) -> None:
        events.append(_event(len(events) + 1, kind, data))

    add("request/header", HEADERS[0])
    for turn in range(1, turns + 1):
        add("turn/start", {"turn": turn})
        add("user", {"turn": turn, "content": f"prompt {turn}"})
        add("step/start", {"turn": turn, "step": 1})
        call = {"id": f"c{turn}", "name": "read", "arguments": json.dumps({"path": f"f{turn}.py"})}
        add("assistant", {"turn": turn, "text": "", "tool_calls": [call]})
        add("tool/result", {"call_id": call["id"], "content": f"{turn} " + "y" * 2000})
        add("step/start", {"turn": turn, "step": 2})
        add("assistant", {"turn": turn, "text": f"answer {turn}", "tool_calls": []})
        add("turn/end", {"turn": turn, "exit": "end_turn"})
    return events


def _peak(run) -> int:
    tracemalloc.start()
    try:
        run()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_one_step_costs_about_one_body_and_the_whole_replay_one_body_at_a_time():
    events = long_log(400)  # 800 steps; the last body ≈ 0.9 MB, all bodies together ≈ 360 MB
    last = max(request_steps(events))
    body = len(list(iter_requests(events, step=last))[0].body)
    assert body > 800_000
    # the memo keeps each message encoded once (≈ the body) plus the projection's dicts
    assert _peak(lambda: list(iter_requests(events, step=last))) < 4 * body
    assert _peak(lambda: list(iter_requests(events, step=3))) < 4 * body

    def stream() -> None:
        count = 0
        for request in iter_requests(events):
            count += 1
        assert count == 2 * 400

    assert _peak(stream) < 5 * body
