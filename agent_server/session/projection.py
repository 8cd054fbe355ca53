"""The projection: session events → the chat messages a model request carries.

Role: ``derive_messages(events)`` turns the log into OpenAI-style ``messages`` (without the system
message, which comes from ``request/header``). It is called before every model request and its
result is thrown away afterwards: history is a view of the log, never a second list.

Must never: keep state between calls, sort, or invent content that is not in an event.

Rules (DESIGN.md §3):
* ``user`` → ``{"role": "user", "content": data.content}``;
* ``assistant`` with no text and no tool calls → nothing (invariant 10);
* ``assistant`` → one assistant message with its ``tool_calls`` (arguments byte-exact as streamed)
  and, when the model sent reasoning, ``reasoning_content`` (the request builder decides whether
  the provider gets it back);
* ``tool/result`` → ``{"role": "tool", "tool_call_id": data.call_id, "content": data.content}``,
  placed right after its call's assistant message (and that message's earlier results): in a log
  written whole that is where it already is; a result appended later by recovery (a log whose
  ``tool/result`` was lost to a failed append before its turn was closed, and which later turns
  followed) is moved up to its call, so no request carries a call without its result;
* ``notice`` (something the agent itself must tell the model, e.g. the step budget ran out) →
  a user message ``"[agent-server notice] " + data.text``;
* a turn whose ``turn/end.exit`` is ``refusal`` is left out from its user message on (ACP's rule).

Interrupted turns (``agent/recovery.py`` writes the events; nothing special happens here):
* an ``assistant`` event with ``interrupted: true`` (text streamed before a cancel) projects like
  any other — its text, never a tool call (half-streamed calls are dropped), nothing if empty;
* every call of the last assistant message that got no real result has a synthetic
  ``tool/result`` (``reason: "aborted"`` — ``ABORTED_BEFORE_DISPATCH``, it never ran — or
  ``"interrupted"`` — it may have run), so no request ever carries a call without a result;
* one ``notice`` with ``reason: "cancelled"`` (cancel in this process) or ``"interrupted"`` (the
  process died; written on load, followed by ``turn/end {exit: "interrupted"}``) closes the turn:
  the model reads, as the last user message before the next prompt, that the turn was cut short,
  whether its reply was cut off or lost, and which calls did not run or may have half-run;
* ``inbox/*`` events (prompts that waited for a turn, including ones dropped by a crash) are not
  projected: the model sees a prompt only through the ``user`` event of the turn that ran it.

Compaction (``agent/compaction.py`` writes the events): a ``compaction/end`` event with
``{first_seq, last_seq, message}`` is a replacement — the surface messages of the events in
``[first_seq, last_seq]`` (an earlier checkpoint included) become ONE user message, ``message``
(the checkpoint), at the place of the first of them. The replaced events stay in the log; a
``compaction/end`` without ``message`` (an aborted compaction) replaces nothing.
"""

from __future__ import annotations

from typing import Any, Iterable

from agent_server.session.events import SessionEvent


def derive_messages(events: Iterable[SessionEvent]) -> list[dict[str, Any]]:
    """Project ``events`` (oldest first) into chat messages, in log order.

    Returns a new list of new dicts on every call. Events of unknown types are ignored, so newer
    bookkeeping events never change what an older request looked like.
    """
    return [message for _, message in surface_messages(events)]


