"""What a provider's usage object says about its prefix cache.

Role: ``cached_tokens(usage)`` — the prompt tokens the provider served from its cache, read from the
fields providers document: OpenAI's ``prompt_tokens_details.cached_tokens`` (also OpenRouter, GLM,
vLLM), DeepSeek's ``prompt_cache_hit_tokens`` (with ``prompt_cache_miss_tokens``: hit + miss =
prompt), Moonshot's top-level ``cached_tokens``. Several fields name the same tokens (DeepSeek sends
both its own and OpenAI's): the largest is taken, never a sum, and never more than
``prompt_tokens``.

Must never: add fields together, or report a cache the usage does not mention (``None``, not 0).
"""

from __future__ import annotations

from typing import Any, Mapping


def _count(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def cached_tokens(usage: Mapping[str, Any] | None) -> int | None:
    """Prompt tokens read from the provider's cache, or ``None`` when ``usage`` says nothing of it."""
    if not isinstance(usage, Mapping):
        return None
    prompt = _count(usage.get("prompt_tokens"))
    details = usage.get("prompt_tokens_details")
    found = [n for n in (
        _count(details.get("cached_tokens")) if isinstance(details, Mapping) else None,
        _count(usage.get("prompt_cache_hit_tokens")),
        _count(usage.get("cached_tokens")),
    ) if n is not None]
    miss = _count(usage.get("prompt_cache_miss_tokens"))
    if not found and miss is not None and prompt is not None:
        found = [max(0, prompt - miss)]
    if not found:
        return None
    cached = max(found)
    return min(cached, prompt) if prompt is not None else cached
