"""Model requests rebuilt from the log alone.

Role: ``request_body(events, step_seq)`` returns the JSON body of the model request made at the
``step/start`` event numbered ``step_seq``, using only events up to it: the latest
``request/header`` (system text, tool schemas, parameters, quirks) and the projection of the
history. The agent sends ``encode_body(request_body(...))``; replay calls the same function, so the
bytes are equal by construction (invariant 9, "what the model saw equals what is in the log").
``compaction_body(events, start_seq)`` does the same for the summarising request of a
compaction: its system prompt, model and parameters are in ``compaction/start``, its transcript is
rendered (``render_transcript``) from the surface messages of the range being replaced.

Must never: read anything that is not an event (no config, no clock, no environment).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from agent_server.session import SessionEvent, derive_messages, surface_messages


class RequestRebuildError(Exception):
    """The log has no ``step/start`` with that seq, or no ``request/header`` before it."""


def request_body(events: Sequence[SessionEvent], step_seq: int) -> dict[str, Any]:
    """Body (a dict, key order significant) of the request made at ``step/start`` ``step_seq``.

    Shape: ``{"model", <params>..., "messages": [system, ...history], "tools"?, "stream": true,
    "stream_options": {"include_usage": true}}``. Raises ``RequestRebuildError``.
    """
    prior = [e for e in events if e.seq <= step_seq]
    if not prior or prior[-1].type != "step/start":
        raise RequestRebuildError(f"event {step_seq} is not a step/start")
    return pending_body(prior)


def pending_body(events: Sequence[SessionEvent]) -> dict[str, Any]:
    """The body a ``step/start`` appended after ``events`` would send (for the estimate made
    before a step: ``request_body`` of that step equals it). Raises ``RequestRebuildError``."""
    prior = list(events)
    header = next((e for e in reversed(prior) if e.type == "request/header"), None)
    if header is None:
        raise RequestRebuildError("no request/header before the step")
    data = header.data
    messages = [{"role": "system", "content": data["system"]}]
    for message in derive_messages(prior):
        if data.get("reasoning_content", "drop") != "echo":
            message.pop("reasoning_content", None)
        messages.append(message)
    body: dict[str, Any] = {"model": data["model"], **data.get("params", {}), "messages": messages}
    if data.get("tools"):
        body["tools"] = data["tools"]
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return body


def step_starts(events: Sequence[SessionEvent]) -> list[int]:
    """The ``seq`` of every ``step/start``: one per model request (retries re-send the same body)."""
    return [e.seq for e in events if e.type == "step/start"]


def attempt_steps(events: Sequence[SessionEvent]) -> list[int]:
    """The ``step/start`` seq of every HTTP request the log accounts for, in order.

    A step's requests are its failed attempts (``assistant/attempt``) and its final one (the
    ``assistant`` event of that step, interrupted ones included): retries re-send the step's body
    unchanged, so ``request_body(events, seq)`` gives each of them.
    """
    order: list[int] = []
    current: int | None = None
    for event in events:
        if event.type == "step/start":
            current = event.seq
        elif event.type in ("assistant/attempt", "assistant") and current is not None:
            order.append(current)
    return order


def compaction_body(events: Sequence[SessionEvent], start_seq: int) -> dict[str, Any]:
    """Body of the summarising request of the ``compaction/start`` event numbered ``start_seq``:
    ``{"model", <params>..., "messages": [system, user(transcript)], "stream": true,
    "stream_options"}``. Raises ``RequestRebuildError``."""
    prior = [e for e in events if e.seq <= start_seq]
    if not prior or prior[-1].type != "compaction/start":
        raise RequestRebuildError(f"event {start_seq} is not a compaction/start")
    return compaction_body_of(surface_messages(prior[:-1]), prior[-1])


def compaction_body_of(surface: Sequence[tuple[int, dict[str, Any]]], start: SessionEvent,
                       transcript: Callable[[list[dict[str, Any]], int, int], str] | None = None,
                       replaced: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``compaction_body`` from ``surface``, the ``surface_messages`` of the events before the
    ``compaction/start`` event ``start`` (read, not changed); ``transcript``: ``render_transcript``
    memoised (``RequestMemo.transcript``), the same text; ``replaced``: the messages of ``surface``
    within the event's range when the caller has them (``RequestMemo.within``), the same list."""
    data = start.data
    first, last = data["first_seq"], data["last_seq"]
    if replaced is None:
        replaced = [m for seq, m in surface if first <= seq <= last]
    return summary_body(data, (transcript or render_transcript)(replaced, data["max_transcript_chars"],
                                                                data.get("transcript_rule", 1)))


SUMMARY_FIELDS = ("system", "instruction", "model", "params", "max_transcript_chars", "transcript_rule")
"""What a summarising request is made of besides its replaced messages: the ``compaction/start``
data ``summary_body`` reads."""


def summary_body(data: dict[str, Any], transcript: str) -> dict[str, Any]:
    """The summarising request's body from ``compaction/start`` data ``data`` (its
    ``SUMMARY_FIELDS``) and the transcript rendered from the messages it replaces."""
    body: dict[str, Any] = {"model": data["model"], **data.get("params", {}), "messages": [
        {"role": "system", "content": data["system"]},
        {"role": "user", "content": data["instruction"] + "\n\n<transcript>\n" + transcript + "\n</transcript>"},
    ]}
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
    return body


TRANSCRIPT_RULE = 2
"""The transcript rule a compaction logs now (``compaction/start`` ``transcript_rule``): 2 counts the
marker of each cut block and leaves blocks out whole when even their markers would not fit. A
compaction logged without the field used rule 1 (markers not counted: far over the limit, where
most blocks are cut to their marker, the transcript ran to ~3 × ``max_transcript_chars``) and
replays with it."""


