"""Every recorded provider stream, served byte for byte over real HTTP, assembles exactly to
fixtures/sse/expected.json; plus the event-order invariants on those real streams."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_server.llm import (
    Finish,
    ReasoningDelta,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
)

FIXTURE_FILES = [
    "azure-router-empty-first-chunk.txt",
    "deepseek-reasoner-tool-call.txt",
    "deepseek-v4pro-reasoning-only-length.txt",
    "groq-llama-tool-call-single-chunk.txt",
    "mistral-tool-call-no-index.txt",
    "openai-gpt4o-max-tokens-length.txt",
    "openai-gpt4o-parallel-tools.txt",
    "openrouter-kimik2-split-name-args.txt",
]


def test_the_eight_recorded_streams_are_all_covered(sse_dir, expected):
    assert sorted(expected) == FIXTURE_FILES
    assert sorted(p.name for p in sse_dir.glob("*.txt")) == FIXTURE_FILES


def _sse_file(sse_dir, name: str, **extra: Any) -> dict[str, Any]:
    return {"kind": "sse_file", "path": str(sse_dir / name), **extra}


def check_against_expected(message, want: dict[str, Any]) -> None:
    assert message.content == want["content"]
    assert len(message.reasoning) == want["reasoning_chars"]
    assert message.finish_reason == want["finish_reason"]
    got_calls = [{"id": c.id, "name": c.name, "args": json.loads(c.arguments)}
                 for c in message.tool_calls]
    assert got_calls == want["tool_calls"]


@pytest.mark.parametrize("name", FIXTURE_FILES)
async def test_recorded_stream_assembles_to_expected(name, sse_dir, expected, run_stream,
                                                     assembled):
    events = await run_stream(_sse_file(sse_dir, name))
    check_against_expected(assembled(events), expected[name])


@pytest.mark.parametrize("name", ["openai-gpt4o-parallel-tools.txt",
                                  "deepseek-reasoner-tool-call.txt"])
async def test_recorded_stream_served_frame_by_frame_assembles_the_same(
        name, sse_dir, expected, run_stream, assembled):
    events = await run_stream(_sse_file(sse_dir, name, chunk_delay=0.001))
    check_against_expected(assembled(events), expected[name])


async def test_usage_before_finish_and_nothing_after_finish(sse_dir, run_stream):
    events = await run_stream(_sse_file(sse_dir, "openai-gpt4o-parallel-tools.txt"))
    kinds = [type(e).__name__ for e in events]
    # on the wire, usage arrives in a chunk after the finish_reason chunk; we emit it before Finish
    assert kinds[-2:] == ["Usage", "Finish"]
    assert kinds.count("Usage") == 1 and kinds.count("Finish") == 1
    usage = events[-2]
    assert isinstance(usage, Usage)
    assert usage.usage == {"prompt_tokens": 149, "completion_tokens": 60, "total_tokens": 209,
                           "completion_tokens_details": {"reasoning_tokens": 0}}
    assert events[-1].message.usage == usage.usage
    # call blocks open in order, each before its argument fragments
    starts = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(s.index, s.name) for s in starts] == [(0, "GetWeatherArgs"), (1, "get_stock_price")]
    first_delta_of_1 = next(i for i, e in enumerate(events)
                            if isinstance(e, ToolCallDelta) and e.index == 1)
    assert events.index(starts[1]) < first_delta_of_1
    for i in (0, 1):
        fragments = "".join(e.arguments for e in events
                            if isinstance(e, ToolCallDelta) and e.index == i)
        assert fragments == events[-1].message.tool_calls[i].arguments


async def test_mistral_usage_in_the_finish_chunk_still_comes_before_finish(sse_dir, run_stream):
    events = await run_stream(_sse_file(sse_dir, "mistral-tool-call-no-index.txt"))
    assert [type(e).__name__ for e in events] == [
        "ToolCallStarted", "ToolCallDelta", "Usage", "Finish"]
    assert events[2].usage == {"prompt_tokens": 124, "total_tokens": 146,
                               "completion_tokens": 22}


async def test_groq_prefers_top_level_usage(sse_dir, run_stream):
    events = await run_stream(_sse_file(sse_dir, "groq-llama-tool-call-single-chunk.txt"))
    usage = [e for e in events if isinstance(e, Usage)]
    assert len(usage) == 1 and usage[0].usage["total_tokens"] == 225


async def test_deepseek_empty_first_reasoning_delta_opens_no_block(sse_dir, run_stream):
    events = await run_stream(_sse_file(sse_dir, "deepseek-reasoner-tool-call.txt"))
    reasoning = [e for e in events if isinstance(e, ReasoningDelta)]
    assert reasoning and all(e.text for e in reasoning)
    assert reasoning[0].text.startswith("The")  # the frames read at once arrive joined
    assert not [e for e in events if isinstance(e, TextDelta)]  # content was "" / null only
    message = events[-1].message
    assert message.usage["prompt_cache_hit_tokens"] == 320
    assert "".join(e.text for e in reasoning) == message.reasoning


async def test_reasoning_only_stream_cut_by_length_is_not_empty(sse_dir, run_stream):
    events = await run_stream(_sse_file(sse_dir, "deepseek-v4pro-reasoning-only-length.txt"))
    message = events[-1].message
    assert isinstance(events[-1], Finish)
    assert (message.content, message.reasoning, message.finish_reason) == ("", "We need", "length")
    assert message.dropped_tool_calls == 0


async def test_openrouter_usage_in_a_chunk_with_choices(sse_dir, run_stream):
    events = await run_stream(_sse_file(sse_dir, "openrouter-kimik2-split-name-args.txt"))
    assert events[-2].usage["cost"] == 0.00005952
    assert [type(e).__name__ for e in events] == [
        "ToolCallStarted", "ToolCallDelta", "Usage", "Finish"]
