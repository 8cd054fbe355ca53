"""StreamAssembler on its own (pure): routing rules, first close wins, usage rules, refusal,
empty responses, and properties over arbitrary fragmentation (hypothesis)."""

from __future__ import annotations

import email.utils
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.llm import (
    ERROR_CODES,
    Finish,
    LLMError,
    ReasoningDelta,
    StreamAssembler,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
)
from agent_server.llm._errors import parse_retry_after


def chunk(delta=None, finish=None, **top):
    choices = [] if delta is None and finish is None else [
        {"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return {"choices": choices, **top}


def tc(index=None, id=None, name=None, args=None):
    d: dict = {}
    if index is not None:
        d["index"] = index
    if id is not None:
        d["id"] = id
    fn = {}
    if name is not None:
        fn["name"] = name
    if args is not None:
        fn["arguments"] = args
    if fn:
        d["function"] = fn
    return chunk({"tool_calls": [d]})


def run(chunks, done=True, **kw):
    asm = StreamAssembler(new_call_id=lambda pos: f"gen_{pos}", **kw)
    events = []
    for c in chunks:
        events += asm.feed(c)
    events += asm.close(done_seen=done)
    assert isinstance(events[-1], Finish)
    return events, events[-1].message


def calls(message):
    return [(c.id, c.name, c.arguments) for c in message.tool_calls]


def test_arguments_are_concatenated_never_assigned():
    _, m = run([tc(0, "a", "f", '{"x"'), tc(0, args=': 1'), tc(0, args='}'),
                chunk(finish="tool_calls")])
    assert calls(m) == [("a", "f", '{"x": 1}')]


def test_known_id_without_index_goes_to_that_call():
    _, m = run([tc(0, "a", "f", "{"), tc(1, "b", "g", "{"), tc(id="a", args="}"),
                tc(id="b", args="}"), chunk(finish="tool_calls")])
    assert calls(m) == [("a", "f", "{}"), ("b", "g", "{}")]


def test_name_alone_then_arguments_without_id():
    events, m = run([tc(0, "a", "f"), tc(0, args='{"k":'), tc(0, args='2}'),
                     chunk(finish="tool_calls")])
    assert calls(m) == [("a", "f", '{"k":2}')]
    assert events[0] == ToolCallStarted(0, "a", "f")


def test_call_without_any_id_gets_a_generated_one_and_a_late_id_is_adopted():
    _, m = run([tc(0, name="f", args="{}"), chunk(finish="tool_calls")])
    assert calls(m) == [("gen_0", "f", "{}")]
    _, m = run([tc(0, args="{"), tc(0, id="late", name="f", args="}"),
                chunk(finish="tool_calls")])
    assert calls(m) == [("late", "f", "{}")]


def test_started_waits_for_the_name_and_replays_buffered_arguments():
    events, m = run([tc(0, "a", args='{"q"'), tc(0, name="f", args=":1}"),
                     chunk(finish="tool_calls")])
    assert events[:2] == [ToolCallStarted(0, "a", "f"), ToolCallDelta(0, '{"q":1}')]
    assert calls(m) == [("a", "f", '{"q":1}')]


def test_nameless_call_is_still_announced_before_finish():
    events, m = run([tc(0, "a", args="{}"), chunk(finish="tool_calls")])
    assert [type(e) for e in events] == [ToolCallStarted, ToolCallDelta, Finish]
    assert calls(m) == [("a", "", "{}")]


def test_first_finish_reason_wins():
    _, m = run([chunk({"content": "hi"}, "stop"), chunk({}, "length"),
                chunk({}, "tool_calls")])
    assert m.finish_reason == "stop"


def test_usage_null_frames_are_ignored_and_last_usage_wins():
    events, m = run([chunk({"content": "a"}, usage=None), chunk({"content": "b"}, usage=None),
                     chunk({}, "stop", usage={"total_tokens": 1}),
                     chunk(usage={"total_tokens": 5})])
    assert m.usage == {"total_tokens": 5}
    assert [type(e) for e in events] == [TextDelta, TextDelta, Usage, Finish]


def test_x_groq_usage_is_a_fallback_only():
    _, m = run([chunk({"content": "a"}, "stop", x_groq={"usage": {"total_tokens": 9}})])
    assert m.usage == {"total_tokens": 9}
    _, m = run([chunk({"content": "a"}, "stop", x_groq={"usage": {"total_tokens": 9}},
                      usage={"total_tokens": 3})])
    assert m.usage == {"total_tokens": 3}


def test_no_usage_means_no_usage_event():
    events, m = run([chunk({"content": "a"}, "stop")])
    assert [type(e) for e in events] == [TextDelta, Finish] and m.usage is None


def test_reasoning_field_alias_and_no_double_count():
    events, m = run([chunk({"reasoning": "think "}),
                     chunk({"reasoning_content": "more", "reasoning": "more"}),
                     chunk({"content": "ok"}, "stop")])
    assert m.reasoning == "think more"
    assert [e for e in events if isinstance(e, ReasoningDelta)] == [
        ReasoningDelta("think "), ReasoningDelta("more")]


def test_refusal_accumulates_and_content_filter_passes_through():
    _, m = run([chunk({"refusal": "I can't "}), chunk({"refusal": "help with that."}),
                chunk({}, "stop")])
    assert (m.refusal, m.content, m.finish_reason) == ("I can't help with that.", "", "stop")
    _, m = run([chunk({"content": "par"}), chunk({}, "content_filter")])
    assert (m.content, m.finish_reason) == ("par", "content_filter")
    _, m = run([chunk({}, "content_filter")])
    assert m.finish_reason == "content_filter"


def test_only_choice_zero_is_assembled():
    c = {"choices": [{"index": 1, "delta": {"content": "other"}, "finish_reason": None},
                     {"index": 0, "delta": {"content": "mine"}, "finish_reason": "stop"}]}
    _, m = run([c])
    assert m.content == "mine"


def test_reasoning_only_stop_is_not_empty_but_nothing_at_all_is():
    _, m = run([chunk({"reasoning_content": "hmm"}, "stop")])
    assert m.reasoning == "hmm"
    asm = StreamAssembler()
    asm.feed(chunk({"role": "assistant", "content": ""}, "stop"))
    with pytest.raises(LLMError) as info:
        asm.close(done_seen=True)
    assert info.value.code == "EMPTY_RESPONSE" and info.value.retryable


def test_eof_without_done_or_finish_is_stream_closed_and_with_finish_is_fine():
    asm = StreamAssembler()
    asm.feed(chunk({"content": "partial"}))
    with pytest.raises(LLMError) as info:
        asm.close(done_seen=False)
    assert info.value.code == "STREAM_CLOSED"
    _, m = run([chunk({"content": "whole"}, "stop")], done=False)
    assert m.content == "whole"


def test_done_without_finish_reason_is_accepted_with_finish_none():
    _, m = run([chunk({"content": "x"})], done=True)
    assert (m.content, m.finish_reason) == ("x", None)


def test_error_frame_raises_and_feed_after_close_is_a_bug():
    asm = StreamAssembler()
    with pytest.raises(LLMError) as info:
        asm.feed({"error": {"message": "context_length_exceeded: too many tokens"}})
    assert info.value.code == "CONTEXT_WINDOW_EXCEEDED"
    asm = StreamAssembler()
    asm.feed(chunk({"content": "a"}, "stop"))
    asm.close(done_seen=True)
    with pytest.raises(RuntimeError):
        asm.feed(chunk({"content": "b"}))
    with pytest.raises(RuntimeError):
        asm.close(done_seen=True)


def test_object_arguments_from_nonconforming_servers_become_a_string():
    _, m = run([tc(0, "a", "f", {"path": "ü"}), chunk(finish="tool_calls")])
    assert calls(m) == [("a", "f", '{"path": "ü"}')]


def test_to_dict_shape():
    _, m = run([tc(0, "a", "f", "{}"), chunk({}, "tool_calls", usage={"total_tokens": 2})])
    assert m.to_dict() == {"content": "", "reasoning": "", "tool_calls": [
        {"id": "a", "name": "f", "arguments": "{}"}], "finish_reason": "tool_calls",
        "usage": {"total_tokens": 2}, "refusal": None, "dropped_tool_calls": 0}


def test_retry_after_forms():
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000) == 30.0
    assert parse_retry_after({"retry-after": date}, now=2_000_000) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_error_codes_closed_set_and_retryability():
    assert {c for c in ERROR_CODES if LLMError(c, "x").retryable} == {
        "RATE_LIMIT", "SERVER", "NETWORK", "STREAM_CLOSED", "STREAM_IDLE", "EMPTY_RESPONSE"}
    with pytest.raises(ValueError):
        LLMError("OOPS", "x")


# -- properties ---------------------------------------------------------------------------

_args = st.dictionaries(st.text(max_size=5), st.text(max_size=8), max_size=3).map(
    lambda d: json.dumps(d, ensure_ascii=False))


def _fragments(draw, text):
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=6)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@st.composite
def parallel_streams(draw):
    """N calls, each as a first delta (id, name) and argument fragments, with a wire style:
    proper indexes, every call at index 0, or continuations without id/index."""
    n = draw(st.integers(1, 4))
    style = draw(st.sampled_from(["indexed", "all_zero", "bare_continuations"]))
    calls, chunks = [], []
    for i in range(n):
        call_id, name, args = f"call_{i}", f"tool_{i}", draw(_args)
        calls.append((call_id, name, args))
        index = 0 if style == "all_zero" else i
        chunks.append(tc(index, call_id, name, ""))
        for piece in _fragments(draw, args):
            chunks.append(tc(None if style == "bare_continuations" else index, args=piece))
    chunks.append(chunk({}, "tool_calls"))
    return calls, chunks


