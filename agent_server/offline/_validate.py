"""The history checks real providers apply to a chat request, for the offline endpoint's strict mode.

Role: ``history_problem(body)`` says what a provider would reject a ``/chat/completions`` body for
— an assistant message whose ``tool_calls`` are not all answered by the ``tool`` messages right
after it (a dangling call), a ``tool`` message that answers no call, an assistant message with
neither content nor tool calls — in the words OpenAI uses, or ``None`` when the history is valid.

Must never: look at anything but the request body, or judge what it does not understand (a body
that is not a chat request is left to the script).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["history_problem"]


def history_problem(body: bytes) -> str | None:
    """The first reason a provider would answer ``body`` with HTTP 400, else ``None``."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    messages = request.get("messages") if isinstance(request, dict) else None
    if not isinstance(messages, list):
        return None
    pending: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            return f"messages[{index}] is not an object"
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in pending:
                return (f"Invalid parameter: messages[{index}]: messages with role 'tool' must be a response "
                        f"to a preceding message with 'tool_calls' (no pending call {call_id!r})")
            pending.remove(call_id)
            continue
        if pending:
            return _dangling(index, pending)
        if role == "assistant":
            calls = message.get("tool_calls") or []
            if not calls and not _has_content(message.get("content")):
                return (f"Invalid assistant message at messages[{index}]: content or tool_calls must be set "
                        "(an empty assistant message)")
            pending = [c.get("id") for c in calls if isinstance(c, dict)]
    if pending:
        return _dangling(len(messages), pending)
    return None


def _dangling(index: int, pending: list[str]) -> str:
    return (f"An assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id' (at messages[{index}]). The following tool_call_ids did not have response "
            f"messages: {', '.join(map(str, pending))}")


def _has_content(content: Any) -> bool:
    if isinstance(content, str):
        return bool(content)
    if isinstance(content, list):
        return any(isinstance(p, dict) and (p.get("text") or p.get("type") not in (None, "text")) for p in content)
    return False
