"""A memo of the request builder over one session's append-only log (long sessions).

Role: ``RequestMemo.request(events, step_seq)`` returns exactly ``encode_body(request_body(events,
step_seq))`` and ``pending_chars``/``step_chars`` the characters of ``pending_body``/``request_body``
(what the token estimate divides), without walking and encoding the whole log for every step: the
projection is ``ProjectionMemo``'s (plain messages of the prefix already seen kept, compactions
applied on top), each message is encoded once, and the latest ``request/header`` and the usage
anchor are folded in as events arrive. It is only a cache of those pure functions: whenever the
list it is given does not extend the one it saw last (a reloaded, repaired or forked log) or the
projection starts again (a refused turn), it starts again too, and a body it cannot frame
exactly falls back to the functions themselves.

Must never: return anything the pure functions would not (``tests/agent/test_request_memo.py`` and
every end-to-end test's replay check compare them), or keep a message list of its own that a
request is built from without the log.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from agent_server.agent.request import RequestRebuildError, pending_body, transcript_block
from agent_server.session import ProjectionMemo, SessionEvent

_MARK = "\x00agent-server:messages\x00"
_MARK_JSON = json.dumps(_MARK)


_JOIN_LAG = 256
"""The newest encoded messages kept apart (they are the ones a new tool result can go between);
older ones are joined into one block."""


_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(…, ensure_ascii=False)``, made once (``dumps`` makes an encoder per call)."""


def message_tokens(message: dict[str, Any], chars_per_token: float) -> float:
    """Estimated tokens of one chat message (its JSON characters ÷ ``chars_per_token``): what a
    compaction weighs the history by."""
    return len(_JSON.encode(message)) / chars_per_token


