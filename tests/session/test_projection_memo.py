"""The projection memo equals the full projection after every event (issue: a request built from a
100k-event log re-walked the whole log; a memo is allowed only as a cache of the pure function)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.session import ProjectionMemo, SessionEvent, surface_messages


def _event(seq: int, kind: str, data: dict) -> SessionEvent:
    return SessionEvent(type=kind, seq=seq, time=float(seq), data=data)


@st.composite
def logs(draw) -> list[SessionEvent]:
    """Turns of user / assistant (text, calls) / tool results / notices, some refused, with
    compactions over earlier ranges, and bookkeeping events the projection ignores."""
    events: list[SessionEvent] = [_event(1, "session/header", {"format_version": 1})]
    for turn in range(1, draw(st.integers(1, 6)) + 1):
        events.append(_event(len(events) + 1, "turn/start", {"turn": turn}))
        events.append(_event(len(events) + 1, "user", {"turn": turn, "content": f"prompt {turn}"}))
        for step in range(draw(st.integers(0, 3))):
            calls = [{"id": f"c{turn}-{step}-{i}", "name": "read", "arguments": "{}"}
                     for i in range(draw(st.integers(0, 2)))]
            text = draw(st.sampled_from(["", "ok", "thinking aloud"]))
            events.append(_event(len(events) + 1, "assistant", {"turn": turn, "text": text, "tool_calls": calls,
                                                                 "reasoning": draw(st.sampled_from(["", "r"]))}))
            for call in calls:
                events.append(_event(len(events) + 1, "policy/decision", {"call_id": call["id"]}))
                events.append(_event(len(events) + 1, "tool/result", {"call_id": call["id"], "content": "x"}))
        if draw(st.booleans()):
            events.append(_event(len(events) + 1, "notice", {"text": "budget"}))
        events.append(_event(len(events) + 1, "turn/end",
                             {"turn": turn, "exit": draw(st.sampled_from(["end_turn", "end_turn", "refusal"]))}))
        if draw(st.integers(0, 3)) == 0 and len(events) > 4:
            first = draw(st.integers(2, len(events) - 2))
            last = draw(st.integers(first, len(events)))
            message = draw(st.sampled_from(["checkpoint", None]))
            data = {"first_seq": first, "last_seq": last}
            if message:
                data["message"] = message
            events.append(_event(len(events) + 1, "compaction/end", data))
    return events


@settings(max_examples=150, deadline=None)
@given(logs())
def test_memo_equals_the_full_projection_after_every_event(events):
    memo = ProjectionMemo()
    for n in range(1, len(events) + 1):
        assert memo.surface(events[:n]) == surface_messages(events[:n])


@settings(max_examples=60, deadline=None)
@given(logs(), logs())
def test_memo_starts_again_when_the_log_is_rewritten(first, second):
    memo = ProjectionMemo()
    assert memo.surface(first) == surface_messages(first)
    assert memo.surface(second) == surface_messages(second)  # another log (fork, reload)
    shorter = first[: max(1, len(first) // 2)]
    assert memo.surface(shorter) == surface_messages(shorter)  # tail repair cut it


def test_memo_messages_are_fresh_dicts():
    events = [_event(1, "turn/start", {"turn": 1}), _event(2, "assistant", {"text": "a", "reasoning": "r"})]
    memo = ProjectionMemo()
    memo.surface(events)[0][1].pop("reasoning_content")
    assert memo.surface(events)[0][1]["reasoning_content"] == "r"
