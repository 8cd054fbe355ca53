"""The token budget: how big the next request is, how full the window was, what the session cost.

Role: ``estimate_tokens(events, chars_per_token)`` — the tokens of the request a step started now
would send: the larger of the provider's ``usage.prompt_tokens`` of the latest request plus the
characters added since ÷ ``chars_per_token``, and all the body's characters ÷ ``chars_per_token``
(the provider's count is trusted upwards only: one that reports tiny or zero counts must not let
the history grow past the window); before any usage is known (or after a compaction changed the
history), the character estimate alone. ``usage_update(...)`` — the ACP
``usage_update`` after a step (``used``: what the next request carries, ≤ ``size``; ``cost`` when a price is configured, the
provider's prefix-cache figures under ``_meta.agentServer.cache`` when its usage reports them);
``session_cost`` sums the logged usage of every model request at its model's price, the tokens its
cache served (``llm.cached_tokens``) at the ``cached_input`` price.

Must never: read anything but the events and settings it is given, or report ``used`` > ``size``.
"""

from __future__ import annotations

from typing import Any, Sequence

from agent_server.agent.request import RequestRebuildError, pending_body, request_body
from agent_server.agent.request_memo import RequestMemo, message_images
from agent_server.config.load import AgentSettings
from agent_server.llm import cached_tokens, encode_body
from agent_server.session import SessionEvent


def body_chars(body: dict[str, Any]) -> int:
    """Characters of the encoded request ``body`` (what the estimate divides)."""
    return len(encode_body(body).decode("utf-8"))


def body_images(body: dict[str, Any]) -> int:
    """Image parts in a request ``body``'s messages."""
    return sum(message_images(m) for m in body.get("messages") or ())


def estimate_tokens(events: Sequence[SessionEvent], chars_per_token: float, memo: RequestMemo | None = None,
                    image_tokens: int = 0) -> int:
    """Estimated prompt tokens of a step started after ``events`` (see the module docstring); each
    image of the history counts ``image_tokens`` (its reference's characters aside).

    ``memo``: the session's ``RequestMemo`` (the same figure, without re-walking the log).
    Raises ``RequestRebuildError`` when there is no ``request/header`` yet.
    """
    then: int | None = None
    then_images = 0
    if memo is not None:
        anchor = memo.usage_anchor(events)
        if anchor is not None:
            try:
                then = memo.step_chars(events, anchor[0])  # before the whole list: the memo extends this prefix
                then_images = memo.step_images(anchor[0])
            except RequestRebuildError:
                then = None
        now = memo.pending_chars(events)
        now_images = memo.images
    else:
        pending = pending_body(events)
        now, now_images = body_chars(pending), body_images(pending)
        anchor = _usage_anchor(events)
        if anchor is not None:
            try:
                earlier = request_body(events, anchor[0])
                then, then_images = body_chars(earlier), body_images(earlier)
            except RequestRebuildError:
                then = None
    by_chars = round(now / chars_per_token) + now_images * image_tokens
    if anchor is not None:
        prompt_tokens = anchor[1]
        if then is not None and now >= then:
            # never below the character estimate: a provider that reports a tiny (or zero)
            # prompt_tokens must not let the history grow past the window
            return max(prompt_tokens + round((now - then) / chars_per_token)
                       + (now_images - then_images) * image_tokens, by_chars)
    return by_chars


def _usage_anchor(events: Sequence[SessionEvent]) -> tuple[int, int] | None:
    """``(step/start seq, prompt_tokens)`` of the latest request with a provider count, unless a
    compaction came after it (then the count describes a history that is no longer sent)."""
    step_seq: int | None = None
    found: tuple[int, int] | None = None
    for event in events:
        if event.type == "step/start":
            step_seq = event.seq
        elif event.type == "assistant" and step_seq is not None:
            prompt = (event.data.get("usage") or {}).get("prompt_tokens")
            if isinstance(prompt, int) and prompt > 0:
                found = (step_seq, prompt)
        elif event.type == "compaction/end" and event.data.get("message"):
            found = None
    return found


def session_cost(events: Sequence[SessionEvent], settings: AgentSettings, memo: "CostMemo | None" = None
                 ) -> dict[str, Any] | None:
    """``{"amount", "currency"}``: the logged usage of every request (steps and summaries) at the
    configured price of the model it went to; ``None`` when no model used has a price. ``memo``:
    the session's ``CostMemo`` (the same figure, adding only the events it has not seen)."""
    return (memo or CostMemo()).cost(events, settings)


