"""The request memo is only a cache of the pure request functions (issue: a request built from a
100k-event log re-walked and re-encoded the whole log for every step): after every event, for
every step, on logs that compact, refuse, change their header, are cut, forked or reloaded."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.agent.budget import CostMemo, body_chars, estimate_tokens, session_cost
from agent_server.agent.request import pending_body, request_body
from agent_server.agent.compaction import valid_cuts
from agent_server.agent.request_memo import RequestMemo, message_tokens
from agent_server.config.load import AgentSettings
from agent_server.llm import encode_body
from agent_server.session import ProjectionMemo, SessionEvent, surface_messages


def _event(seq: int, kind: str, data: dict) -> SessionEvent:
    return SessionEvent(type=kind, seq=seq, time=float(seq), data=data)


HEADERS = [
    {"system": "sys", "model": "m", "params": {}, "tools": [{"type": "function", "function": {"name": "read"}}],
     "reasoning_content": "drop"},
    {"system": "sys é\n\"quoted\"", "model": "m2", "params": {"temperature": 0.5, "stream": False},
     "tools": [], "reasoning_content": "echo"},
    {"system": "\x00agent-server:messages\x00", "model": "m", "params": {}, "tools": []},  # the memo's own marker
]


@st.composite
def sessions(draw) -> list[SessionEvent]:
    """Turns of steps (``request/header`` when it changes, ``step/start``, ``assistant`` with
    usage, calls and results, results recovery appended late), refusals, notices, compactions."""
    events: list[SessionEvent] = [_event(1, "session/header", {"format_version": 1})]

    def add(kind: str, data: dict) -> None:
        events.append(_event(len(events) + 1, kind, data))

    for turn in range(1, draw(st.integers(1, 5)) + 1):
        add("turn/start", {"turn": turn})
        add("user", {"turn": turn, "content": f"prompt {turn} ü"})
        late: list[str] = []
        for step in range(1, draw(st.integers(1, 3)) + 1):
            if step == 1 or draw(st.integers(0, 4)) == 0:
                add("request/header", draw(st.sampled_from(HEADERS)))
            add("step/start", {"turn": turn, "step": step})
            calls = [{"id": f"c{turn}-{step}-{i}", "name": "read", "arguments": "{\"path\": \"a\"}"}
                     for i in range(draw(st.integers(0, 2)))]
            add("assistant", {"turn": turn, "text": draw(st.sampled_from(["", "ok", "é"])), "tool_calls": calls,
                              "reasoning": draw(st.sampled_from(["", "thinking"])),
                              "usage": draw(st.sampled_from([None, {"prompt_tokens": 50 * len(events)}]))})
            for call in calls:
                if draw(st.integers(0, 5)) == 0:
                    late.append(call["id"])  # its result comes after other messages (recovery)
                else:
                    add("tool/result", {"call_id": call["id"], "content": "x" * draw(st.integers(0, 30))})
        if draw(st.booleans()):
            add("notice", {"text": "cut short"})
        for call_id in late:
            add("tool/result", {"call_id": call_id, "content": "late"})
        add("turn/end", {"turn": turn, "exit": draw(st.sampled_from(["end_turn", "end_turn", "refusal"]))})
        if draw(st.integers(0, 2)) == 0 and len(events) > 4:
            first = draw(st.integers(2, len(events) - 2))
            data = {"first_seq": first, "last_seq": draw(st.integers(first, len(events)))}
            if draw(st.booleans()):
                data["message"] = "checkpoint"
            add("compaction/end", data)
    return events


def steps(events: list[SessionEvent]) -> list[int]:
    return [e.seq for e in events if e.type == "step/start"]


@settings(max_examples=120, deadline=None)
@given(sessions())
def test_memo_equals_the_pure_request_functions_after_every_event(events):
    memo = RequestMemo()
    for n in range(1, len(events) + 1):
        prefix = tuple(events[:n])
        if not any(e.type == "request/header" for e in prefix):
            continue
        if prefix[-1].type == "step/start":
            assert memo.request(prefix, prefix[-1].seq) == encode_body(request_body(prefix, prefix[-1].seq))
        else:
            assert memo.pending_chars(prefix) == body_chars(pending_body(prefix))
            assert estimate_tokens(prefix, 3.5, memo) == estimate_tokens(prefix, 3.5)


@settings(max_examples=120, deadline=None)
@given(sessions())
def test_memo_equals_the_pure_request_functions_with_its_older_messages_joined(events):
    """The older encoded messages are joined into one block (and held only there): a projection
    that changes below the join (a late tool result, a refusal, a compaction) cuts the block where
    that message began. Joined at every request here (the real lag is 256 messages)."""
    from unittest import mock

    from agent_server.agent import request_memo

    with mock.patch.object(request_memo, "_JOIN_LAG", 1):
        test_memo_equals_the_pure_request_functions_after_every_event.hypothesis.inner_test(events)


def test_a_late_tool_result_below_the_joined_messages_cuts_the_joined_block_where_it_goes():
    from unittest import mock

    from agent_server.agent import request_memo

    events: list[SessionEvent] = []

    def add(kind: str, data: dict) -> None:
        events.append(_event(len(events) + 1, kind, data))

    add("session/header", {"format_version": 1})
    add("request/header", HEADERS[0])
    add("turn/start", {"turn": 1})
    add("user", {"turn": 1, "content": "read both"})
    add("step/start", {"turn": 1, "step": 1})
    add("assistant", {"turn": 1, "text": "", "tool_calls": [
        {"id": "c1", "name": "read", "arguments": "{}"}, {"id": "c2", "name": "read", "arguments": "{}"}]})
    add("tool/result", {"call_id": "c1", "content": "one"})
    for n in range(6):  # messages after the call's group, joined below
        add("notice", {"text": f"note {n}"})
    add("tool/result", {"call_id": "c2", "content": "two, late"})  # goes right after c1's result
    memo = RequestMemo()
    with mock.patch.object(request_memo, "_JOIN_LAG", 1):
        for n in range(2, len(events)):
            assert memo.pending_chars(events[:n]) == body_chars(pending_body(events[:n]))
        joined = memo._joined_count  # noqa: SLF001
        add("step/start", {"turn": 1, "step": 2})
        assert memo.request(events, len(events)) == encode_body(request_body(events, len(events)))
    assert joined > 3  # the late result went below the joined block (after the second message)


@settings(max_examples=120, deadline=None)
@given(sessions(), st.integers(0, 3))
def test_memo_history_equals_the_pure_projection_weights_and_cuts_after_every_event(events, every):
    """What a compaction reads (issue 33 item 6: it weighed and cut the whole history again at each
    compaction, 0.2 s of the first prompt after loading a 100k-event log): the memo's projection,
    each message's ``message_tokens`` (from its encoding) and ``valid_cuts``, kept per message —
    equal to the pure functions after every event, between requests and estimates."""
    memo = RequestMemo()
    for n in range(1, len(events) + 1):
        prefix = tuple(events[:n])
        if not any(e.type == "request/header" for e in prefix):
            continue
        if prefix[-1].type == "step/start":
            memo.request(prefix, prefix[-1].seq)
        elif every and n % every == 0:
            memo.pending_chars(prefix)
        pairs, tokens, cuts = memo.history(prefix, 3.5)
        messages = [m for _, m in surface_messages(prefix)]
        assert pairs == surface_messages(prefix)
        assert tokens == [message_tokens(m, 3.5) for m in messages]
        for k in {0, len(tokens) // 3, len(tokens) // 2, len(tokens)}:  # carried on from the last request
            assert memo.tail_sum(k) == sum(tokens[k:]) and memo.weighs(tokens)
        assert cuts == valid_cuts(messages)
        users = [e for e in prefix if e.type == "user"]
        assert (memo.first_user, memo.last_user) == ((users[0], users[-1]) if users else (None, None))
        seqs = [seq for seq, _ in pairs]
        for first, last in ((seqs[0], seqs[-1]), (seqs[0], seqs[len(seqs) // 2] - 1), (seqs[-1], seqs[-1] + 5)
                            ) if seqs else ():
            within = memo.within(first, last)
            if within is not None or seqs == sorted(set(seqs)) and len(memo._seqs) == len(pairs):  # noqa: SLF001
                assert within == [m for seq, m in pairs if first <= seq <= last]  # (rising seqs: never None)


@settings(max_examples=60, deadline=None)
@given(sessions(), sessions())
def test_memo_starts_again_when_the_log_is_rewritten(first, second):
    memo = RequestMemo()
    for events in (first, second, first[: max(1, len(first) // 2)], first):  # fork, reload, cut tail
        for seq in steps(events):
            assert memo.request(events, seq) == encode_body(request_body(events, seq))
        if any(e.type == "request/header" for e in events):
            assert estimate_tokens(events, 4.0, memo) == estimate_tokens(events, 4.0)


@settings(max_examples=80, deadline=None)
@given(sessions())
def test_projection_memo_reports_the_unchanged_start_of_its_list(events):
    memo = ProjectionMemo()
    previous: list = []
    for n in range(1, len(events) + 1):
        pairs = memo.shared(events[:n])
        assert pairs == surface_messages(events[:n])
        assert memo.kept <= min(len(previous), len(pairs))
        assert all(a is b for a, b in zip(pairs[:memo.kept], previous))
        previous = list(pairs)


PRICED = AgentSettings(price_per_million={"input": 0.27, "output": 1.1},
                       model_prices={"m2": {"input": 3.0, "output": 15.0, "currency": "USD"}})


@settings(max_examples=60, deadline=None)
@given(sessions())
def test_cost_memo_equals_the_session_cost_after_every_event(events):
    memo = CostMemo()
    for n in range(1, len(events) + 1):
        assert session_cost(events[:n], PRICED, memo) == session_cost(events[:n], PRICED)
    assert session_cost(events[: len(events) // 2], PRICED, memo) == session_cost(events[: len(events) // 2], PRICED)
    assert session_cost(events, AgentSettings(), memo) is None  # other settings: started again


SUMMARY_REQUESTS = [
    {"system": "Summarise.", "instruction": "Summarise this:", "model": "m", "params": {}, "max_transcript_chars": 2_000},
    {"system": "Summarise.", "instruction": "Summarise this:", "model": "m", "params": {}, "max_transcript_chars": 60},
    {"system": "Summarise é", "instruction": "Summarise this:", "model": "m2", "params": {"temperature": 0.5},
     "max_transcript_chars": 2_000},
]


@settings(max_examples=120, deadline=None)
@given(sessions(), st.lists(st.tuples(st.sampled_from(SUMMARY_REQUESTS), st.integers(0, 10_000), st.integers(0, 10_000)),
                            min_size=1, max_size=4))
def test_memo_compaction_body_equals_the_pure_compaction_body(events, compactions):
    """``RequestMemo.compaction_body`` (a load encodes its first compaction's summarising request
    ahead) gives ``encode_body(compaction_body(…))`` of a ``compaction/start`` with that request and
    range, whether it is made anew or kept: the same request again is the same object, another
    request or range is made again."""
    from agent_server.agent.request import compaction_body

    memo = RequestMemo()
    pairs = surface_messages(events)
    last_made = None
    for request, a, b in compactions:
        if not pairs:
            return
        first_seq, last_seq = sorted((pairs[a % len(pairs)][0], pairs[b % len(pairs)][0]))
        start = _event(events[-1].seq + 1, "compaction/start", {
            "turn": 1, "step": 1, "reason": "threshold", "estimate": 1, "window": 1, "first_seq": first_seq,
            "last_seq": last_seq, "kept_messages": 0, **request})
        replaced = [m for seq, m in pairs if first_seq <= seq <= last_seq]
        made = memo.transcripts_made
        body = memo.compaction_body(start.data, list(replaced))
        assert body == encode_body(compaction_body([*events, start], start.seq))
        if last_made is not None and last_made[0] == (request, replaced):
            assert body is last_made[1] and memo.transcripts_made == made  # kept, not made again
        else:
            assert memo.transcripts_made == made + 1
        last_made = ((request, replaced), body)


@settings(max_examples=120, deadline=None)
@given(sessions(), st.lists(st.tuples(st.sampled_from(SUMMARY_REQUESTS), st.integers(0, 10_000), st.integers(0, 10_000),
                                      st.booleans()), min_size=1, max_size=4))
def test_memo_compaction_body_within_a_stretch_equals_the_pure_compaction_body(events, compactions):
    """``RequestMemo.compaction_body_within`` (the compaction after a load finds the load's body by
    the stretch of the memo's messages it replaces, without listing them) gives the pure body for
    every range, whether kept or made again — also after the memo took in more events (``grow``)."""
    from agent_server.agent.request import compaction_body

    memo = RequestMemo()
    if not any(e.type == "request/header" for e in events):
        return
    for request, a, b, grow in compactions:
        seen = events if grow else events[: max(1, len(events) // 2)]
        if not any(e.type == "request/header" for e in seen):
            seen = events
        pairs, _, _ = memo.history(seen, 3.5)
        if not pairs:
            return
        first_seq, last_seq = sorted((pairs[a % len(pairs)][0], pairs[b % len(pairs)][0]))
        start = _event(seen[-1].seq + 1, "compaction/start", {
            "turn": 1, "step": 1, "reason": "threshold", "estimate": 1, "window": 1, "first_seq": first_seq,
            "last_seq": last_seq, "kept_messages": 0, **request})
        body = memo.compaction_body_within(start.data, first_seq, last_seq, pairs)
        assert body == encode_body(compaction_body([*seen, start], start.seq))
        assert memo.compaction_body_within(start.data, first_seq, last_seq, pairs) is body  # kept


def test_the_compaction_weighs_the_request_head_as_the_whole_encoding_does():
    """``compaction.head_chars`` (the tools' share kept for the last list) equals ``body_chars`` of
    system and tools together, for equal lists made anew and for another list."""
    from agent_server.agent.compaction import head_chars

    tools = [{"type": "function", "function": {"name": "é", "description": "a \"quoted\" ✓ line\n", "parameters": {}}}]
    for system, listed in (("Sys ✓", tools), ("Other \u2028 system", [dict(t) for t in tools]), ("", []),
                           ("x", [*tools, {"type": "function", "function": {"name": "b"}}]), ("y", tools)):
        assert head_chars(system, listed) == body_chars({"s": system, "t": listed})