@settings(max_examples=200, deadline=None)
@given(parallel_streams())
def test_any_fragmentation_assembles_the_same_calls(case):
    want, chunks = case
    events, m = run(chunks)
    assert calls(m) == want
    for i, (_, _, args) in enumerate(want):
        assert "".join(e.arguments for e in events
                       if isinstance(e, ToolCallDelta) and e.index == i) == args


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=40), st.data())
def test_text_fragments_concatenate_and_events_end_with_finish(text, data):
    chunks = [chunk({"content": p}) for p in _fragments(data.draw, text)]
    chunks.append(chunk({}, "stop"))
    chunks.append(chunk(usage={"total_tokens": 1}))
    events, m = run(chunks)
    assert m.content == text
    assert all(e.text for e in events if isinstance(e, TextDelta))
    assert [type(e) for e in events[-2:]] == [Usage, Finish]


def test_stream_index_collision_new_id_at_a_taken_index_then_idless_tail_gives_two_valid_calls():
    # seen in the field: A at index 0, B's first delta at index 0 with a new id, B's tail at index 1
    events, m = run([tc(0, "call_A", "read", '{"path": "a.txt"}'),
                     tc(0, "call_B", "grep", '{"pattern'),
                     tc(1, args='": "x"}'),
                     chunk(finish="tool_calls")])
    assert calls(m) == [("call_A", "read", '{"path": "a.txt"}'), ("call_B", "grep", '{"pattern": "x"}')]
    for call in m.tool_calls:
        json.loads(call.arguments)
    assert [e for e in events if isinstance(e, ToolCallStarted)] == [
        ToolCallStarted(0, "call_A", "read"), ToolCallStarted(1, "call_B", "grep")]


