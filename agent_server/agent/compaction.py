"""Compaction: the older part of the history becomes one checkpoint message, through the log.

Role: ``Compactor.before_step`` estimates the next request and compacts when it passes
``compact_threshold`` × window; ``Compactor.compact`` does one compaction: it chooses the range
(``choose_cut``: keep the last ``keep_ratio`` of the history verbatim, never separate a tool call
from its results), logs ``compaction/start`` (reason, range, estimate and everything the
summarising request is built from: system prompt, instruction, model, params, transcript limit and
rule), streams that request through the session's client (retryable failures retried, each failed
try logged as ``compaction/attempt``), logs ``compaction/summary`` (text, usage) and then
``compaction/end {first_seq, last_seq, message}`` — the replacement the projection applies. The
checkpoint message starts with ``CHECKPOINT_MARKER`` and holds the session's first request (and
the current turn's, when it was replaced) verbatim plus the summary.

Must never: change or drop an event (the replaced events stay on disk), show the summary to the
user as the agent's answer, loop — one compaction per call —, or log as done a compaction whose
request would not fit (``aborted: "no_fit"``; a summary longer than its room is cut to it first).
When even the smallest tail does not fit, the whole history is replaced (no call left open; the
current request verbatim in the checkpoint); when that does not fit either, or the result still
does not, it raises ``TurnFailed`` (``CONTEXT_WINDOW_EXCEEDED``).
"""

from __future__ import annotations

import asyncio
import json
from bisect import bisect_left
from typing import Any, Callable, Sequence

from agent_server.agent.budget import body_chars, estimate_tokens
from agent_server.agent.request_memo import RequestMemo, message_tokens, valid_cuts
from agent_server.agent.exits import TurnFailed
from agent_server.agent.request import TRANSCRIPT_RULE, RequestRebuildError, compaction_body_of
from agent_server.agent.step import Emit, ModelClient, RequestHeader, RetryPolicy, Waiting
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
SUMMARY_CUT = "\n[agent-server: the summary was cut here; it ran past the room set aside for it]"
"""The end of a summary cut to its room (``Compactor._within_budget``)."""
FALLBACK_HEAD = ("[agent-server: the model gave no summary of this part of the conversation; the end of its "
                 "transcript follows, word for word]\n")
"""The head of what stands for a summary the model did not write (``Compactor._fallback``)."""
SUMMARY_OUTPUT_TOKENS = 2_000
"""Tokens set aside for the summary when sizing the transcript and the checkpoint (at most a tenth
of the window)."""


def choose_cut(messages: Sequence[dict[str, Any]], tokens: Sequence[float], keep_ratio: float,
               cuts: Sequence[int] | None = None, hint: int | None = None,
               tail: Callable[[int], float] | None = None) -> int | None:
    """Where to cut: the latest valid cut whose tail holds at least ``keep_ratio`` of the tokens
    (else the earliest valid cut: the biggest tail there is); ``None`` when there is no valid cut.
    ``cuts``: ``valid_cuts(messages)`` when known (``RequestMemo.history``); ``hint``: a cut this
    may well return (a load planned the compaction its first prompt makes), checked with two sums
    instead of a bisection's dozen — the answer is the same either way. ``tail``: ``k`` →
    ``sum(tokens[k:])`` (``RequestMemo.tail_sum``, the same sums carried on)."""
    cuts = valid_cuts(messages) if cuts is None else cuts
    if not cuts:
        return None
    if tail is None:
        def tail(k: int) -> float:
            return sum(tokens[k:])
    total = tail(0)
    # ``sum(tokens[k:])`` (summed left to right, as before) never grows with ``k`` for tokens ≥ 0 —
    # rounding is monotonic, so each partial sum of a longer tail is ≥ the shorter one's — so the
    # cuts whose tail fits are a prefix of ``cuts``: its last one is found by bisection, O(n log n)
    # instead of one sum per cut (O(n²): 4.4 s for a 3000-turn log before its first compaction).
    need = keep_ratio * total
    at = bisect_left(cuts, hint) if hint is not None else len(cuts)
    if at < len(cuts) and cuts[at] == hint and tail(hint) >= need and (
            at + 1 == len(cuts) or tail(cuts[at + 1]) < need):
        return hint  # the last cut that fits: what the bisection finds
    low, high = 0, len(cuts)  # cuts[:low] fit, cuts[high:] do not
    while low < high:
        middle = (low + high) // 2
        if tail(cuts[middle]) >= need:
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


