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
* ``tool/result`` → ``{"role": "tool", "tool_call_id": data.call_id, "content": data.content}``;
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
    refused = {
        e.data.get("turn")
        for e in events
        if e.type == "turn/end" and e.data.get("exit") == "refusal"
    }
    messages: list[tuple[int, dict[str, Any]]] = []
    turn: int | None = None
    for event in events:
        kind, data = event.type, event.data
        if kind == "turn/start":
            turn = data.get("turn")
            continue
        if turn in refused and turn is not None:
            continue
        if kind == "user":
            messages.append((event.seq, {"role": "user", "content": data["content"]}))
        elif kind == "assistant":
            message = _assistant_message(data)
            if message is not None:
                messages.append((event.seq, message))
        elif kind == "notice":
            messages.append((event.seq, {"role": "user", "content": f"[agent-server notice] {data['text']}"}))
        elif kind == "tool/result":
            messages.append(
                (event.seq, {"role": "tool", "tool_call_id": data["call_id"], "content": data["content"]})
            )
    return messages


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
