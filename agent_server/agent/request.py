"""Model requests rebuilt from the log alone.

Role: ``request_body(events, step_seq)`` returns the JSON body of the model request made at the
``step/start`` event numbered ``step_seq``, using only events up to it: the latest
``request/header`` (system text, tool schemas, parameters, quirks) and the projection of the
history. The agent sends ``encode_body(request_body(...))``; replay calls the same function, so the
bytes are equal by construction (invariant 9, "what the model saw equals what is in the log").

Must never: read anything that is not an event (no config, no clock, no environment).
"""

from __future__ import annotations

from typing import Any, Sequence

from agent_server.session import SessionEvent, derive_messages


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
    header = next((e for e in reversed(prior) if e.type == "request/header"), None)
    if header is None:
        raise RequestRebuildError(f"no request/header before step/start {step_seq}")
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
