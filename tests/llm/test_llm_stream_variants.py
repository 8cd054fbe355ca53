"""The quirks from fixtures/sse/README.md that have no real recording, derived from the real
fixture bytes and served over real HTTP through the offline endpoint."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from agent_server.llm import LLMError, TextDelta, ToolCallStarted

PARALLEL = "openai-gpt4o-parallel-tools.txt"
WEATHER = ("call_JMW1whyEaYG438VE1OIflxA2", "GetWeatherArgs",
           {"city": "Edinburgh", "country": "GB", "units": "c"})
STOCK = ("call_DNYTawLBoN8fj3KN6qU9N1Ou", "get_stock_price",
         {"ticker": "AAPL", "exchange": "NASDAQ"})


def calls_of(message) -> list[tuple[str, str, Any]]:
    return [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls]


def tool_deltas(frame: dict) -> list[dict]:
    choices = frame.get("choices") or [{}]
    return choices[0].get("delta", {}).get("tool_calls") or []


def sse_response(frames: list[dict], *, done: bool = True) -> dict[str, Any]:
    return {"kind": "sse", "frames": frames, "done": done}


def raw_response(writes: list[bytes], *, delay: float = 0.0, **extra: Any) -> dict[str, Any]:
    return {"kind": "raw", "writes": [
        {"bytes_b64": base64.b64encode(w).decode("ascii"), "delay": delay if i else 0}
        for i, w in enumerate(writes)], **extra}


async def test_parallel_calls_all_index_zero_split_by_new_id(fixture_frames, run_stream,
                                                             assembled):
    frames = fixture_frames(PARALLEL)
    for frame in frames:
        for delta in tool_deltas(frame):
            delta["index"] = 0
    assert sum(1 for f in frames for d in tool_deltas(f) if d.get("id")) == 2
    message = assembled(await run_stream(sse_response(frames)))
    assert calls_of(message) == [WEATHER, STOCK]


async def test_continuation_without_id_or_index_appends_to_call_in_progress(
        fixture_frames, run_stream, assembled):
    frames = fixture_frames(PARALLEL)
    stripped = 0
    for frame in frames:
        for delta in tool_deltas(frame):
            if "id" not in delta:
                del delta["index"]
                stripped += 1
    assert stripped > 10
    message = assembled(await run_stream(sse_response(frames)))
    assert calls_of(message) == [WEATHER, STOCK]


async def test_new_call_reusing_previous_index_with_new_id(fixture_frames, run_stream,
                                                           assembled):
    frames = fixture_frames(PARALLEL)
    finish_at = next(i for i, f in enumerate(frames)
                     if f["choices"] and f["choices"][0]["finish_reason"])
    # a third call, a copy of the first call's frames, reusing the second call's index 1
    third = [copy.deepcopy(f) for f in frames[:finish_at]
             if any(d.get("index") == 0 for d in tool_deltas(f))]
    for frame in third:
        for delta in tool_deltas(frame):
            delta["index"] = 1
            if "id" in delta:
                delta["id"] = "call_third"
    frames[finish_at:finish_at] = third
    events = await run_stream(sse_response(frames))
    message = assembled(events)
    assert calls_of(message) == [WEATHER, STOCK, ("call_third", *WEATHER[1:])]
    starts = [(e.index, e.id) for e in events if isinstance(e, ToolCallStarted)]
    assert starts == [(0, WEATHER[0]), (1, STOCK[0]), (2, "call_third")]


async def test_keepalive_comments_and_crlf_line_endings(fixture_bytes, expected, run_stream,
                                                        assembled):
    name = "deepseek-reasoner-tool-call.txt"
    original = fixture_bytes(name)
    frames = [f for f in original.split(b"\n\n") if f.strip()]
    writes = [b": keep-alive\r\n\r\n"]
    for frame in frames:
        writes.append(frame.replace(b"\n", b"\r\n") + b"\r\n\r\n")
        writes.append(b": keep-alive\r\n\r\n")
    assert b"\n" not in b"".join(writes).replace(b"\r\n", b"")
    message = assembled(await run_stream(raw_response(writes)))
    want = expected[name]
    assert message.content == want["content"]
    assert len(message.reasoning) == want["reasoning_chars"]
    assert message.finish_reason == "tool_calls"
    assert [(c.id, c.name, json.loads(c.arguments)) for c in message.tool_calls] == [
        (want["tool_calls"][0]["id"], "weather", {"location": "San Francisco"})]


@pytest.mark.parametrize("char", ["✓", "🇩🇰", "å"])
async def test_frame_split_mid_utf8_character_across_tcp_reads(char, fixture_bytes, run_stream,
                                                               assembled):
    data = fixture_bytes("azure-router-empty-first-chunk.txt")
    marker = b'"content":"Capital"'
    assert data.count(marker) == 1
    data = data.replace(marker, f'"content":"Capital{char}"'.encode("utf-8"))
    encoded = char.encode("utf-8")
    assert len(encoded) > 1
    cut = data.index(encoded) + 1  # inside the character's bytes
    message = assembled(await run_stream(raw_response([data[:cut], data[cut:]], delay=0.05)))
    assert message.content == f"Capital{char} of Denmark."


@pytest.mark.parametrize("error, code", [
    ({"message": "Rate limit reached for requests", "type": "rate_limit_error",
      "code": "rate_limit_exceeded"}, "RATE_LIMIT"),
    ({"message": "Provider returned error", "code": 502}, "SERVER"),
    ({"message": "The server had an error while processing your request.",
      "type": "server_error"}, "SERVER"),
])
async def test_error_frame_mid_stream_raises_llm_error(error, code, fixture_frames, run_stream):
    frames = fixture_frames("azure-router-empty-first-chunk.txt")[:4]
    frames.append({"error": error})
    frames += fixture_frames("azure-router-empty-first-chunk.txt")[4:]
    with pytest.raises(LLMError) as info:
        await run_stream(sse_response(frames))
    assert info.value.code == code
    assert info.value.retryable
    assert error["message"] in info.value.message
    # what came before the error frame was streamed; no Finish was produced
    assert [e.text for e in info.value.events if isinstance(e, TextDelta)] == ["Capital", " of"]


@pytest.mark.parametrize("framing, abort", [("close", False), ("chunked", True)])
async def test_stream_closed_before_done_is_stream_closed(framing, abort, fixture_bytes,
                                                          run_stream):
    data = fixture_bytes(PARALLEL)
    cut = data.index(b'"finish_reason":"tool_calls"')
    cut = data.rindex(b"\n\n", 0, cut) + 2  # after the last complete frame before the finish
    with pytest.raises(LLMError) as info:
        await run_stream(raw_response([data[:cut]], framing=framing, abort=abort))
    assert info.value.code == "STREAM_CLOSED"
    assert info.value.retryable
    assert any(isinstance(e, ToolCallStarted) for e in info.value.events)


async def test_stream_cut_mid_frame_is_stream_closed(fixture_bytes, run_stream):
    data = fixture_bytes(PARALLEL)
    with pytest.raises(LLMError) as info:
        await run_stream(raw_response([data[:len(data) // 2]], abort=True))
    assert info.value.code == "STREAM_CLOSED"


@pytest.mark.parametrize("framing, abort",
                         [("close", False), ("chunked", False), ("chunked", True)])
async def test_end_of_stream_after_finish_without_done_is_accepted(
        framing, abort, fixture_bytes, run_stream, assembled):
    data = fixture_bytes(PARALLEL)
    assert data.rstrip().endswith(b"data: [DONE]")
    data = data[:data.rindex(b"data: [DONE]")]
    message = assembled(await run_stream(raw_response([data], framing=framing, abort=abort)))
    assert calls_of(message) == [WEATHER, STOCK]
    assert message.usage["total_tokens"] == 209


async def test_done_only_stream_is_empty_response(run_stream):
    with pytest.raises(LLMError) as info:
        await run_stream(raw_response([b"data: [DONE]\n\n"]))
    assert info.value.code == "EMPTY_RESPONSE"
    assert info.value.retryable
    assert info.value.events == []


async def test_stop_without_content_or_calls_is_empty_response(fixture_frames, run_stream):
    frames = fixture_frames("azure-router-empty-first-chunk.txt")
    frames = [f for f in frames
              if not (f["choices"] and f["choices"][0]["delta"].get("content"))]
    assert any(f["choices"] and f["choices"][0]["finish_reason"] == "stop" for f in frames)
    with pytest.raises(LLMError) as info:
        await run_stream(sse_response(frames))
    assert info.value.code == "EMPTY_RESPONSE"


async def test_length_finish_drops_complete_looking_tool_call(fixture_frames, run_stream,
                                                              assembled):
    frames = fixture_frames(PARALLEL)
    for frame in frames:
        if frame["choices"] and frame["choices"][0]["finish_reason"] == "tool_calls":
            frame["choices"][0]["finish_reason"] = "length"
    events = await run_stream(sse_response(frames))
    message = assembled(events)
    # both calls were complete, valid JSON — still dropped: the message was cut by max tokens
    assert message.tool_calls == []
    assert message.dropped_tool_calls == 2
    assert message.finish_reason == "length"
    assert message.usage["completion_tokens"] == 60
