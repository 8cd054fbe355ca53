"""Compaction: the older part of the history becomes one checkpoint message, through the log.

Role: ``Compactor.before_step`` estimates the next request and compacts when it passes
``compact_threshold`` × window; ``Compactor.compact`` does one compaction: it chooses the range
(``choose_cut``: keep the last ``keep_ratio`` of the history verbatim, never separate a tool call
from its results), logs ``compaction/start`` (reason, range, estimate and everything the
summarising request is built from: system prompt, instruction, model, params, transcript limit),
streams that request through the session's client (retryable failures retried, each failed try
logged as ``compaction/attempt``), logs ``compaction/summary`` (text, usage) and then
``compaction/end {first_seq, last_seq, message}`` — the replacement the projection applies. The
checkpoint message starts with ``CHECKPOINT_MARKER`` and holds the session's first request (and
the current turn's, when it was replaced) verbatim plus the summary.

Must never: change or drop an event (the replaced events stay on disk), show the summary to the
user as the agent's answer, or loop — one compaction per call; when the kept tail alone is too big,
or the result still does not fit, it raises ``TurnFailed`` (``CONTEXT_WINDOW_EXCEEDED``).
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from agent_server.agent.budget import body_chars, estimate_tokens
from agent_server.agent.request_memo import RequestMemo, message_tokens
from agent_server.agent.exits import TurnFailed
from agent_server.agent.request import compaction_body_of
from agent_server.agent.step import Emit, ModelClient, RequestHeader, RetryPolicy
from agent_server.config.load import AgentSettings
from agent_server.llm import AssembledMessage, Finish, LLMError, encode_body
from agent_server.session import EventLog, SessionEvent, surface_messages

CHECKPOINT_MARKER = "[agent-server checkpoint]"
"""First words of every checkpoint message."""

SUMMARY_SYSTEM = (
    "You summarise the earlier part of a conversation between a user and a coding agent, so the agent "
    "can continue the work without it. Write a faithful, dense summary in plain text with these "
    "sections: Task (what the user asked for, in their terms); Constraints (every requirement, "
    "preference or prohibition the user stated, verbatim where short); Decisions (what was decided "
    "and why); Files (every file read, created or changed, with what changed); Progress (what was "
    "done and verified, with key results and errors); Open (what is still to do, unanswered "
    "questions, the next step). Keep names, paths, commands and numbers exact. Do not invent "
    "anything; do not address the user."
)
SUMMARY_INSTRUCTION = "Summarise this transcript of the conversation so far:"
SUMMARY_OUTPUT_TOKENS = 2_000
"""Tokens set aside for the summary when sizing the transcript and the checkpoint (at most a tenth
of the window)."""


def valid_cuts(messages: Sequence[dict[str, Any]]) -> list[int]:
    """Indexes ``k`` (1 ≤ k < len) where the history may be cut into ``messages[:k]`` (replaced)
    and ``messages[k:]`` (kept): every tool call before ``k`` has all its results before ``k``,
    and ``messages[k]`` is a user message or an assistant message."""
    cuts: list[int] = []
    pending: set[Any] = set()
    add, discard = pending.add, pending.discard
    for k, message in enumerate(messages):
        role = message["role"]
        if role == "tool":
            discard(message.get("tool_call_id"))
            continue
        if not pending and k > 0 and role in ("user", "assistant"):
            cuts.append(k)
        if role == "assistant":
            for call in message.get("tool_calls") or ():
                add(call["id"])
    return cuts


def choose_cut(messages: Sequence[dict[str, Any]], tokens: Sequence[float], keep_ratio: float) -> int | None:
    """Where to cut: the latest valid cut whose tail holds at least ``keep_ratio`` of the tokens
    (else the earliest valid cut: the biggest tail there is); ``None`` when there is no valid cut."""
    cuts = valid_cuts(messages)
    if not cuts:
        return None
    total = sum(tokens)
    # ``sum(tokens[k:])`` (summed left to right, as before) never grows with ``k`` for tokens ≥ 0 —
    # rounding is monotonic, so each partial sum of a longer tail is ≥ the shorter one's — so the
    # cuts whose tail fits are a prefix of ``cuts``: its last one is found by bisection, O(n log n)
    # instead of one sum per cut (O(n²): 4.4 s for a 3000-turn log before its first compaction).
    need = keep_ratio * total
    low, high = 0, len(cuts)  # cuts[:low] fit, cuts[high:] do not
    while low < high:
        middle = (low + high) // 2
        if sum(tokens[cuts[middle]:]) >= need:
            low = middle + 1
        else:
            high = middle
    return cuts[low - 1] if low else cuts[0]


def checkpoint_text(task: str, current: str | None, summary: str) -> str:
    """The checkpoint message: marker, the first request verbatim, the current one when it was
    replaced too, then the summary."""
    parts = [f"{CHECKPOINT_MARKER} The earlier part of this conversation was compacted to save context: "
             "this message replaces it, and the messages after it are verbatim.",
             f"The user's first request in this session, verbatim:\n<request>\n{task}\n</request>"]
    if current is not None:
        parts.append(f"The user's current request, verbatim:\n<request>\n{current}\n</request>")
    parts.append(f"Summary of the conversation so far:\n{summary.strip()}")
    return "\n\n".join(parts)


def _fail(message: str) -> TurnFailed:
    return TurnFailed({"code": "CONTEXT_WINDOW_EXCEEDED", "message": message, "retryable": False})


COLD_EVENTS = 2_000
"""Events the request memo may take in on the event loop; more go to a worker thread."""


class Compactor:
    """Compaction for one session: ``log``, ``emit`` (ACP updates), ``settings`` (threshold, keep
    ratio, characters per token), ``window`` (the model's context window), ``retry`` (as steps)."""

    def __init__(self, log: EventLog, emit: Emit, settings: AgentSettings, window: int, retry: RetryPolicy,
                 requests: RequestMemo | None = None) -> None:
        self.log = log
        self.requests = requests
        self.emit = emit
        self.settings = settings
        self.window = window
        self.retry = retry
        self.last_change: tuple[int, int] | None = None
        """Estimated tokens before and after the latest compaction."""

    @property
    def limit(self) -> float:
        """Estimated tokens above which a request is compacted first."""
        return self.settings.compact_threshold * self.window

    def estimate(self) -> int:
        """Estimated prompt tokens of a step started now."""
        return estimate_tokens(self.log.events, self.settings.chars_per_token, self.requests)

    async def estimate_soon(self) -> int:
        """``estimate()``, made in a worker thread when the request memo has a long stretch of the
        log still to take in (the first request after a long log was loaded): the event loop and
        the other sessions on it go on meanwhile."""
        if self.requests is not None and self.requests.behind(self.log.events) > COLD_EVENTS:
            return await asyncio.to_thread(self.estimate)
        return self.estimate()

    async def before_step(self, client: ModelClient, header: RequestHeader, *, turn: int, step: int) -> int:
        """Compact when the next request's estimate passes the limit; returns the estimate of the
        request that will be sent."""
        estimate = await self.estimate_soon()
        if estimate > self.limit:
            await self.compact(client, header, turn=turn, step=step, reason="threshold")
            estimate = self.estimate()
        return estimate

    def has_earlier_part(self) -> bool:
        """Whether there is anything to compact: a cut exists and the part it would replace holds
        more than the first request (which the checkpoint keeps verbatim anyway)."""
        messages = [m for _, m in self._surface(self.log.events)]
        tokens = self._weigh(messages)
        cut = choose_cut(messages, tokens, self.settings.keep_ratio)
        return cut is not None and cut > 1

    async def compact(self, client: ModelClient, header: RequestHeader, *, turn: int, step: int, reason: str,
                      announce: bool = True) -> None:
        """One compaction (see the module docstring); ``announce``: tell the user in one short
        ``agent_message_chunk`` (``/compact`` answers by itself). Raises ``TurnFailed`` when there is nothing
        to compact, the kept tail alone does not fit, the summary request fails, or the compacted
        request is still over the limit; ``asyncio.CancelledError`` passes through (logged)."""
        cpt = self.settings.chars_per_token
        events = self.log.events
        before = self.estimate()
        pairs = self._surface(events)  # the memo's (read here, never changed)
        messages = [m for _, m in pairs]
        tokens = self._weigh(messages)
        cut = choose_cut(messages, tokens, self.settings.keep_ratio)
        if cut is None:
            raise _fail("the conversation is too large for the model's context window and has no earlier "
                        f"part that could be compacted (about {before} tokens, window {self.window})")
        task, current = self._requests(events, pairs[cut][0] - 1)
        overhead = body_chars({"s": header.system, "t": header.tools}) / cpt + (len(task) + len(current or "")) / cpt
        reserve = min(SUMMARY_OUTPUT_TOKENS, self.window // 10)
        room = self.limit - overhead - reserve
        if sum(tokens[cut:]) > room:  # the target tail is too big: keep the smallest tail there is
            cut = valid_cuts(messages)[-1]
            task, current = self._requests(events, pairs[cut][0] - 1)
            if sum(tokens[cut:]) > room:
                raise _fail(f"the most recent part of the conversation alone (about {round(sum(tokens[cut:]))} "
                            f"tokens, kept verbatim) does not fit in the model's context window ({self.window} "
                            "tokens) with the system prompt: it cannot be compacted enough. Start a new session "
                            "or use a model with a larger window.")
        first_seq, last_seq = pairs[0][0], pairs[cut][0] - 1
        transcript_chars = int(max(2_000.0, (self.limit - reserve) * cpt - len(SUMMARY_SYSTEM) - 200))
        start = self.log.append("compaction/start", {
            "turn": turn, "step": step, "reason": reason, "estimate": before, "window": self.window,
            "first_seq": first_seq, "last_seq": last_seq, "kept_messages": len(messages) - cut,
            "system": SUMMARY_SYSTEM, "instruction": SUMMARY_INSTRUCTION, "model": header.model,
            "params": header.params, "max_transcript_chars": transcript_chars,
        })
        # its body is built at once, from ``pairs`` — surface_messages of the events before ``start``
        summary = await self._summarise(client, encode_body(compaction_body_of(
            pairs, start, self.requests.transcript_blocks if self.requests is not None else None)), start, first_seq, last_seq)
        self.log.append("compaction/summary", {"text": summary.content, "usage": summary.usage,
                                               "finish_reason": summary.finish_reason, "model": header.model})
        end = {"first_seq": first_seq, "last_seq": last_seq, "message": checkpoint_text(task, current, summary.content)}
        self.log.append("compaction/end", {**end, "estimate_before": before})
        after = self.estimate()
        self.last_change = (before, after)
        if announce:
            await self.emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": (
                f"\n\n[agent-server] The conversation history was compacted to fit the model's context window "
                f"(about {before:,} → {after:,} tokens).\n\n")},
                "_meta": {"agentServer": {"compaction": {"tokensBefore": before, "tokensAfter": after}}}})
        if after > self.limit:
            raise _fail(f"the history was compacted but the next request is still too large (about {after} "
                        f"tokens, window {self.window}): start a new session or use a model with a larger window")

    def _requests(self, events: Sequence[SessionEvent], last_seq: int) -> tuple[str, str | None]:
        """The session's first request, and the current turn's when it is replaced too."""
        users = [e for e in events if e.type == "user"]
        task = users[0].data["content"] if users else ""
        latest = users[-1] if users else None
        current = None
        if latest is not None and latest is not users[0] and latest.seq <= last_seq:
            current = latest.data["content"]
        return task, current

    def _weigh(self, messages: Sequence[dict[str, Any]]) -> list[float]:
        """``message_tokens`` of each message: the request memo's, each message weighed once
        (a load weighed the whole history already: ``RequestMemo.prepare``)."""
        cpt = self.settings.chars_per_token
        if self.requests is not None:
            return self.requests.message_tokens(messages, cpt)
        return [message_tokens(m, cpt) for m in messages]

    def _surface(self, events: Sequence[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
        """``surface_messages(events)``: the request memo's when there is one (O(events it has
        not seen): the request before this compaction has just taken the log in), to be read and
        not kept past the next request."""
        return self.requests.surface(events) if self.requests is not None else surface_messages(events)

    async def _summarise(self, client: ModelClient, body: bytes, start: SessionEvent, first_seq: int,
                         last_seq: int) -> AssembledMessage:
        """The summarising request (``body``: ``encode_body(compaction_body(events, start.seq))``)."""
        span = {"first_seq": first_seq, "last_seq": last_seq}
        for attempt in range(1, self.retry.max_attempts + 1):
            try:
                message = await _stream(client, body)
                if not message.content.strip():
                    raise LLMError("EMPTY_RESPONSE", "the summary was empty")
                return message
            except asyncio.CancelledError:
                self.log.append("compaction/attempt", {"attempt": attempt, "cancelled": True})
                self.log.append("compaction/end", {**span, "aborted": "cancelled"})
                raise
            except LLMError as error:
                self.log.append("compaction/attempt", {"attempt": attempt, "error": error.to_dict(),
                                                       "status": error.status})
                if not error.retryable or attempt == self.retry.max_attempts:
                    self.log.append("compaction/end", {**span, "aborted": "failed"})
                    raise TurnFailed({**error.to_dict(),
                                      "message": f"compacting the history failed: {error.message}"}) from error
                await asyncio.sleep(self.retry.delay(attempt, error))
        raise AssertionError("unreachable")


async def _stream(client: ModelClient, body: bytes) -> AssembledMessage:
    """The summarising request's final message (nothing of it is forwarded to the editor)."""
    async for event in client.stream(body):
        if isinstance(event, Finish):
            return event.message
    raise LLMError("STREAM_CLOSED", "the stream ended without a finish")


__all__ = ["CHECKPOINT_MARKER", "Compactor", "checkpoint_text", "choose_cut", "message_tokens", "valid_cuts"]