def surface_messages(events: Iterable[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
    """Like ``derive_messages`` but each message paired with the ``seq`` of the event it came from
    (a checkpoint: the ``first_seq`` of the range it replaces), compactions applied in log order."""
    events = list(events)
    pairs = _plain_messages(events)
    for event in events:
        if event.type == "compaction/end" and isinstance(event.data.get("message"), str):
            first, last = event.data["first_seq"], event.data["last_seq"]
            pairs = ([p for p in pairs if p[0] < first]
                     + [(first, {"role": "user", "content": event.data["message"]})]
                     + [p for p in pairs if p[0] > last])
    return pairs


def _plain_messages(events: list[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
    return _build_plain(events).pairs


def _build_plain(events: list[SessionEvent]) -> "_Plain":
    refused = {
        e.data.get("turn")
        for e in events
        if e.type == "turn/end" and e.data.get("exit") == "refusal"
    }
    plain = _Plain()
    turn: int | None = None
    for event in events:
        if event.type == "turn/start":
            turn = event.data.get("turn")
            continue
        if turn in refused and turn is not None:
            if event.type == "turn/end":
                turn = None  # what comes after a refused turn's end (recovery's results) is projected
            continue
        plain.add(event)
    return plain


class _Plain:
    """Plain messages (``(seq, message)``) in projection order, built one event at a time: a tool
    result goes right after its call's assistant message (see the module docstring)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[int, dict[str, Any]]] = []
        self._group_end = 0  # where the next result of the latest assistant message with calls goes
        self._group_calls: set[str] = set()  # its calls that have no result yet

    def add(self, event: SessionEvent) -> None:
        message = _message_of(event)
        if message is None:
            return
        pair = (event.seq, message)
        if message["role"] == "tool" and message["tool_call_id"] in self._group_calls:
            self._group_calls.discard(message["tool_call_id"])
            self.pairs.insert(self._group_end, pair)
            self._group_end += 1
            return
        self.pairs.append(pair)
        if message["role"] == "assistant" and message.get("tool_calls"):
            self._group_calls = {c["id"] for c in message["tool_calls"]}
            self._group_end = len(self.pairs)


def _assistant_message(data: dict[str, Any]) -> dict[str, Any] | None:
    text = data.get("text") or ""
    calls = data.get("tool_calls") or []
    if not text and not calls:
        return None
    message: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else None}
    reasoning = data.get("reasoning") or ""
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]},
            }
            for call in calls
        ]
    return message


class ProjectionMemo:
    """A memo of ``surface_messages`` over an append-only log, for long sessions.

    ``surface(events)`` equals ``surface_messages(events)`` for every ``events``: it only caches
    that pure function. The plain messages of the prefix already seen are kept and only new events
    are projected; compactions are applied on top at every call (there are few). It starts again
    from scratch when the view is rewritten: a list that does not extend the last one (tail repair,
    fork, a reloaded log) or a ``turn/end`` with ``exit: "refusal"`` (it drops its whole turn).
    Returned messages are new dicts (callers may change them).
    """

    def __init__(self) -> None:
        self._seen: list[SessionEvent] = []
        self._plain = _Plain()
        self._compactions: list[SessionEvent] = []

    def _extends(self, events: list[SessionEvent]) -> bool:
        n = len(self._seen)
        return n == 0 or (len(events) >= n and events[0] is self._seen[0] and events[n - 1] is self._seen[-1])

    def surface(self, events: Iterable[SessionEvent]) -> list[tuple[int, dict[str, Any]]]:
        """``surface_messages(events)``, computed incrementally when ``events`` extends the list
        this memo saw last."""
        events = list(events)
        if not self._extends(events):
            self.__init__()
        new = events[len(self._seen):]
        if any(e.type == "turn/end" and e.data.get("exit") == "refusal" for e in new):
            self._plain = _build_plain(events)
            new = [e for e in new if e.type == "compaction/end"]
        else:
            for event in new:
                self._plain.add(event)
        self._compactions += [e for e in new if e.type == "compaction/end" and isinstance(e.data.get("message"), str)]
        self._seen = events
        pairs = self._plain.pairs
        for event in self._compactions:
            first, last = event.data["first_seq"], event.data["last_seq"]
            pairs = ([p for p in pairs if p[0] < first]
                     + [(first, {"role": "user", "content": event.data["message"]})]
                     + [p for p in pairs if p[0] > last])
        return [(seq, dict(message)) for seq, message in pairs]


def _message_of(event: SessionEvent) -> dict[str, Any] | None:
    """The message one event projects to on its own (refusals and compactions aside)."""
    kind, data = event.type, event.data
    if kind == "user":
        return {"role": "user", "content": data["content"]}
    if kind == "assistant":
        return _assistant_message(data)
    if kind == "notice":
        return {"role": "user", "content": f"[agent-server notice] {data['text']}"}
    if kind == "tool/result":
        return {"role": "tool", "tool_call_id": data["call_id"], "content": data["content"]}
    return None
