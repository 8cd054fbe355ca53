"""End to end: the provider's prefix cache read from usage and priced (issue 33, items 3 and 4).

DeepSeek reports ``prompt_cache_hit_tokens``/``prompt_cache_miss_tokens`` and, like OpenAI,
``prompt_tokens_details.cached_tokens``: the same tokens, never added. The cost counts cached input at
``cached_input``; ``usage_update`` carries the cache under ``_meta``, ``/usage`` names its share, and
the prompt response's ``usage`` (ACP, unstable) has ``cachedReadTokens``.
"""

from __future__ import annotations

from support.paths import SSE_DIR

from agent_server.offline import text_stream

PRICED = ('[agent]\nprice_per_million = { input = 0.27, cached_input = 0.07, output = 1.10, currency = "USD" }\n')
BOTH_FIELDS = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
               "prompt_cache_hit_tokens": 800, "prompt_cache_miss_tokens": 200,
               "prompt_tokens_details": {"cached_tokens": 800}}


async def start(factory, endpoint, workspace, tmp_path, config=PRICED):
    path = tmp_path / "config.toml"
    path.write_text(config)
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(path)})
    await h.initialize()
    return h, (await h.new_session(str(workspace))).session_id


def prompt_answer(h) -> dict:
    return h.transcript.response_to(h.transcript.requests("session/prompt")[-1]).message["result"]


async def test_cached_input_is_priced_apart_and_deepseek_and_openai_fields_are_not_added(
        acp_harness_factory, endpoint, workspace, tmp_path):
    endpoint.push(text_stream("Cached.", usage=BOTH_FIELDS))
    h, sid = await start(acp_harness_factory, endpoint, workspace, tmp_path)
    assert (await h.prompt(sid, "hi")).stop_reason == "end_turn"
    (update,) = h.updates(sid, "usage_update")
    assert update["cost"] == {"amount": 0.00022, "currency": "USD"}  # (800×0.07 + 200×0.27 + 100×1.10) / 10⁶
    cache = update["_meta"]["agentServer"]["cache"]
    assert (cache["promptTokens"], cache["cachedTokens"], cache["sessionCachedTokens"]) == (1000, 800, 800)
    assert cache["saved"] == {"amount": 0.00016, "currency": "USD"}  # 800 × (0.27 − 0.07) / 10⁶
    assert prompt_answer(h)["usage"] == {"totalTokens": 1100, "inputTokens": 1000, "outputTokens": 100,
                                         "cachedReadTokens": 800}
    await h.prompt(sid, "/usage")
    assert "Cache: 80 % of input tokens this session" in h.agent_text(sid)
    assert "saved $0.00016." in h.agent_text(sid)


async def test_a_recorded_deepseek_stream_counts_its_cache_hit_once(acp_harness_factory, endpoint, workspace, tmp_path):
    endpoint.push({"kind": "sse_file", "path": str(SSE_DIR / "deepseek-reasoner-tool-call.txt")})
    endpoint.push(text_stream("No weather tool here.", usage={"prompt_tokens": 400, "completion_tokens": 10}))
    h, sid = await start(acp_harness_factory, endpoint, workspace, tmp_path)
    assert (await h.prompt(sid, "Weather in Berlin?")).stop_reason == "end_turn"
    first, second = h.updates(sid, "usage_update")
    assert first["_meta"]["agentServer"]["cache"]["cachedTokens"] == 320  # both fields say 320: not 640
    assert first["cost"]["amount"] == round((320 * 0.07 + 19 * 0.27 + 83 * 1.10) / 1e6, 6)
    # a provider that says nothing of its cache: that request has no figure, the session keeps its own
    cache = second["_meta"]["agentServer"]["cache"]
    assert cache["cachedTokens"] is None and cache["sessionCachedTokens"] == 320
    assert cache["sessionPromptTokens"] == 739
    await h.prompt(sid, "/usage")
    assert "Cache: 43 % of input tokens this session (320 of 739" in h.agent_text(sid)


async def test_a_provider_without_cache_fields_adds_no_cache_meta(acp_harness_factory, endpoint, workspace, tmp_path):
    endpoint.push(text_stream("Plain.", usage={"prompt_tokens": 100, "completion_tokens": 5, "total_tokens": 105}))
    h, sid = await start(acp_harness_factory, endpoint, workspace, tmp_path)
    await h.prompt(sid, "hi")
    (update,) = h.updates(sid, "usage_update")
    assert "_meta" not in update and update["cost"]["amount"] == round((100 * 0.27 + 5 * 1.10) / 1e6, 6)
    assert "cachedReadTokens" not in prompt_answer(h)["usage"]
    await h.prompt(sid, "/usage")
    assert "Cache" not in h.agent_text(sid)