def compaction_done(compaction_id: str, summary: str, before: int | None, after: int | None) -> dict[str, Any]:
    """The ACP ``compaction_update`` of a finished compaction: ``completed``, the summary the model
    goes on from, the estimates (the same update live and on ``session/load``). A front end sends
    it only to a client that takes them (``session.compaction``)."""
    tokens = {k: v for k, v in (("tokensBefore", before), ("tokensAfter", after)) if v is not None}
    return {"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "completed",
            "summary": [{"type": "text", "text": summary}], "_meta": {"agentServer": tokens}}


def _fail(message: str) -> TurnFailed:
    return TurnFailed({"code": "CONTEXT_WINDOW_EXCEEDED", "message": message, "retryable": False})


_tools_chars: tuple[Any, int] = (None, 0)  # the last tool list ``head_chars`` weighed, and its share


def head_chars(system: str, tools: Any) -> int:
    """``body_chars({"s": system, "t": tools})``: what a compaction's plan weighs the request's head
    by. The tools' share is kept for the last list weighed — a load plans its first prompt's
    compaction with the logged schemas, the compaction then with equal ones, and comparing them is
    a fraction of encoding them; ``{"s":S,"t":T}`` is ``{"s":S}`` and ``{"t":T}`` less one brace."""
    global _tools_chars
    known, chars = _tools_chars
    if tools is not known and tools != known:
        chars = body_chars({"t": tools})
        _tools_chars = (tools, chars)
    return body_chars({"s": system}) + chars - 1


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
        return estimate_tokens(self.log.events, self.settings.chars_per_token, self.requests,
                               self.settings.image_tokens)

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
        _, tokens, cuts = self._history(self.log.events)
        cut = choose_cut((), tokens, self.settings.keep_ratio, cuts)
        return cut is not None and cut > 1

    async def compact(self, client: ModelClient, header: RequestHeader, *, turn: int, step: int, reason: str,
                      announce: bool = True) -> None:
        """One compaction (see the module docstring); ``announce``: tell the user in one short
        ``agent_message_chunk`` (``/compact`` answers by itself). Raises ``TurnFailed`` when there is nothing
        to compact, the kept tail alone does not fit, the summary request fails, or the compacted
        request is still over the limit; ``asyncio.CancelledError`` passes through (logged)."""
        rendering = getattr(self.requests, "rendering", None)
        if rendering is not None and not rendering.done():  # a prompt sent before its load answered: the load encodes this body
            await asyncio.wait([rendering])
        events = self.log.events
        before = self.estimate()
        pairs, tokens, cuts = self._history(events)  # the memo's (read here, never changed)
        cut, task, current = self._plan(events, pairs, tokens, cuts, header.system, header.tools, before)
        first_seq, last_seq = pairs[0][0], pairs[cut][0] - 1 if cut < len(pairs) else pairs[-1][0]
        start = self.log.append("compaction/start", {
            "turn": turn, "step": step, "reason": reason, "estimate": before, "window": self.window,
            "first_seq": first_seq, "last_seq": last_seq, "kept_messages": len(pairs) - cut,
            **self.summary_request(header.model, header.params),
        })
        compaction_id = f"compaction-{start.seq}"  # from the log: a load names it the same
        await self.emit({"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "in_progress",
                         "_meta": {"agentServer": {"reason": reason, "tokensBefore": before}}})
        # its body is built at once, from ``pairs`` — surface_messages of the events before ``start``
        try:
            memo = self.requests
            if memo is None:
                body = encode_body(compaction_body_of(pairs, start))
            else:  # the memo's: a load made the body its first prompt's compaction sends
                body = memo.compaction_body_within(start.data, first_seq, last_seq, pairs)
            summary = await self._summarise(client, body, start, first_seq, last_seq)
        except asyncio.CancelledError:  # told without waiting: the turn is being cancelled
            asyncio.ensure_future(self.emit({"sessionUpdate": "compaction_update", "compactionId": compaction_id,
                                             "status": "cancelled"}))
            raise
        except TurnFailed as exc:
            await self.emit({"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "failed",
                             "error": str(exc.error.get("message") or exc.error.get("code"))})
            raise
        if summary is None:  # the model answered every try, but never with a summary: its last part, as it was
            text = self._fallback(body)
            self.log.append("compaction/fallback", {"text": text, "reason": "EMPTY_RESPONSE"})
        else:
            text = summary.content
            self.log.append("compaction/summary", {"text": text, "usage": summary.usage,
                                                   "finish_reason": summary.finish_reason, "model": header.model})
        message = checkpoint_text(task, current, self._within_budget(text))
        cpt, tail = self.settings.chars_per_token, self._tail(tokens)
        kept = tail(cut) if cut < len(pairs) else 0.0
        replaced, checkpoint = round(tail(0) - kept), round(len(message) / cpt)
        predicted = round(head_chars(header.system, header.tools) / cpt + kept + checkpoint)
        if predicted > self.limit:  # no use: never logged as done
            self.log.append("compaction/end", {"first_seq": first_seq, "last_seq": last_seq, "aborted": "no_fit"})
            error = _fail(f"compacting the history would not make the next request fit: it replaces about "
                          f"{replaced:,} tokens with a checkpoint of about {checkpoint:,} (the first request "
                          f"verbatim and the summary), and the request would still be about {predicted:,} tokens "
                          f"(window {self.window:,}): start a new session or use a model with a larger window")
            await self.emit({"sessionUpdate": "compaction_update", "compactionId": compaction_id, "status": "failed",
                             "error": error.error["message"]})
            raise error
        end = {"first_seq": first_seq, "last_seq": last_seq, "message": message}
        self.log.append("compaction/end", {**end, "estimate_before": before})
        after = self.estimate()
        self.last_change = (before, after)
        await self.emit(compaction_done(compaction_id, text, before, after))
        if announce:
            how = "" if summary is not None else (
                ": the model gave no summary of the earlier part, so the end of its transcript is kept word for "
                "word instead")
            await self.emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": (
                f"\n\n[agent-server] The conversation history was compacted to fit the model's context window "
                f"(about {before:,} → {after:,} tokens){how}.\n\n")}, "_meta": {"agentServer": {"compaction": {
                    "tokensBefore": before, "tokensAfter": after, "compactionId": compaction_id}}}})
        if after > self.limit:
            raise _fail(f"the history was compacted but the next request is still too large (about {after} "
                        f"tokens, window {self.window}): start a new session or use a model with a larger window")

    def _fallback(self, body: bytes) -> str:
        """What stands for the summary when the model gave none (it answered with a tool call, or
        only reasoning, every try): the end of the transcript the summarising request ``body`` sent,
        as much as the summary's room holds, from a line's start — made from the log alone, and
        logged (``compaction/fallback``), so a replay reads it back as it was."""
        content = json.loads(body)["messages"][-1]["content"]
        transcript = content.split("<transcript>\n", 1)[-1].removesuffix("\n</transcript>")
        room = int(min(SUMMARY_OUTPUT_TOKENS, self.window // 10) * self.settings.chars_per_token) - len(FALLBACK_HEAD)
        tail = transcript[-room:] if room > 0 else ""
        if len(tail) < len(transcript):
            line = tail.find("\n")
            tail = tail[line + 1:] if 0 <= line < len(tail) // 2 else tail
        return FALLBACK_HEAD + tail

    def _within_budget(self, summary: str) -> str:
        """``summary``, cut to the tokens set aside for it (``SUMMARY_OUTPUT_TOKENS``, at most a
        tenth of the window) when the model wrote more: the plan made room for that much only."""
        reserve = min(SUMMARY_OUTPUT_TOKENS, self.window // 10)
        most = int(reserve * self.settings.chars_per_token) - len(SUMMARY_CUT)
        return summary if len(summary) <= most + len(SUMMARY_CUT) else summary[:max(most, 0)] + SUMMARY_CUT

    @property
    def transcript_chars(self) -> int:
        """The summary request's transcript limit (``max_transcript_chars``)."""
        reserve = min(SUMMARY_OUTPUT_TOKENS, self.window // 10)
        return int(max(2_000.0, (self.limit - reserve) * self.settings.chars_per_token - len(SUMMARY_SYSTEM) - 200))

    def summary_request(self, model: str, params: dict[str, Any]) -> dict[str, Any]:
        """The ``compaction/start`` data a summarising request is made of (``SUMMARY_FIELDS``)
        for the session's ``model`` and request ``params``."""
        return {"system": SUMMARY_SYSTEM, "instruction": SUMMARY_INSTRUCTION, "model": model, "params": params,
                "max_transcript_chars": self.transcript_chars, "transcript_rule": TRANSCRIPT_RULE}

    def plan_summary(self) -> tuple[list[dict[str, Any]], dict[str, Any], Any] | None:
        """At a load (its worker thread, after ``RequestMemo.prepare``): when the history is over
        the limit already, the first prompt's step will compact it first — the replaced messages,
        ``summary_request`` and ``RequestMemo.span`` of that compaction, as if the prompt were
        a short user message after the history (with the logged request header's system text,
        tools, model and parameters), for the load to encode ahead
        (``RequestMemo.compaction_body_within``, which the compaction makes again only if its
        messages or request turn out different); ``None`` when no compaction is due."""
        memo, events = self.requests, self.log.events
        if memo is None or memo.first_user is None:
            return None
        try:
            if self.estimate() <= self.limit:
                return None
            pairs, tokens, cuts = self._history(events)
        except RequestRebuildError:
            return None
        header = memo.header
        if header is None or not pairs:
            return None
        prompt = len(pairs)  # the prompt's message: a cut when no tool call waits for a result
        try:
            with_prompt = [*tokens, 0.0]
            tail = self._tail(tokens)

            def prompt_tail(k: int) -> float:  # ``sum(with_prompt[k:])``: the prompt weighs 0
                return tail(k) if k < prompt else sum(with_prompt[k:])

            cut, _, _ = self._plan(events, pairs, with_prompt, [*cuts, prompt] if memo.no_calls_open else cuts,
                                   header.data["system"], header.data.get("tools") or [], 0, prompt_after=True,
                                   tail=prompt_tail)
        except TurnFailed:
            return None
        last = pairs[cut][0] - 1 if cut < prompt else pairs[-1][0]
        return ([m for seq, m in pairs if seq <= last],
                self.summary_request(header.data.get("model", ""), header.data.get("params") or {}),
                memo.span(pairs[0][0], last) if pairs is memo.messages else None)

    def _plan(self, events: Sequence[SessionEvent], pairs: Sequence[tuple[int, dict[str, Any]]], tokens: Sequence[float],
              cuts: Sequence[int], system: str, tools: Any, before: int, prompt_after: bool = False,
              tail: Callable[[int], float] | None = None) -> tuple[int, str, str | None]:
        """``(cut, first request, current request or None)`` of a compaction of ``pairs`` (see the
        module docstring); ``prompt_after``: as if a user message followed the history (index
        ``len(pairs)``, in ``tokens`` and ``cuts``); ``tail``: ``k`` → ``sum(tokens[k:])``.
        Raises ``TurnFailed``."""
        cpt = self.settings.chars_per_token
        memo = self.requests
        tail = tail or self._tail(tokens)
        cut = choose_cut((), tokens, self.settings.keep_ratio, cuts, memo.cut_hint if memo is not None else None, tail)
        if memo is not None:
            memo.cut_hint = cut
        if cut is None:
            raise _fail("the conversation is too large for the model's context window and has no earlier "
                        f"part that could be compacted (about {before} tokens, window {self.window})")

        def requests(cut: int) -> tuple[str, str | None]:
            return self._requests(events, pairs[cut][0] - 1 if cut < len(pairs) else events[-1].seq + 1, prompt_after)

        task, current = requests(cut)
        overhead = (head_chars(system, tools) + len(checkpoint_text(task, current, ""))) / cpt  # all but the summary
        reserve = min(SUMMARY_OUTPUT_TOKENS, self.window // 10)
        room = self.limit - overhead - reserve
        if tail(cut) > room:  # the target tail is too big: keep the smallest tail there is
            cut = cuts[-1]
            task, current = requests(cut)
            whole = len(pairs)
            if tail(cut) > room and not prompt_after and cut < whole and self._nothing_open(pairs):
                # even that does not fit (one huge answer): the summary stands for all of it, the
                # current request kept verbatim in the checkpoint
                cut = whole
                task, current = requests(cut)
                overhead = (head_chars(system, tools) + len(checkpoint_text(task, current, ""))) / cpt  # all but the summary
                room = self.limit - overhead - reserve
            kept = tail(cut) if cut < whole else 0.0
            if cut == whole and kept > room:
                verbatim = round(len(task) / cpt + len(current or "") / cpt)
                raise _fail(f"the requests a checkpoint keeps verbatim (the session's first request and the "
                            f"current one, about {verbatim} tokens) leave no room for a summary in the model's "
                            f"context window ({self.window} tokens) with the system prompt: it cannot be "
                            "compacted enough. Start a new session or use a model with a larger window.")
            if kept > room:
                raise _fail(f"the most recent part of the conversation alone (about {round(kept)} "
                            f"tokens, kept verbatim) does not fit in the model's context window ({self.window} "
                            "tokens) with the system prompt: it cannot be compacted enough. Start a new session "
                            "or use a model with a larger window.")
        return cut, task, current

    def _tail(self, tokens: Sequence[float]) -> Callable[[int], float]:
        """``k`` → ``sum(tokens[k:])``: the request memo's, carried on, when ``tokens`` are its weights."""
        if self.requests is not None and self.requests.weighs(tokens):
            return self.requests.tail_sum
        return lambda k: sum(tokens[k:])

    @staticmethod
    def _nothing_open(pairs: Sequence[tuple[int, dict[str, Any]]]) -> bool:
        """Whether every tool call of the history has its result (a cut after all of it is valid)."""
        pending: set[Any] = set()
        for _, message in reversed(pairs):  # the last assistant message's calls are the only open ones
            if message["role"] == "tool":
                pending.add(message.get("tool_call_id"))
            else:
                return message["role"] != "assistant" or all(
                    c["id"] in pending for c in message.get("tool_calls") or ())
        return True

    def _requests(self, events: Sequence[SessionEvent], last_seq: int, prompt_after: bool = False
                  ) -> tuple[str, str | None]:
        """The session's first request, and the current turn's when it is replaced too
        (``prompt_after``: a prompt follows ``events``, the current request — never replaced)."""
        memo = self.requests
        if memo is not None and memo.behind(events) == 0:  # the memo took them in: its first and latest
            first, latest = memo.first_user, memo.last_user
        else:
            users = [e for e in events if e.type == "user"]
            first, latest = (users[0], users[-1]) if users else (None, None)
        task = first.data["content"] if first is not None else ""
        current = None
        if not prompt_after and latest is not None and latest is not first and latest.seq <= last_seq:
            current = latest.data["content"]
        return task, current

    def _history(self, events: Sequence[SessionEvent]
                 ) -> tuple[list[tuple[int, dict[str, Any]]], list[float], list[int]]:
        """``(surface_messages(events), message_tokens of each, valid_cuts)``: the request memo's
        when there is one (each message weighed once: a load weighed the whole history already),
        to be read and not kept past the next request."""
        cpt = self.settings.chars_per_token
        if self.requests is not None:
            try:
                return self.requests.history(events, cpt, self.settings.image_tokens)
            except RequestRebuildError:
                pass  # no request header yet (a /compact before any request): as without a memo
        pairs = surface_messages(events)
        messages = [m for _, m in pairs]
        return pairs, [message_tokens(m, cpt, self.settings.image_tokens) for m in messages], valid_cuts(messages)

    async def _summarise(self, client: ModelClient, body: bytes, start: SessionEvent, first_seq: int,
                         last_seq: int) -> AssembledMessage | None:
        """The summarising request (``body``: ``encode_body(compaction_body(events, start.seq))``);
        ``None`` when every try was answered without a summary."""
        span = {"first_seq": first_seq, "last_seq": last_seq}
        for attempt in range(1, self.retry.max_attempts + 1):
            try:  # told while it waits, as a step's request (``assistant/waiting``)
                waiting = Waiting(self.log, self.emit, int(start.data.get("turn") or 0), int(start.data.get("step") or 0),
                                  attempt)
                message = await _stream(client, body, waiting)
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
                if error.code == "EMPTY_RESPONSE" and attempt == self.retry.max_attempts:
                    return None  # the endpoint answers, the model writes no summary: ``_fallback``
                if not error.retryable or attempt == self.retry.max_attempts:
                    self.log.append("compaction/end", {**span, "aborted": "failed"})
                    then = "" if start.data.get("reason") == "command" else (
                        ". Your prompt did not reach the model: send it again to retry, or start a new session"
                        if int(start.data.get("step") or 1) <= 1 else
                        # a later step's: the prompt was answered, the tools the model called ran
                        ". The turn stopped before its next request to the model; what it did before stands (the "
                        "tools it called ran): ask it to go on, or start a new session")
                    raise TurnFailed({**error.to_dict(),
                                      "message": f"compacting the history failed: {error.message}{then}"}) from error
                await asyncio.sleep(self.retry.delay(attempt, error))
        raise AssertionError("unreachable")


async def _stream(client: ModelClient, body: bytes, waiting: Waiting | None = None) -> AssembledMessage:
    """The summarising request's final message (nothing of it is forwarded to the editor);
    ``waiting``: the try's wait notices, stopped at the answer's first event."""
    stream = client.stream(body)
    if waiting is not None:
        waiting.start()
    try:
        async for event in stream:
            if waiting is not None:
                await waiting.answered()
                waiting = None
            if isinstance(event, Finish):
                return event.message
    finally:
        if waiting is not None:
            await waiting.ended()
    raise LLMError("STREAM_CLOSED", "the stream ended without a finish")


__all__ = ["CHECKPOINT_MARKER", "Compactor", "checkpoint_text", "choose_cut", "message_tokens", "valid_cuts"]