def _dumps(value: Any) -> str:
    """``encode_body``'s JSON text (compact, key order kept, UTF-8 as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class RequestMemo:
    """The request functions of ``agent.request`` memoised over one growing list of events.

    Sizes: ``request`` returns the body bytes; the ``*_chars`` methods return characters (as
    ``budget.body_chars``). Raises ``RequestRebuildError`` as the pure functions do.
    """

    def __init__(self, projection: ProjectionMemo | None = None) -> None:
        """``projection``: a memo to start from (one that already saw the log: a load's), else a new one."""
        self._projection = projection if projection is not None else ProjectionMemo()
        self._start()

    def _start(self) -> None:
        self._seen_first: SessionEvent | None = None
        self._seen_last: SessionEvent | None = None
        self._seen_count = 0
        self._header: SessionEvent | None = None
        self._anchor_step: int | None = None
        self.anchor: tuple[int, int] | None = None
        """``(step/start seq, prompt_tokens)`` of the latest request with a provider count and no
        compaction after it (``budget``'s usage anchor) for the events seen last."""
        self._generation = -1
        self._echo = False
        self._parts: list[bytes] = []  # each history message of the last body, encoded (",{...}")
        self._sizes: list[int] = []  # their characters
        self._chars = 0  # the sum of _sizes
        self._joined = b""  # the first _joined_count parts, joined
        self._joined_count = 0
        self._frames: dict[bool, tuple[SessionEvent, tuple[bytes, bytes, int] | None]] = {}
        self._step_chars: dict[int, int] = {}
        self._between: int | None = None  # the least ``kept`` of the projection calls since the last body
        self.messages: list[tuple[int, dict[str, Any]]] = []
        """The projection's ``(seq, message)`` pairs the last body was built from (the memo's own:
        not to be changed)."""
        self.messages_kept = 0
        """How many pairs at the start of ``messages`` are the same objects as in the body before."""
        self._tokens: dict[int, tuple[dict[str, Any], float]] = {}  # id(message) → (message, tokens)
        self._tokens_for: tuple[int, float] = (-1, 0.0)  # (projection generation, characters per token)
        self._blocks: dict[int, tuple[dict[str, Any], str]] = {}  # id(message) → (message, transcript block)
        self._blocks_for = -1  # projection generation
        self.blocks_made = 0
        """Transcript blocks rendered by this memo (each message's once while it is kept)."""

    def prepare(self, events: Sequence[SessionEvent], chars_per_token: float) -> None:
        """Take in ``events`` as the estimate before the next step will (the usage anchor's step,
        then the whole list) and weigh each message as a compaction does: a load calls this in
        its worker thread, so the first prompt after it finds that work done."""
        try:
            anchor = self.usage_anchor(events)
            if anchor is not None:
                self.step_chars(events, anchor[0])
            self.pending_chars(events)
        except RequestRebuildError:
            return  # no request/header yet: nothing to prepare
        messages = [m for _, m in self.messages]
        self.message_tokens(messages, chars_per_token)
        self.transcript_blocks(messages)  # the compaction the first prompt may need renders no block again

    def transcript_blocks(self, messages: Sequence[dict[str, Any]]) -> list[str]:
        """``agent.request.transcript_blocks(messages)`` (this memo's messages, from ``surface``
        or ``messages``), each message's block rendered once while the projection keeps its dicts."""
        generation = self._projection.generation
        if generation != self._blocks_for:
            self._blocks, self._blocks_for = {}, generation
        known = self._blocks
        out = []
        for message in messages:
            hit = known.get(id(message))
            if hit is None or hit[0] is not message:
                hit = known[id(message)] = (message, transcript_block(message))
                self.blocks_made += 1
            out.append(hit[1])
        return out

    def message_tokens(self, messages: Sequence[dict[str, Any]], chars_per_token: float) -> list[float]:
        """``message_tokens`` of each of ``messages`` (this memo's, from ``surface`` or
        ``messages``), each message weighed once while the projection keeps its dicts."""
        key = (self._projection.generation, chars_per_token)
        if key != self._tokens_for:
            self._tokens, self._tokens_for = {}, key
        known = self._tokens
        out = []
        for message in messages:
            hit = known.get(id(message))
            if hit is None or hit[0] is not message:
                hit = known[id(message)] = (message, message_tokens(message, chars_per_token))
            out.append(hit[1])
        return out

    # -- the pure functions, memoised ---------------------------------------------------------

    def request(self, events: Sequence[SessionEvent], step_seq: int) -> bytes:
        """``encode_body(request_body(events, step_seq))``; remembers its size for the estimate."""
        prior = self._prior(events, step_seq)
        if not prior or prior[-1].type != "step/start":
            raise RequestRebuildError(f"event {step_seq} is not a step/start")
        body, chars = self._body(prior)
        self._step_chars[step_seq] = chars
        return body

    def pending_chars(self, events: Sequence[SessionEvent]) -> int:
        """Characters of ``pending_body(events)``."""
        return self._body(events)[1]

    def step_chars(self, events: Sequence[SessionEvent], step_seq: int) -> int:
        """Characters of ``request_body(events, step_seq)``: remembered from when that request was
        built here, else built (from the prefix: call it before ``pending_chars`` of the whole
        list, or the memo starts again)."""
        known = self._step_chars.get(step_seq)
        if known is not None:
            return known
        prior = self._prior(events, step_seq)
        if not prior or prior[-1].type != "step/start":
            raise RequestRebuildError(f"event {step_seq} is not a step/start")
        chars = self._step_chars[step_seq] = self._body(prior)[1]
        return chars

    def behind(self, events: Sequence[SessionEvent]) -> int:
        """How many events of ``events`` this memo has yet to take in (all of them when it saw
        another list): what the next call costs, roughly."""
        n = self._seen_count
        if n and len(events) >= n and events[0] is self._seen_first and events[n - 1] is self._seen_last:
            return len(events) - n
        return len(events)

    def surface(self, events: Sequence[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
        """``surface_messages(events)`` from the memo's projection (shared: not to be changed), for
        a caller that needs the history without a body (a compaction's transcript)."""
        pairs = self._projection.shared(events)
        kept = self._projection.kept
        self._between = kept if self._between is None else min(self._between, kept)
        return pairs

    def usage_anchor(self, events: Sequence[SessionEvent]) -> tuple[int, int] | None:
        """``budget``'s usage anchor of ``events``: ``(step/start seq, prompt_tokens)`` of the latest
        request with a provider count, unless a compaction came after it."""
        self._fold(events)
        return self.anchor

    # -- inside ---------------------------------------------------------------------------------

    @staticmethod
    def _prior(events: Sequence[SessionEvent], step_seq: int) -> Sequence[SessionEvent]:
        if 0 < step_seq <= len(events) and events[step_seq - 1].seq == step_seq:  # seq is 1, 2, 3 …
            return events if step_seq == len(events) else events[:step_seq]
        return [e for e in events if e.seq <= step_seq]

    def _fold(self, events: Sequence[SessionEvent]) -> None:
        """Take in the events not seen yet; start again when ``events`` does not extend the list
        seen last."""
        n = self._seen_count
        extends = n == 0 or (len(events) >= n and events[0] is self._seen_first and events[n - 1] is self._seen_last)
        if not extends:
            self._start()
            n = 0
        for event in events[n:]:
            kind = event.type
            if kind == "request/header":
                self._header = event
            elif kind == "step/start":
                self._anchor_step = event.seq
            elif kind == "assistant" and self._anchor_step is not None:
                prompt = (event.data.get("usage") or {}).get("prompt_tokens")
                if isinstance(prompt, int) and prompt > 0:
                    self.anchor = (self._anchor_step, prompt)
            elif kind == "compaction/end" and event.data.get("message"):
                self.anchor = None
        if events:
            self._seen_first, self._seen_last, self._seen_count = events[0], events[-1], len(events)

    def _body(self, events: Sequence[SessionEvent]) -> tuple[bytes, int]:
        """``(encode_body(pending_body(events)), its characters)``."""
        self._fold(events)
        header = self._header
        if header is None:
            raise RequestRebuildError("no request/header before the step")
        pairs = self._projection.shared(events)
        kept = self._projection.kept
        if self._between is not None:
            kept, self._between = min(kept, self._between), None
        echo = header.data.get("reasoning_content", "drop") == "echo"
        if self._projection.generation != self._generation or echo != self._echo:  # other message dicts
            self._generation, self._echo, kept = self._projection.generation, echo, 0
        frame = self._frame(header, echo)
        if frame is None:  # a header this cannot frame exactly: the pure function
            self._generation = -1  # and the encoded messages are made again next time
            self.messages, self.messages_kept = pairs, 0
            text = _dumps(pending_body(events))
            return text.encode("utf-8"), len(text)
        parts, sizes = self._parts, self._sizes
        kept = min(kept, len(parts))
        self._chars -= sum(sizes[kept:])
        del parts[kept:], sizes[kept:]
        if kept < self._joined_count:
            self._joined, self._joined_count = b"", 0
        for _, message in pairs[kept:]:  # each message is encoded once (as a whole body would show it)
            shown = message if echo or "reasoning_content" not in message else {
                k: v for k, v in message.items() if k != "reasoning_content"}
            text = "," + _dumps(shown)
            parts.append(text.encode("utf-8"))
            sizes.append(len(text))
            self._chars += len(text)
        if len(parts) - self._joined_count > 2 * _JOIN_LAG:  # join the older parts once, not at every request
            upto = len(parts) - _JOIN_LAG
            self._joined = b"".join([self._joined, *parts[self._joined_count:upto]])
            self._joined_count = upto
        self.messages, self.messages_kept = pairs, kept
        head, tail, chars = frame
        return b"".join([head, self._joined, *parts[self._joined_count:], tail]), chars + self._chars

    def _frame(self, header: SessionEvent, echo: bool) -> tuple[bytes, bytes, int] | None:
        """The body's bytes before the first history message (system message included) and after
        the last, and their characters; ``None`` if the marker does not split it exactly once."""
        known = self._frames.get(echo)
        if known is not None and known[0] is header:
            return known[1]
        frame = None
        template = pending_body([header])  # the header's body with an empty history
        system = template["messages"][0]
        template["messages"] = _MARK
        text = _dumps(template)
        if text.count(_MARK_JSON) == 1:
            before, after = text.split(_MARK_JSON)
            head = before + "[" + _dumps(system)
            tail = "]" + after
            frame = (head.encode("utf-8"), tail.encode("utf-8"), len(head) + len(tail))
        self._frames[echo] = (header, frame)  # the latest header's (a new one comes with its own event)
        return frame


__all__ = ["RequestMemo", "message_tokens"]
