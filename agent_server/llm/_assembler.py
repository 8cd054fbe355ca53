"""The block assembler: parsed chat-completion chunks in, ordered stream events out.

Role: a pure state machine (no I/O, no clock) that folds OpenAI-style ``chat.completion.chunk``
dicts into text/reasoning/tool-call events and one :class:`AssembledMessage`, smoothing over the
providers' quirks (tool-call deltas without ``index`` or ``id``, every parallel call sent with
index 0, usage after the finish chunk or inside ``x_groq``, ``usage: null`` frames, …).

Must never: decide anything about the turn (whether to retry, run tools, stop) — it reports what
the stream said, or raises :class:`LLMError` when the stream itself is broken.

Invariants kept here (DESIGN.md §4, 5–8):
* tool-call deltas are grouped by ``index`` but routed by ``id`` first (a new id always opens a
  new call; an id-less delta continues the call last opened at or routed to its index);
  arguments are concatenated, never assigned; the first ``finish_reason`` wins;
* ``finish_reason == "length"`` drops every tool call of the message;
* calls past ``max_tool_calls`` are dropped as they arrive (counted in ``dropped_tool_calls``,
  never announced, their arguments not kept): 10,000 calls in one answer cost nothing further;
* the output is ``… Usage? Finish`` — usage before finish, nothing after finish;
* a stream that produced nothing is ``EMPTY_RESPONSE``, not success.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ._errors import LLMError, error_from_payload
from ._events import (
    AssembledMessage,
    AssembledToolCall,
    Finish,
    ReasoningDelta,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallStarted,
    Usage,
)

__all__ = ["StreamAssembler"]

# finish reasons that make a message legitimate even when it carries nothing
_NON_EMPTY_FINISHES = frozenset({"length", "content_filter"})


def _new_call_id(position: int) -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class _Call:
    """A tool call being assembled (mutable, private)."""

    __slots__ = ("id", "id_from_provider", "name", "parts", "position", "started")

    def __init__(self, position: int, call_id: str) -> None:
        self.position = position
        self.id = call_id
        self.id_from_provider = False
        self.name = ""
        self.parts: list[str] = []
        self.started = False


class StreamAssembler:
    """Assemble one streamed assistant message.

    Usage::

        asm = StreamAssembler()
        for chunk in chunks:            # each a decoded ``data:`` JSON object
            events += asm.feed(chunk)
        events += asm.close(done_seen=True)   # [..., Usage?, Finish]

    Args:
        new_call_id: ``f(position) -> str`` used when a tool call has no provider id; the
            default returns ``"call_" + 24 random hex digits``.
        max_tool_calls: the most tool calls the message keeps (``None``: all); the rest are
            dropped (``AssembledMessage.dropped_tool_calls``).

    Only choice 0 is assembled (requests are sent with ``n`` = 1). Deltas that arrive after a
    ``finish_reason`` are still assembled (some providers send trailing fragments); only the
    finish reason itself is first-wins. The instance is single-use.
    """

    def __init__(self, *, new_call_id: Callable[[int], str] | None = None, max_tool_calls: int | None = None) -> None:
        self._new_call_id = new_call_id or _new_call_id
        self._max_calls = max_tool_calls
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._refusal: list[str] = []
        self._calls: list[_Call] = []
        self._by_id: dict[str, _Call] = {}
        self._by_index: dict[int, _Call] = {}
        self._current: _Call | None = None
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._x_usage: dict[str, Any] | None = None
        self._closed = False
        self._output_chars = 0

    @property
    def finish_reason(self) -> str | None:
        """The first finish reason seen so far, or None."""
        return self._finish_reason

    @property
    def output_chars(self) -> int:
        """Characters of model output received so far: content, reasoning, refusal, tool names
        and arguments (what a caller measures progress and the output cap by)."""
        return self._output_chars

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """Fold one decoded chunk into the message; return the events it produced (possibly
        none): ReasoningDelta / TextDelta / ToolCallStarted / ToolCallDelta, never Usage or
        Finish (those come from :meth:`close`).

        Raises:
            LLMError: the chunk is an ``{"error": ...}`` frame (code mapped from its
                code/type/message, default SERVER), or not a JSON object (SERVER).
            RuntimeError: called after :meth:`close`.
        """
        if self._closed:
            raise RuntimeError("StreamAssembler.feed() after close()")
        if not isinstance(chunk, Mapping):
            raise LLMError("SERVER", f"malformed stream frame (not a JSON object): {chunk!r:.200}")
        if chunk.get("error"):
            raise error_from_payload(chunk, default="SERVER")
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self._usage = dict(usage)
        x_groq = chunk.get("x_groq")
        if isinstance(x_groq, Mapping) and isinstance(x_groq.get("usage"), Mapping):
            self._x_usage = dict(x_groq["usage"])
        events: list[StreamEvent] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return events
        for choice in choices:
            if not isinstance(choice, Mapping) or choice.get("index") not in (0, None):
                continue
            delta = choice.get("delta")
            if isinstance(delta, Mapping):
                self._apply_delta(delta, events)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason and self._finish_reason is None:
                self._finish_reason = reason
        return events

    def add_delta(self, field: str, text: str) -> None:
        """Fold a frame whose only effect is one non-empty delta string — ``field``
        ``"content"`` or ``"reasoning"`` (``_frames.FrameDecoder`` decodes such frames without a
        full parse): the same as ``feed`` of ``{"choices": [{"index": 0, "delta": {field:
        text}}]}``, whose one event (``TextDelta(text)`` / ``ReasoningDelta(text)``) the caller
        makes when it needs it.

        Raises:
            RuntimeError: called after :meth:`close`.
        """
        if self._closed:
            raise RuntimeError("StreamAssembler.add_delta() after close()")
        self._output_chars += len(text)
        (self._content if field == "content" else self._reasoning).append(text)

    def close(self, *, done_seen: bool) -> list[StreamEvent]:
        """End the stream: return ``[ToolCallStarted… for calls never named/started, Usage?,
        Finish]``. ``done_seen`` says whether ``data: [DONE]`` arrived.

        Raises:
            LLMError: STREAM_CLOSED if the stream ended without ``[DONE]`` and without any
                finish_reason; EMPTY_RESPONSE if it produced no content, reasoning, refusal or
                tool call and did not finish with "length"/"content_filter".
            RuntimeError: called twice.
        """
        if self._closed:
            raise RuntimeError("StreamAssembler.close() called twice")
        self._closed = True
        if not done_seen and self._finish_reason is None:
            raise LLMError("STREAM_CLOSED",
                           "the stream ended before [DONE] and without a finish_reason")
        content = "".join(self._content)
        reasoning = "".join(self._reasoning)
        refusal = "".join(self._refusal) or None
        if (not content and not reasoning and refusal is None and not self._calls
                and self._finish_reason not in _NON_EMPTY_FINISHES):
            raise LLMError("EMPTY_RESPONSE",
                           "the model returned no content and no tool calls "
                           f"(finish_reason={self._finish_reason!r})")
        events: list[StreamEvent] = []
        kept = self._calls if self._max_calls is None else self._calls[: self._max_calls]
        calls = [AssembledToolCall(c.id, c.name, "".join(c.parts)) for c in kept]
        dropped = len(self._calls) - len(kept)
        if self._finish_reason == "length":
            dropped, calls = len(self._calls), []
        else:
            for call in kept:
                if not call.started:  # a call whose name never arrived: still announce it
                    events.extend(self._start(call))
        usage = self._usage if self._usage is not None else self._x_usage
        if usage is not None:
            events.append(Usage(usage))
        events.append(Finish(AssembledMessage(
            content=content, reasoning=reasoning, tool_calls=calls,
            finish_reason=self._finish_reason, usage=usage, refusal=refusal,
            dropped_tool_calls=dropped,
        )))
        return events

    # -- internals -------------------------------------------------------------------------

    def _apply_delta(self, delta: Mapping[str, Any], events: list[StreamEvent]) -> None:
        reasoning = delta.get("reasoning_content")
        if not (isinstance(reasoning, str) and reasoning):
            reasoning = delta.get("reasoning")  # vLLM / OpenRouter name; never both counted
        if isinstance(reasoning, str) and reasoning:
            self._output_chars += len(reasoning)
            self._reasoning.append(reasoning)
            events.append(ReasoningDelta(reasoning))
        content = delta.get("content")
        if isinstance(content, str) and content:
            self._output_chars += len(content)
            self._content.append(content)
            events.append(TextDelta(content))
        refusal = delta.get("refusal")
        if isinstance(refusal, str) and refusal:
            self._output_chars += len(refusal)
            self._refusal.append(refusal)
        tool_calls = delta.get("tool_calls")
        if isinstance(tool_calls, list):
            for tool_delta in tool_calls:
                if isinstance(tool_delta, Mapping):
                    self._apply_tool_delta(tool_delta, events)

    def _apply_tool_delta(self, td: Mapping[str, Any], events: list[StreamEvent]) -> None:
        raw_id, raw_index = td.get("id"), td.get("index")
        call_id = raw_id if isinstance(raw_id, str) and raw_id else None
        is_int = isinstance(raw_index, int) and not isinstance(raw_index, bool)
        index = raw_index if is_int else None
        fn = td.get("function")
        fn = fn if isinstance(fn, Mapping) else {}
        raw_name = fn.get("name")
        name: str = raw_name if isinstance(raw_name, str) else ""
        args = fn.get("arguments")
        if isinstance(args, (dict, list)):  # non-conforming servers send an object
            args = json.dumps(args, ensure_ascii=False)
        elif not isinstance(args, str):
            args = ""

        self._output_chars += len(name) + len(args)
        call = self._route(call_id, index, name)
        if call_id is not None and not call.id_from_provider:
            call.id, call.id_from_provider = call_id, True
            self._by_id[call_id] = call
        if name and not call.name:
            call.name = name
        if self._max_calls is not None and call.position >= self._max_calls:
            call.started = True  # past the cap: routed (its deltas find it), never kept or announced
            return
        if args:
            call.parts.append(args)
        if not call.started:
            if call.name:
                events.extend(self._start(call))
        elif args:
            events.append(ToolCallDelta(call.position, args))

    def _route(self, call_id: str | None, index: int | None, name: str) -> _Call:
        """Pick the call a delta belongs to.

        * a known id → that call;
        * a new id → a new call, whatever its index (unless it names an id-less call already
          open at that index / in progress: a late id is adopted);
        * no id → the call most recently opened at, or routed to, that index (a new call if
          there is none);
        * neither id nor index → the call in progress.

        A new id opened at an index that already belongs to another call is a provider bug (seen
        in the field: call B's first delta at A's index 0, B's tail at index 1 without id); that
        call is then also known at its own position — the index the provider meant — so its
        id-less tail finds it.
        """
        if call_id is not None:
            known = self._by_id.get(call_id)
            if known is None:
                candidate = self._by_index.get(index) if index is not None else self._current
                if (candidate is not None and not candidate.id_from_provider
                        and not (name and candidate.name)):
                    known = candidate
            if known is None:
                collided = index is not None and index in self._by_index
                call = self._open(index)
                if collided and call.position not in self._by_index:
                    self._by_index[call.position] = call
                return call
        elif index is not None:
            known = self._by_index.get(index)
            if known is None:
                return self._open(index)
        else:
            known = self._current
            if known is None:
                return self._open(None)
        if index is not None:
            self._by_index[index] = known
        self._current = known
        return known

    def _open(self, index: int | None) -> _Call:
        position = len(self._calls)
        call = _Call(position, self._new_call_id(position))
        self._calls.append(call)
        if index is not None:
            self._by_index[index] = call
        self._current = call
        return call

    @staticmethod
    def _start(call: _Call) -> list[StreamEvent]:
        call.started = True
        out: list[StreamEvent] = [ToolCallStarted(call.position, call.id, call.name)]
        if call.parts:
            out.append(ToolCallDelta(call.position, "".join(call.parts)))
        return out