def render_transcript(messages: Sequence[dict[str, Any]], max_chars: int, rule: int = 1) -> str:
    """The messages as plain text (``[user]``, ``[assistant]``, ``[assistant called …]``,
    ``[tool result …]`` headed blocks), at most about ``max_chars`` characters: when longer, the
    longest blocks are cut in the middle (the shorter ones are kept whole), deterministically.
    A block is made only when some of its text is kept (its length is counted without it).
    ``rule``: the ``compaction/start``'s ``transcript_rule`` (1 when it has none; see
    ``TRANSCRIPT_RULE``); with rule 2 the text is at most ``max_chars`` characters."""
    if rule >= 2:
        return _render_counted(messages, max_chars)
    sizes = list(map(transcript_block_chars, messages))
    budget = max(0, max_chars - 2 * len(sizes))
    if sum(sizes) <= budget:
        return "\n\n".join(map(transcript_block, messages))
    cap, rest, left = 0, sorted(sizes), budget
    for i, size in enumerate(rest):  # water-filling: the largest cap that fits the budget
        share = left // (len(rest) - i)
        if size > share:
            cap = share
            break
        left -= size
    else:
        cap = max(rest)
    # each block longer than ``cap`` keeps its head (⅔) and tail around a marker of what was left out
    out = []
    append = out.append
    for message, size in zip(messages, sizes):
        if size <= cap:
            append(transcript_block(message))
            continue
        marker = f"\n[… {size - cap} characters left out …]\n"
        keep = cap - len(marker)
        if keep <= 0:
            append(marker)  # (the block's head is empty)
            continue
        head = keep * 2 // 3
        block = transcript_block(message)
        append(block[:head] + marker + block[size - (keep - head):])  # keep - head ≥ 1
    return "\n\n".join(out)


def _cut_marker(left: int) -> str:
    return f"\n[… {left} characters left out …]\n"


def _water_cap(sizes: Sequence[int], budget: int) -> int:
    """The largest ``cap`` with ``sum(min(size, cap))`` ≤ ``budget`` (all of the largest size when they fit)."""
    rest, left = sorted(sizes), budget
    for i, size in enumerate(rest):
        share = left // (len(rest) - i)
        if size > share:
            return share
        left -= size
    return rest[-1] if rest else 0


def _render_counted(messages: Sequence[dict[str, Any]], max_chars: int) -> str:
    """``render_transcript`` rule 2: every character counts — blocks, the ``"\n\n"`` between them,
    each cut block's marker. When even one character and a marker per block would not fit, the
    middle of the history is left out whole (one line says how many messages): a quarter of the
    blocks that fit from the start, the rest from the end."""
    sizes = list(map(transcript_block_chars, messages))
    n = len(sizes)
    if sum(sizes) + 2 * max(0, n - 1) <= max_chars:
        return "\n\n".join(map(transcript_block, messages))
    widest = len(_cut_marker(max(sizes)))  # no block's marker is longer
    first, last, gap = n, 0, ""
    if n * (widest + 3) > max_chars + 2:  # not every block fits, even cut to a character and its marker
        gap = f"[… {n:,} messages left out …]"  # its final length is at most this one's
        kept = max(0, (max_chars - len(gap)) // (widest + 3))
        first = kept // 4
        last = kept - first
        gap = f"[… {n - kept:,} message{'s' if n - kept != 1 else ''} left out …]"
    chosen = list(range(first)) + list(range(n - last, n)) if gap else list(range(n))
    pieces = len(chosen) + (1 if gap else 0)
    cap = _water_cap([sizes[i] for i in chosen], max_chars - 2 * max(0, pieces - 1) - len(gap))
    out = []
    append = out.append
    for position, index in enumerate(chosen):
        if gap and position == first:
            append(gap)
        size, message = sizes[index], messages[index]
        if size <= cap:
            append(transcript_block(message))
            continue
        keep = cap - len(_cut_marker(size))  # ≥ 1: cap ≥ widest + 1
        head = keep * 2 // 3
        block = transcript_block(message)
        append(block[:head] + _cut_marker(size - keep) + block[size - (keep - head):])
    if gap and first == len(chosen):
        append(gap)
    return "\n\n".join(out)


def transcript_blocks(messages: Sequence[dict[str, Any]]) -> list[str]:
    """Each message's block of the transcript, uncut."""
    return [transcript_block(m) for m in messages]


def transcript_block_chars(message: dict[str, Any]) -> int:
    """``len(transcript_block(message))``, without making the block."""
    role = message["role"]
    if role == "tool":
        return len(f"[tool result for call {message.get('tool_call_id')}]\n") + len(f"{message.get('content') or ''}")
    chars = lines = 0
    content = message.get("content")
    if content:
        chars, lines = len(f"[{role}]\n") + len(f"{content}"), 1
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        chars += len(f"[{role} called {fn['name']} (call {call['id']}) with ") + len(f"{fn['arguments']}") + 1
        lines += 1
    return chars + lines - 1 if lines else len(f"[{role}]")


def transcript_block(message: dict[str, Any]) -> str:
    """One message's block of the transcript (``render_transcript``), uncut."""
    role = message["role"]
    if role == "tool":
        return f"[tool result for call {message.get('tool_call_id')}]\n{message.get('content') or ''}"
    content = message.get("content")
    if isinstance(content, list):  # text and image parts: the images by name only
        content = "\n".join(p.get("text", "") if p.get("type") == "text" else "[an image the user attached]"
                            for p in content)
    lines = [f"[{role}]\n{content or ''}"] if content else []
    for call in message.get("tool_calls") or []:
        fn = call["function"]
        lines.append(f"[{role} called {fn['name']} (call {call['id']}) with {fn['arguments']}]")
    return "\n".join(lines) or f"[{role}]"