def test_idless_delta_continues_the_call_most_recently_opened_at_its_index():
    _, m = run([tc(0, "a", "f", '{"p": 1}'), tc(0, "b", "g", "{"), tc(0, args="}"),
                chunk(finish="tool_calls")])
    assert calls(m) == [("a", "f", '{"p": 1}'), ("b", "g", "{}")]


def test_calls_past_max_tool_calls_are_dropped_unannounced_and_their_deltas_do_not_leak():
    """Issue 32 §7: an answer's calls past the cap are dropped at assembly (as a truncated answer's
    are), counted, never announced; interleaved deltas of a dropped call stay out of the kept ones."""
    def delta(index, args, id=None):
        return tc(index, id, "read" if id else None, args)["choices"][0]["delta"]["tool_calls"][0]

    chunks = [chunk({"tool_calls": [delta(0, '{"p":', "a"), delta(1, '{"q":', "b"), delta(2, '{"r":', "c")]}),
              chunk({"tool_calls": [delta(2, "3}"), delta(0, "1}"), delta(1, "2}")]}, finish="tool_calls")]
    events, message = run(chunks, max_tool_calls=2)
    assert [(c.id, c.arguments) for c in message.tool_calls] == [("a", '{"p":1}'), ("b", '{"q":2}')]
    assert message.dropped_tool_calls == 1
    assert [e.id for e in events if isinstance(e, ToolCallStarted)] == ["a", "b"]
    assert all(e.index < 2 for e in events if isinstance(e, ToolCallDelta))
    _, cut = run([*chunks[:1], chunk(finish="length")], max_tool_calls=2)
    assert cut.tool_calls == [] and cut.dropped_tool_calls == 3  # max tokens still drops every call
    _, whole = run(chunks)
    assert len(whole.tool_calls) == 3 and whole.dropped_tool_calls == 0
