"""``llm.cached_tokens``: the prompt tokens a provider's prefix cache served, from its usage fields."""

import json

from support.paths import SSE_DIR

from agent_server.llm import cached_tokens


def recorded_usage(name):
    """The usage object of a recorded stream (its last frame with one)."""
    frames = [json.loads(line[6:]) for line in (SSE_DIR / name).read_text().splitlines()
              if line.startswith("data: {")]
    return [f["usage"] for f in frames if f.get("usage")][-1]


def test_deepseek_reports_the_same_tokens_in_two_fields_and_they_are_not_added():
    usage = recorded_usage("deepseek-reasoner-tool-call.txt")
    assert usage["prompt_cache_hit_tokens"] == usage["prompt_tokens_details"]["cached_tokens"] == 320
    assert cached_tokens(usage) == 320


def test_openai_style_cached_tokens_zero_is_a_figure_and_no_field_is_none():
    assert cached_tokens(recorded_usage("azure-router-empty-first-chunk.txt")) == 0
    assert cached_tokens(recorded_usage("openai-gpt4o-parallel-tools.txt")) is None
    assert cached_tokens(None) is None and cached_tokens({"prompt_tokens": 5}) is None


def test_cached_is_never_more_than_the_prompt_and_a_miss_count_alone_gives_the_rest():
    assert cached_tokens({"prompt_tokens": 100, "prompt_tokens_details": {"cached_tokens": 900}}) == 100
    assert cached_tokens({"prompt_tokens": 100, "prompt_cache_miss_tokens": 30}) == 70
    assert cached_tokens({"prompt_tokens": 100, "cached_tokens": 64}) == 64  # Moonshot
    assert cached_tokens({"prompt_tokens": 100, "prompt_cache_hit_tokens": "80"}) is None  # not a count
