"""Issue 11 §2c: a trickling provider times out. ChatClient over real HTTP against the offline
endpoint: keep-alives or empty frames forever (no progress), output that never ends (the attempt
deadline), output that floods (the cap) — each a retryable ``NETWORK`` error — while the byte-idle
``STREAM_IDLE`` timeout and streams that do progress are unchanged."""

from __future__ import annotations

import json

import pytest

from agent_server.llm import ChatClient, LLMError, TextDelta, encode_body
from agent_server.offline import text_stream

BODY = encode_body({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})


def frame(delta, finish=None):
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"


def forever(text, every=0.05, count=400):
    """A raw SSE answer that sends ``text`` every ``every`` s (``count`` times: ≥ 20 s, "forever"
    for these tests), then ends without a finish."""
    return {"kind": "raw", "writes": [{"text": frame({"role": "assistant", "content": ""})}]
            + [{"text": text, "delay": every} for _ in range(count)]}


async def stream(endpoint, response, **limits):
    endpoint.push(response)
    client = ChatClient(endpoint.base_url, "sk-test", **{"stream_idle_timeout": 5.0, **limits})
    events = []
    try:
        async for event in client.stream(BODY):
            events.append(event)
    finally:
        await client.aclose()
    return events


async def failure(endpoint, response, **limits) -> LLMError:
    with pytest.raises(LLMError) as info:
        await stream(endpoint, response, **limits)
    return info.value


@pytest.mark.parametrize("filler", [": keep-alive\n\n", "event: ping\ndata: \n\n", frame({}), frame({"content": ""}),
                                    frame({"tool_calls": []})])
async def test_trickling_keepalives_or_empty_deltas_forever_fail_as_network_no_progress(endpoint, filler):
    exc = await failure(endpoint, forever(filler), no_progress_timeout=0.5)
    assert (exc.code, exc.retryable) == ("NETWORK", True)
    assert "no progress for 0.5 s" in exc.message and "no_progress_timeout" in exc.message


async def test_output_one_frame_at_a_time_forever_hits_the_attempt_deadline(endpoint):
    exc = await failure(endpoint, forever(frame({"content": "x"})), attempt_timeout=1.0, no_progress_timeout=0.5)
    assert (exc.code, exc.retryable) == ("NETWORK", True)
    assert "did not finish within 1 s" in exc.message and "attempt_timeout" in exc.message


async def test_the_attempt_deadline_covers_waiting_for_headers(endpoint):
    # the endpoint never answers; the byte-idle timeout is longer than the deadline
    exc = await failure(endpoint, {"kind": "hang", "headers": False}, attempt_timeout=0.5, stream_idle_timeout=30)
    assert exc.code == "NETWORK" and "waiting for the response headers" in exc.message


async def test_output_past_the_cap_is_stopped_as_network(endpoint):
    exc = await failure(endpoint, text_stream("y" * 5000, chunk_size=50), max_output_chars=1000)
    assert (exc.code, exc.retryable) == ("NETWORK", True)
    assert "1,000 characters" in exc.message and "max_output_chars" in exc.message


async def test_slow_but_progressing_stream_within_the_limits_succeeds(endpoint):
    events = await stream(endpoint, text_stream("abcdefgh", chunk_size=1, delay=0.1), no_progress_timeout=0.5,
                          attempt_timeout=30, max_output_chars=8)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "abcdefgh"


async def test_silence_is_still_stream_idle_not_no_progress(endpoint):
    exc = await failure(endpoint, {"kind": "hang"}, stream_idle_timeout=0.3, no_progress_timeout=30)
    assert exc.code == "STREAM_IDLE"
