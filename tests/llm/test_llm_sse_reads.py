"""The SSE read path on its own (pure, no I/O): ``SseReads`` over any split of the bytes gives the
same message as parsing every frame with ``json.loads`` and feeding it to the assembler, with
adjacent deltas joined and nothing reordered; ``FrameDecoder`` only answers for a frame when a
full parse would have given exactly that, and falls back otherwise."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.llm import (
    LLMError,
    ReasoningDelta,
    StreamAssembler,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
)
from agent_server.llm._frames import REASONING, TEXT, FrameDecoder
from agent_server.llm._sse import SseReads
from httpx_sse._decoders import SSEDecoder, SSELineDecoder
from support.paths import SSE_DIR


def frame(delta, *, finish=None, ascii_only=False, **top):
    obj = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m", **top,
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return json.dumps(obj, ensure_ascii=ascii_only, separators=(",", ":"))


def sse(*datas):
    return "".join(f"data: {d}\n\n" for d in datas)


def reference(text: str):
    """What the old path made of ``text``: every frame parsed with json.loads, one event each."""
    assembler, events, done = StreamAssembler(), [], False
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = "\n".join(line[6:] if line.startswith("data: ") else line[5:]
                         for line in block.split("\n") if line.startswith("data:"))
        if not data.strip():
            continue
        if data.strip() == "[DONE]":
            done = True
            break
        events += assembler.feed(json.loads(data))
    return events + closed(assembler, done)


def closed(assembler, done):
    """The closing events, or the error the close raised (an empty stream)."""
    try:
        return assembler.close(done_seen=done)
    except LLMError as exc:
        return [exc.code]


def read_all(reads, text):
    """``reads.read(text)`` and then ``more()`` while lines are pending, as the client does."""
    events, error = reads.read(text)
    while error is None and reads.pending:
        more, error = reads.more()
        events += more
    return events, error


def through_reads(text: str, cuts: list[int]):
    reads = SseReads(StreamAssembler(), max_output_chars=None, status=200)
    events, last = [], 0
    for cut in sorted(set(c for c in cuts if 0 < c < len(text))) + [len(text)]:
        got, error = read_all(reads, text[last:cut])
        assert error is None
        events += got
        last = cut
    got, error = reads.end()
    assert error is None
    return events + closed(reads.assembler, reads.done)


def runs(events):
    """Adjacent deltas of one kind (and call) joined: what a reader of the events can see."""
    out = []
    for e in events:
        key = (type(e), getattr(e, "index", None)) if isinstance(e, (TextDelta, ReasoningDelta, ToolCallDelta)) else None
        piece = getattr(e, "arguments", None) if isinstance(e, ToolCallDelta) else getattr(e, "text", None)
        if key is not None and out and out[-1][0] == key:
            out[-1] = (key, out[-1][1] + piece)
        else:
            out.append((key, piece) if key is not None else (None, e))
    return out


pieces = st.lists(st.tuples(st.sampled_from(["content", "reasoning_content", "reasoning"]),
                            st.text(min_size=0, max_size=6)), min_size=1, max_size=40)


@settings(max_examples=150, deadline=None)
@given(pieces, st.booleans(), st.lists(st.integers(min_value=0, max_value=5000), max_size=12))
def test_any_split_of_any_stream_gives_the_same_message_and_the_same_text_in_order(parts, ascii_only, cuts):
    datas = [frame({"role": "assistant", "content": ""}, ascii_only=ascii_only)]
    datas += [frame({key: value}, ascii_only=ascii_only) for key, value in parts]
    datas += [frame({}, finish="stop", ascii_only=ascii_only), json.dumps({"choices": [], "usage": {"total_tokens": 3}}),
              "[DONE]"]
    text = sse(*datas)
    want, got = reference(text), through_reads(text, cuts)
    assert got[-1] == want[-1]  # the same assembled message (Finish), usage included
    assert runs(got) == runs(want)  # the same bytes, in the same order, joined where adjacent


@pytest.mark.parametrize("name", sorted(p.name for p in SSE_DIR.glob("*.txt")))
@pytest.mark.parametrize("size", [1, 7, 100, 1 << 20])
def test_recorded_streams_read_in_pieces_give_what_frame_by_frame_parsing_gives(name, size):
    text = (SSE_DIR / name).read_bytes().decode("utf-8")
    want, got = reference(text), through_reads(text, list(range(size, len(text), size)))
    assert got[-1] == want[-1]
    assert runs(got) == runs(want)
    starts = [e for e in got if isinstance(e, ToolCallStarted)]
    assert starts == [e for e in want if isinstance(e, ToolCallStarted)]


def test_frames_read_at_once_come_out_as_one_delta_per_kind_run_after_the_first_delta_alone():
    reads = SseReads(StreamAssembler(), max_output_chars=None, status=200)
    text = sse(frame({"role": "assistant", "content": ""}), *[frame({"content": c}) for c in "Hello"],
               *[frame({"reasoning_content": c}) for c in "hm"], frame({"content": "!"}))
    assert reads.read(text) == ([TextDelta("H")], None)  # the stream's first delta is not held for its read
    assert reads.pending
    assert reads.more() == ([TextDelta("ello"), ReasoningDelta("hm"), TextDelta("!")], None)
    assert not reads.pending
    assert read_all(reads, sse(*[frame({"content": c}) for c in "later"])) == ([TextDelta("later")], None)


def test_nothing_after_done_is_read():
    text = sse(frame({"content": "a"}), frame({"content": "b"}), "[DONE]", frame({"content": "c"}))
    reads = SseReads(StreamAssembler(), max_output_chars=None, status=200)
    assert read_all(reads, text) == ([TextDelta("a"), TextDelta("b")], None) and reads.done


def test_an_error_frame_after_text_comes_after_that_text():
    text = (sse(frame({"content": "par"}), frame({"content": "tial"}))
            + 'event: error\ndata: {"error": {"message": "overloaded", "type": "server_error"}}\n\n')
    events, error = read_all(SseReads(StreamAssembler(), max_output_chars=None, status=200), text)
    assert events == [TextDelta("par"), TextDelta("tial")]
    assert isinstance(error, LLMError) and error.code == "SERVER" and "overloaded" in error.message


def test_a_malformed_frame_of_a_learned_shape_is_still_an_error():
    good = frame({"content": "a"})
    bad = good.replace('"a"', '"b\\x"')  # the same shape around an invalid string literal
    events, error = read_all(SseReads(StreamAssembler(), max_output_chars=None, status=200), sse(good, good, bad))
    assert events == [TextDelta("a"), TextDelta("a")]
    assert isinstance(error, LLMError) and error.code == "SERVER" and "malformed stream frame" in error.message


def test_the_output_cap_stops_the_read():
    reads = SseReads(StreamAssembler(), max_output_chars=5, status=200)
    events, error = read_all(reads, sse(*[frame({"content": "abc"})] * 3))
    assert "".join(e.text for e in events) == "abcabcabc"
    assert isinstance(error, LLMError) and error.code == "NETWORK" and "max_output_chars" in error.message


def through_httpx_sse(text: str):
    """What ``EventSource.aiter_sse`` makes of ``text`` — httpx-sse's line and event decoders over
    all of it, every event — with each event's data handled as the client handles it: ``[DONE]``
    ends the stream, an ``error`` event or a malformed frame is an error, the rest is parsed with
    ``json.loads`` and fed to the assembler. ``(events, error code or None)``."""
    lines, decoder, assembler, events, done = SSELineDecoder(), SSEDecoder(), StreamAssembler(), [], False
    for line in lines.decode(text) + lines.flush():
        event = decoder.decode(line)
        if event is None or not event.data.strip():
            continue
        if event.data.strip() == "[DONE]":
            done = True
            break
        try:
            chunk = json.loads(event.data)
        except ValueError:
            return events, "SERVER"
        if event.event == "error":
            return events, "SERVER"
        events += assembler.feed(chunk)
    return events + closed(assembler, done), None


def through_reads_or_error(text: str, cuts: list[int]):
    reads = SseReads(StreamAssembler(), max_output_chars=None, status=200)
    events, last = [], 0
    for cut in sorted(set(c for c in cuts if 0 < c < len(text))) + [len(text)]:
        got, error = read_all(reads, text[last:cut])
        events += got
        if error is not None:
            return events, error.code
        last = cut
    got, error = reads.end()
    events += got
    if error is not None:
        return events, error.code
    return events + closed(reads.assembler, reads.done), None


def _event_lines(data: str, extras: list[str], split: bool, spaced: bool) -> list[str]:
    """The lines of one event carrying ``data``: ``extras`` (``id:``, ``retry:``, ``event:``,
    comments) first, the data on one line or split over two ``data:`` lines."""
    prefix = "data: " if spaced else "data:"
    if split and "," in data:
        at = data.index(",") + 1
        body = [prefix + data[:at], "data: " + data[at:]]  # joined with "\n": whitespace between tokens
    else:
        body = [prefix + data]
    return extras + body + [""]


extra_lines = st.lists(st.sampled_from([": keep-alive", "id: 7", "id", "retry: 1000", "retry: x", "event: message",
                                        "event:", "unknown: field", ":"]), max_size=2)
sse_events = st.lists(st.tuples(st.sampled_from(["content", "reasoning_content", "content", "content"]),
                                st.text(max_size=4), extra_lines, st.booleans(), st.booleans(), st.booleans()),
                      min_size=1, max_size=30)


@settings(max_examples=300, deadline=None)
@given(sse_events, st.sampled_from(["\n", "\r\n", "\r"]), st.lists(st.integers(min_value=0, max_value=4000), max_size=10),
       st.sampled_from(["none", "ping", "error", "malformed"]))
def test_any_stream_of_any_event_lines_gives_what_httpx_sse_decoding_every_line_gives(specs, newline, cuts, oddity):
    """The one-line ``data:`` shortcut (``_sse._DATA_EVENT``) is taken only where httpx-sse's own
    decoders would give the same event: comments, ``id``/``retry``/``event`` fields, data over two
    lines, ``data:`` without its space, blank lines and every line ending, split anywhere."""
    lines = _event_lines(frame({"role": "assistant", "content": ""}), [], False, True)
    for i, (key, value, extras, split, spaced, blank) in enumerate(specs):
        lines += _event_lines(frame({key: value}), extras, split, spaced) + ([""] if blank else [])
        if i == len(specs) // 2 and oddity != "none":
            lines += {"ping": ["event: ping", "data:", ""],
                      "error": ["event: error", 'data: {"error": {"message": "overloaded"}}', ""],
                      "malformed": ["data: {\"choices\": [", ""]}[oddity]
    lines += _event_lines(frame({}, finish="stop"), [], False, True) + ["data: [DONE]", ""]
    text = newline.join(lines) + newline
    want, got = through_httpx_sse(text), through_reads_or_error(text, cuts)
    assert got[1] == want[1]  # the same error, or none
    assert runs(got[0]) == runs(want[0])  # the same bytes in the same order, the same message at the end


# -- FrameDecoder -----------------------------------------------------------------------------------


def learned(data):
    decoder = FrameDecoder()
    assert decoder.learn(data, json.loads(data))
    return decoder


@pytest.mark.parametrize("literal", ['"x"', '"\\u00e9\\ud83d\\ude00"', '"\\"quoted\\" \\\\ \\n"', '"日本"', '""'])
def test_a_frame_of_the_learned_shape_decodes_as_json_loads_would(literal):
    decoder = learned(frame({"content": "seed"}))
    data = frame({"content": "seed"}).replace('"seed"', literal)
    assert decoder.decode(data) == (TEXT, json.loads(data)["choices"][0]["delta"]["content"])


@pytest.mark.parametrize("change", [
    lambda d: d.replace('"seed"', '"a","refusal":"no"'),       # more than one string in the place
    lambda d: d.replace('"seed"', '"a"  '),                     # not the same bytes around it
    lambda d: d.replace('"seed"', '"bad \\q"'),                 # not a valid literal
    lambda d: d.replace('"seed"', "12"),                        # not a string
    lambda d: d.replace('"created":7', '"created":8'),         # another shape
])
def test_anything_else_is_left_to_the_full_parse(change):
    data = frame({"content": "seed"})
    assert learned(data).decode(change(data)) is None


def test_reasoning_shapes_are_told_apart_from_text_shapes():
    decoder = learned(frame({"reasoning_content": "r"}))
    assert decoder.learn(frame({"content": "t"}), json.loads(frame({"content": "t"})))
    assert decoder.decode(frame({"reasoning_content": "why"})) == (REASONING, "why")
    assert decoder.decode(frame({"content": "what"})) == (TEXT, "what")


@pytest.mark.parametrize("delta, top", [
    ({"content": "a", "tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}, {}),
    ({"content": "a", "reasoning_content": "b"}, {}),
    ({"content": "a"}, {"usage": {"total_tokens": 1}}),
    ({"content": "a", "refusal": "no"}, {}),
])
def test_frames_that_do_more_than_one_delta_are_never_learned(delta, top):
    data = frame(delta, **top)
    assert not FrameDecoder().learn(data, json.loads(data))


def test_with_duplicate_keys_the_effective_one_is_learned():
    data = '{"choices":[{"index":0,"delta":{"content":"first","content":"second"},"finish_reason":null}]}'
    decoder = learned(data)
    other = data.replace('"second"', '"third"')
    assert decoder.decode(other) == (TEXT, "third") and json.loads(other)["choices"][0]["delta"]["content"] == "third"
    assert decoder.decode(data.replace('"first"', '"zzz"')) is None


def test_a_stream_whose_frames_never_repeat_their_shape_stops_learning():
    decoder = FrameDecoder()
    for i in range(20):
        data = frame({"content": "x"}, obfuscation="r" * i)  # a random per-frame field (OpenAI)
        assert decoder.decode(data) is None
        decoder.learn(data, json.loads(data))
    assert decoder.shapes == [] and not decoder.learn(frame({"content": "x"}), json.loads(frame({"content": "x"})))