class CostMemo:
    """``session_cost`` over a growing list of events, summed in the same order (the same float):
    only events not seen yet are added; another list, or other settings, start it again. It also
    sums the session's prompt, cached and completion tokens and what the cache saved
    (``tokens``)."""

    def __init__(self) -> None:
        self._seen: tuple[Any, Any, int, Any] = (None, None, 0, None)  # first, last, count, settings
        self._model: str | None = None
        self._amount, self._currency, self._priced = 0.0, None, False
        self._prompt = self._cached = self._completion = 0
        self._cache_known = False  # a request's usage said something of the cache
        self._saved = 0.0

    def behind(self, events: Sequence[SessionEvent]) -> int:
        """How many events of ``events`` the next ``cost`` has to add (all when it starts again)."""
        first, last, n, _ = self._seen
        if n and len(events) >= n and events[0] is first and events[n - 1] is last:
            return len(events) - n
        return len(events)

    def cost(self, events: Sequence[SessionEvent], settings: AgentSettings) -> dict[str, Any] | None:
        """``session_cost(events, settings)``."""
        self._take(events, settings)
        if not self._priced:
            return None
        return {"amount": round(self._amount, 6), "currency": self._currency}

    def tokens(self, events: Sequence[SessionEvent], settings: AgentSettings) -> dict[str, Any]:
        """The session's ``prompt``, ``cached`` (``None`` when no usage said anything of the cache)
        and ``completion`` tokens over every request, and ``saved``: what the cached tokens cost
        less than at the ``input`` price (``{"amount", "currency"}``, ``None`` without a price)."""
        self._take(events, settings)
        return {"prompt": self._prompt, "cached": self._cached if self._cache_known else None,
                "completion": self._completion,
                "saved": {"amount": round(self._saved, 6), "currency": self._currency} if self._priced else None}

    def _take(self, events: Sequence[SessionEvent], settings: AgentSettings) -> None:
        first, last, n, seen_settings = self._seen
        if not (n == 0 or (settings is seen_settings and len(events) >= n and events[0] is first
                           and events[n - 1] is last)):
            self.__init__()
            n = 0
        for event in events[n:]:
            if event.type == "request/header":
                self._model = event.data.get("model")
                continue
            if event.type == "assistant":
                used_model = self._model
            elif event.type == "compaction/summary":
                used_model = event.data.get("model")
            else:
                continue
            usage = event.data.get("usage") or {}
            prompt = int(usage.get("prompt_tokens") or 0)
            completion = int(usage.get("completion_tokens") or 0)
            cached = cached_tokens(usage)
            self._prompt += prompt
            self._completion += completion
            if cached is not None:
                self._cache_known = True
                self._cached += cached
            price = settings.price_for(used_model)
            if price is None:
                continue
            self._priced = True
            self._currency = self._currency or price.currency
            hit = min(cached or 0, prompt)
            cached_price = price.input if price.cached_input is None else price.cached_input
            self._amount += (hit * cached_price + (prompt - hit) * price.input + completion * price.output) / 1_000_000
            self._saved += hit * (price.input - cached_price) / 1_000_000
        if events:
            self._seen = (events[0], events[-1], len(events), settings)


def usage_update(events: Sequence[SessionEvent], usage: dict[str, Any] | None, estimate: int | None,
                 size: int, settings: AgentSettings, costs: CostMemo | None = None,
                 carried: int | None = None) -> dict[str, Any] | None:
    """The ``usage_update`` after a step whose provider ``usage`` is given (``estimate``: the
    request's estimated prompt tokens, used when the provider did not count the prompt), or
    ``None`` when nothing is known. ``carried``: ``estimate_tokens`` after the step's answer was
    logged — what the next request carries; ``used`` is never below it (a provider that reports
    no completion, or no usage at all, must not leave the answer out of the meter). ``used`` is
    clamped to ``size``."""
    usage = usage or {}
    prompt = usage.get("prompt_tokens") or 0
    completion = usage.get("completion_tokens") or 0
    if not prompt and estimate:
        prompt = estimate
    used = (usage.get("total_tokens") or prompt + completion) if usage.get("prompt_tokens") else prompt + completion
    if carried is not None and isinstance(used, int):
        used = max(used, carried)
    if not isinstance(used, int) or used <= 0:
        return None
    update: dict[str, Any] = {"sessionUpdate": "usage_update", "used": min(used, size), "size": size}
    costs = costs or CostMemo()
    cost = costs.cost(events, settings)
    if cost is not None:
        update["cost"] = cost
    totals = costs.tokens(events, settings)
    cached = cached_tokens(usage)
    if cached is not None or totals["cached"] is not None:
        cache: dict[str, Any] = {"promptTokens": int(usage.get("prompt_tokens") or 0), "cachedTokens": cached,
                                 "sessionPromptTokens": totals["prompt"], "sessionCachedTokens": totals["cached"]}
        if totals["saved"] is not None:
            cache["saved"] = totals["saved"]
        update["_meta"] = {"agentServer": {"cache": cache}}
    return update
