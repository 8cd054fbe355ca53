"""A memo of the request builder over one session's append-only log (long sessions).

Role: ``RequestMemo.request(events, step_seq)`` returns exactly ``encode_body(request_body(events,
step_seq))`` and ``pending_chars``/``step_chars`` the characters of ``pending_body``/``request_body``
(what the token estimate divides), without walking and encoding the whole log for every step: the
projection is ``ProjectionMemo``'s (plain messages of the prefix already seen kept, compactions
applied on top), each message is encoded once, and the latest ``request/header`` and the usage
anchor are folded in as events arrive; with each message its weight and whether the history may
be cut before it are kept (``history``: what a compaction reads), and the last compaction
transcript rendered (``transcript``) or summarising request encoded (``compaction_body``). It is only a cache of those pure functions: whenever the
list it is given does not extend the one it saw last (a reloaded, repaired or forked log) or the
projection starts again (a refused turn), it starts again too, and a body it cannot frame
exactly falls back to the functions themselves.

Must never: return anything the pure functions would not (``tests/agent/test_request_memo.py`` and
every end-to-end test's replay check compare them), or keep a message list of its own that a
request is built from without the log.
"""

from __future__ import annotations

import json
from bisect import bisect_left, bisect_right
from typing import Any, Sequence

from agent_server.agent.request import SUMMARY_FIELDS, RequestRebuildError, pending_body, render_transcript, summary_body
from agent_server.llm import compact_encoder, encode_body
from agent_server.session import ProjectionMemo, SessionEvent

_MARK = "\x00agent-server:messages\x00"
_MARK_JSON = json.dumps(_MARK)


_JOIN_LAG = 256
"""The newest encoded messages kept apart (they are the ones a new tool result can go between);
older ones are joined into one block."""


_JSON = compact_encoder(separators=(", ", ": "))
"""``json.dumps(…, ensure_ascii=False)``, made once (``dumps`` makes an encoder per call)."""


IMAGE_MARK = '"url":"agent-server-image:'
"""How an image reference (``session.images``) shows in an encoded message: each counts in the
estimate by ``[agent] image_tokens``, never by its characters."""


def message_images(message: dict[str, Any]) -> int:
    """How many image parts ``message`` carries."""
    content = message.get("content")
    return sum(1 for p in content if p.get("type") == "image_url") if isinstance(content, list) else 0


def message_tokens(message: dict[str, Any], chars_per_token: float, image_tokens: int = 0) -> float:
    """Estimated tokens of one chat message (its JSON characters ÷ ``chars_per_token``, and
    ``image_tokens`` per image part): what a compaction weighs the history by."""
    return len(_JSON(message)) / chars_per_token + message_images(message) * image_tokens


_NONE: frozenset[Any] = frozenset()

_PLAIN_SUM = sum([1e16, 1.0, -1e16]) == 0.0
"""Whether the builtin ``sum`` adds floats one after the other (CPython before 3.12; 3.12's
compensates), so a sum can be carried on with the items added since (``RequestMemo.tail_sum``)."""


def _separators(value: Any) -> int:
    """How many characters longer ``json.dumps(value)`` (``", "`` and ``": "``) is than the compact
    form: one per item after the first of each object or array, and one per key."""
    if isinstance(value, dict):
        n = 2 * len(value) - 1 if value else 0
        for item in value.values():
            if isinstance(item, (dict, list)):
                n += _separators(item)
        return n
    if isinstance(value, list):
        n = len(value) - 1 if value else 0
        for item in value:
            if isinstance(item, (dict, list)):
                n += _separators(item)
        return n
    return 0


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


_dumps = compact_encoder()
"""``encode_body``'s JSON text (compact, key order kept, UTF-8 as is), its C encoder made once:
``json.dumps`` with those arguments makes an encoder at every call (twice the time of a message's
encoding), and ``JSONEncoder.encode`` its C encoder (a quarter of it)."""


class RequestMemo:
    """The request functions of ``agent.request`` memoised over one growing list of events.

    Sizes: ``request`` returns the body bytes; the ``*_chars`` methods return characters (as
    ``budget.body_chars``). Raises ``RequestRebuildError`` as the pure functions do.
    """

    def __init__(self, projection: ProjectionMemo | None = None) -> None:
        """``projection``: a memo to start from (one that already saw the log: a load's), else a new one."""
        self._projection = projection if projection is not None else ProjectionMemo()
        self.cut_hint: int | None = None
        """The cut the last compaction planned over this memo's history chose (``choose_cut``'s
        ``hint``: a load plans its first prompt's compaction, which checks that cut first)."""
        self.rendering: Any = None
        """A load's ``asyncio`` future of the work it left to a worker thread (the body of the first
        compaction among it): a compaction waits for it before it reads ``compaction_body``."""
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
        self._parts: list[bytes | None] = []  # each history message of the last body, encoded (",{...}"); None once joined
        self._ends: list[int] = []  # where each of the first _joined_count parts ends in _joined
        self._sizes: list[int] = []  # their characters
        self._chars = 0  # the sum of _sizes
        self._images: list[int] = []  # image references in each part
        self._image_count = 0  # the sum of _images
        self._step_images: dict[int, int] = {}
        self.images = 0
        """Image references in the body brought up to last (``message_images`` of ``messages``)."""
        self._joined = b""  # the first _joined_count parts, joined
        self._joined_count = 0
        self._frames: dict[bool, tuple[SessionEvent, tuple[bytes, bytes, int] | None]] = {}
        self._frame_chars = 0  # the characters of the frame _update used last
        self._whole: bytes | None = None  # the body _update made with the pure function, if it did
        self._step_chars: dict[int, int] = {}
        self._between: int | None = None  # the least ``kept`` of the projection calls since the last body
        self.messages: list[tuple[int, dict[str, Any]]] = []
        """The projection's ``(seq, message)`` pairs the last body was built from (the memo's own:
        not to be changed)."""
        self.messages_kept = 0
        """How many pairs at the start of ``messages`` are the same objects as in the body before."""
        self._spaced: list[int] = []  # each message's characters as ``message_tokens`` counts them
        self._weights: list[float] = []  # the first of them ÷ ``_weights_for`` (characters per token)
        self._weights_for: tuple[float, int] = (0.0, 0)  # (characters per token, image tokens)
        self._tails: dict[int, tuple[int, float]] = {}  # k → (n, sum(_weights[k:n])): ``tail_sum``
        self.tail_sums_made = 0
        """Sums ``tail_sum`` made over the whole tail (not carried on)."""
        self._open: list[frozenset[Any]] = []  # the tool calls without a result before each message
        self._pending: frozenset[Any] = _NONE  # … and after the last one
        self._cuts: list[int] = []  # ``valid_cuts`` of the messages
        self._seqs: list[int] = []  # each message's seq …
        self._bare: list[dict[str, Any]] = []  # … and the message (``messages`` without the seqs)
        self._falls = -1  # the first index whose seq is not above the one before (-1: they rise)
        self._transcript: tuple[list[dict[str, Any]], tuple[int, int], str] | None = None  # (messages, (max_chars, rule), text)
        self._summary: tuple[list[dict[str, Any]], list[Any], bytes, Any] | None = None  # (messages, fields, body, span)
        self._bare_version = 0  # changed whenever messages of ``_bare`` are dropped (not when some are added)
        self.transcripts_made = 0
        """Transcripts this memo rendered (``transcript``, ``compaction_body``: the same messages and
        limit, once)."""
        self.first_user: SessionEvent | None = None
        """The first ``user`` event of the events seen last (``_fold``), and the latest one."""
        self.last_user: SessionEvent | None = None

    def prepare(self, events: Sequence[SessionEvent]) -> None:
        """Take in ``events`` as the estimate before the next step will (the usage anchor's step,
        then the whole list): each message encoded, weighed and its cuts found once. A load calls
        this in its worker thread, so the first prompt after it finds that work done."""
        try:
            anchor = self.usage_anchor(events)
            if anchor is not None:
                self.step_chars(events, anchor[0])
            self.pending_chars(events)
        except RequestRebuildError:
            return  # no request/header yet: nothing to prepare

    def history(self, events: Sequence[SessionEvent], chars_per_token: float, image_tokens: int = 0
                ) -> tuple[list[tuple[int, dict[str, Any]]], list[float], list[int]]:
        """``(surface_messages(events), [message_tokens(m) for each], valid_cuts(messages))`` —
        what a compaction weighs and cuts — from the memo's encodings, each message weighed and
        its cut found once while it is kept. The three lists are the memo's (not to be changed).
        Raises ``RequestRebuildError`` with no ``request/header``."""
        self._update(events)
        pairs = self.messages
        spaced, weights, images = self._spaced, self._weights, self._images
        if len(spaced) != len(pairs):  # a body framed by the pure function: nothing encoded here
            messages = [m for _, m in pairs]
            return pairs, [message_tokens(m, chars_per_token, image_tokens) for m in messages], valid_cuts(messages)
        if (chars_per_token, image_tokens) != self._weights_for:
            weights.clear()
            self._tails.clear()
            self._weights_for = (chars_per_token, image_tokens)
        weights += [size / chars_per_token + images[k] * image_tokens
                    for k, size in enumerate(spaced[len(weights):], len(weights))]
        return pairs, weights, self._cuts

    def tail_sum(self, k: int) -> float:
        """``sum(weights[k:])`` of the weights ``history`` returned last, as the builtin sums it —
        carried on from the last time it was asked (``k`` the same, weights only added since) when
        the builtin adds floats one after the other, as CPython's does before 3.12 (a load's plan and
        the first prompt's compaction sum the same 33k weights, 0.3 ms)."""
        weights = self._weights
        known = self._tails.get(k) if _PLAIN_SUM else None
        if known is None or known[0] > len(weights):
            total = sum(weights[k:])
            self.tail_sums_made += 1
        else:
            total = known[1]
            for weight in weights[known[0]:]:
                total += weight
        if _PLAIN_SUM:
            self._tails[k] = (len(weights), total)
        return total

    def weighs(self, tokens: Sequence[float]) -> bool:
        """Whether ``tokens`` is the memo's list of weights (``history``), which ``tail_sum`` sums."""
        return tokens is self._weights

    def within(self, first: int, last: int) -> list[dict[str, Any]] | None:
        """``[m for seq, m in messages if first <= seq <= last]`` of the pairs ``history`` (or a
        body) was brought to last, as a slice — ``None`` when their seqs do not rise (a late tool
        result put back after its call) or nothing was encoded here: then the caller filters."""
        span = self.span(first, last)
        return self._bare[span[0][0]:span[0][1]] if span is not None else None

    def transcript(self, messages: list[dict[str, Any]], max_chars: int, rule: int = 1) -> str:
        """``agent.request.render_transcript(messages, max_chars, rule)``, the last one kept:
        rendered once for the same messages (equal ones: the text depends on nothing else), limit
        and rule (a replay's compactions)."""
        known = self._transcript
        if known is not None and known[1] == (max_chars, rule) and known[0] == messages:
            return known[2]
        text = render_transcript(messages, max_chars, rule)
        self._transcript = (list(messages), (max_chars, rule), text)
        self.transcripts_made += 1
        return text

    def compaction_body(self, data: dict[str, Any], replaced: list[dict[str, Any]], span: Any = None) -> bytes:
        """``encode_body(compaction_body_of(…))`` of a ``compaction/start`` with data ``data`` that
        replaces the messages ``replaced``: the last one kept, made again only for other messages
        (equal ones: the body depends on nothing else) or other ``SUMMARY_FIELDS`` — a load encodes
        the one its first prompt's compaction will send (``Compactor.plan_summary``). ``span``:
        ``span(…)`` of those messages, when they are a stretch of the memo's (kept with the body,
        for ``compaction_body_within``)."""
        fields = [data.get(name) for name in SUMMARY_FIELDS]
        known = self._summary
        if known is not None and known[1] == fields and known[0] == replaced:
            if span is not None:
                self._summary = (*known[:3], span)
            return known[2]
        self._summary = None  # (the old body freed before the new one is made)
        body = encode_body(summary_body(data, render_transcript(replaced, data["max_transcript_chars"],
                                                                data.get("transcript_rule", 1))))
        self.transcripts_made += 1
        self._summary = (list(replaced), fields, body, span)
        return body

    def compaction_body_within(self, data: dict[str, Any], first: int, last: int,
                               pairs: Sequence[tuple[int, dict[str, Any]]]) -> bytes:
        """``compaction_body(data, [m for seq, m in pairs if first <= seq <= last])``. When ``pairs``
        are the memo's messages (``history``) and the kept body was made for the same stretch of
        them (``span``), none dropped since, it is returned without listing and comparing the
        messages again (the first prompt after a load: 33k of them, 0.4 ms)."""
        span = self.span(first, last) if pairs is self.messages else None
        known = self._summary
        if (span is not None and known is not None and known[3] is not None and known[3][0] == span[0]
                and known[3][1] is span[1] and known[3][2] == span[2]
                and known[1] == [data.get(name) for name in SUMMARY_FIELDS]):
            return known[2]
        if span is not None:
            replaced = span[1][span[0][0]:span[0][1]]
        else:
            replaced = [m for seq, m in pairs if first <= seq <= last]
        return self.compaction_body(data, replaced, span)

    def span(self, first: int, last: int) -> tuple[tuple[int, int], list[dict[str, Any]], int] | None:
        """Where the messages with ``first <= seq <= last`` are among those ``history`` (or a body)
        was brought to last — ``((start, end), the memo's list of them, its version)`` — or
        ``None`` when their seqs do not rise or nothing was encoded here."""
        if self._falls >= 0 or len(self._seqs) != len(self.messages):
            return None
        return (bisect_left(self._seqs, first), bisect_right(self._seqs, last)), self._bare, self._bare_version

    @property
    def header(self) -> SessionEvent | None:
        """The latest ``request/header`` of the events seen last."""
        return self._header

    @property
    def no_calls_open(self) -> bool:
        """Whether every tool call of the messages encoded last has its result (a user message
        after them would be a valid cut)."""
        return not self._pending

    # -- the pure functions, memoised ---------------------------------------------------------

    def request(self, events: Sequence[SessionEvent], step_seq: int) -> bytes:
        """``encode_body(request_body(events, step_seq))``; remembers its size for the estimate."""
        prior = self._prior(events, step_seq)
        if not prior or prior[-1].type != "step/start":
            raise RequestRebuildError(f"event {step_seq} is not a step/start")
        chars = self._update(prior)
        self._step_chars[step_seq], self._step_images[step_seq] = chars, self.images
        return self._bytes()

    def pending_chars(self, events: Sequence[SessionEvent]) -> int:
        """Characters of ``pending_body(events)`` (the body is not joined for it)."""
        return self._update(events)

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
        chars = self._step_chars[step_seq] = self._update(prior)
        self._step_images[step_seq] = self.images
        return chars

    def step_images(self, step_seq: int) -> int:
        """Image references in the body of ``step_seq`` (after ``step_chars`` of it)."""
        return self._step_images.get(step_seq, 0)

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
            elif kind == "user":
                self.last_user = event
                if self.first_user is None:
                    self.first_user = event
        if events:
            self._seen_first, self._seen_last, self._seen_count = events[0], events[-1], len(events)

    def _update(self, events: Sequence[SessionEvent]) -> int:
        """Bring the encoded messages up to ``pending_body(events)``; its characters. The body's
        bytes are then ``_bytes()``."""
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
            self._falls = -1
            self._bare_version += 1
            self._tails.clear()
            for derived in (self._parts, self._ends, self._sizes, self._spaced, self._open, self._cuts, self._weights,
                            self._images, self._seqs, self._bare):
                derived.clear()  # (none of them describes ``pairs``: ``history`` weighs them itself)
            self._chars, self._joined, self._joined_count, self._pending = 0, b"", 0, _NONE
            self._image_count = 0
            self.messages, self.messages_kept = pairs, 0
            self.images = sum(message_images(m) for _, m in pairs)
            text = _dumps(pending_body(events))
            self._whole = text.encode("utf-8")
            return len(text)
        self._whole = None
        parts, sizes, spaced, opened, cuts = self._parts, self._sizes, self._spaced, self._open, self._cuts
        images = self._images
        kept = min(kept, len(parts))
        self._chars -= sum(sizes[kept:])
        self._image_count -= sum(images[kept:])
        pending = opened[kept] if kept < len(opened) else self._pending
        if kept < len(self._weights):
            self._tails.clear()
        del parts[kept:], sizes[kept:], spaced[kept:], opened[kept:], self._weights[kept:], images[kept:]
        seqs, bare = self._seqs, self._bare
        if kept < len(bare):
            self._bare_version += 1
        del seqs[kept:], bare[kept:]
        if self._falls >= kept:
            self._falls = -1
        while cuts and cuts[-1] >= kept:
            cuts.pop()
        if kept < self._joined_count:  # the joined bytes up to ``kept`` are its parts, as they were
            self._joined = self._joined[:self._ends[kept - 1]] if kept else b""
            self._joined_count = kept
            del self._ends[kept:]
        for k, (seq, message) in enumerate(pairs[kept:], kept):  # each message is encoded once (as a whole body would show it)
            if seqs and seq <= seqs[-1] and self._falls < 0:
                self._falls = k
            seqs.append(seq)
            bare.append(message)
            if echo or "reasoning_content" not in message:
                text = "," + _dumps(message)
                spaced.append(len(text) - 1 + _separators(message))  # the same JSON, ", " and ": " apart
            else:
                text = "," + _dumps({k: v for k, v in message.items() if k != "reasoning_content"})
                spaced.append(len(_JSON(message)))
            parts.append(text.encode("utf-8"))
            sizes.append(len(text))
            self._chars += len(text)
            found = text.count(IMAGE_MARK) if type(message.get("content")) is list else 0
            images.append(found)
            self._image_count += found
            opened.append(pending)  # valid_cuts, one message at a time
            role = message["role"]
            if role == "tool":
                if pending:
                    pending = pending - {message.get("tool_call_id")}
                continue
            if not pending and k > 0 and role in ("user", "assistant"):
                cuts.append(k)
            if role == "assistant" and message.get("tool_calls"):
                pending = pending | {call["id"] for call in message["tool_calls"]}
        self._pending = pending
        if len(parts) - self._joined_count > 2 * _JOIN_LAG:  # join the older parts once, not at every request
            upto = len(parts) - _JOIN_LAG
            joining, end, ends = parts[self._joined_count:upto], len(self._joined), self._ends
            for part in joining:
                end += len(part)  # type: ignore[arg-type]  # (not joined yet: bytes)
                ends.append(end)
            self._joined = b"".join([self._joined, *joining])  # type: ignore[list-item]
            parts[self._joined_count:upto] = [None] * (upto - self._joined_count)  # held once, in _joined
            self._joined_count = upto
        self.messages, self.messages_kept = pairs, kept
        self.images = self._image_count
        return self._frame_chars + self._chars

    def _bytes(self) -> bytes:
        """The body ``_update`` brought the memo to."""
        if self._whole is not None:
            return self._whole
        head, tail, _ = self._frames[self._echo][1]  # type: ignore[misc]  # framed: _update checked it
        return b"".join([head, self._joined, *self._parts[self._joined_count:], tail])  # type: ignore[list-item]

    def _frame(self, header: SessionEvent, echo: bool) -> tuple[bytes, bytes, int] | None:
        """The body's bytes before the first history message (system message included) and after
        the last, and their characters; ``None`` if the marker does not split it exactly once."""
        known = self._frames.get(echo)
        if known is not None and known[0] is header:
            if known[1] is not None:
                self._frame_chars = known[1][2]
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
        if frame is not None:
            self._frame_chars = frame[2]
        return frame


__all__ = ["IMAGE_MARK", "RequestMemo", "message_images", "message_tokens", "valid_cuts"]
