"""Value types of the LLM client layer: the stream events and the assembled message.

Role: plain frozen data that the client yields and the agent consumes. Every type is immutable,
slotted and JSON-friendly (``AssembledMessage.to_dict``).

Must never: carry behaviour or provider specifics — no parsing here, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AssembledMessage", "AssembledToolCall", "Finish", "ReasoningDelta", "StreamEvent",
    "TextDelta", "ToolCallDelta", "ToolCallStarted", "Usage",
]


@dataclass(frozen=True, slots=True)
class TextDelta:
    """A non-empty fragment of the assistant's answer text (``delta.content``)."""

    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    """A non-empty fragment of the model's reasoning (``delta.reasoning_content`` or
    ``delta.reasoning``)."""

    text: str


@dataclass(frozen=True, slots=True)
class ToolCallStarted:
    """A tool-call block opened.

    ``index`` is the call's position in this message (0, 1, 2 … in order of appearance), not
    the provider's wire ``index``. ``id`` is the provider's call id (or a generated
    ``call_…`` id when the provider sent none before the name). Emitted once per call, as soon
    as its name is known, before any :class:`ToolCallDelta` of that call.
    """

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A raw fragment of a tool call's ``arguments`` string, for live display only (the
    assembled arguments are in :class:`Finish`). ``index`` as in :class:`ToolCallStarted`."""

    index: int
    arguments: str


@dataclass(frozen=True, slots=True)
class Usage:
    """The provider's usage object, as sent (top-level ``usage``, else ``x_groq.usage``).
    Emitted at most once, right before :class:`Finish`."""

    usage: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AssembledToolCall:
    """One complete tool call. ``arguments`` is the concatenation of every raw argument fragment,
    exactly as streamed — never parsed and re-serialised (it may not even be valid JSON)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True, slots=True)
class AssembledMessage:
    """The whole assistant message of one stream.

    Attributes:
        content: the answer text ("" if none).
        reasoning: the reasoning text ("" if none).
        tool_calls: the calls in order of appearance; empty when ``finish_reason == "length"``.
        finish_reason: the first ``finish_reason`` the provider sent ("stop", "tool_calls",
            "length", "content_filter", …), or None if it sent none before ``[DONE]``.
        usage: the provider's usage object, or None.
        refusal: accumulated ``delta.refusal`` text (OpenAI), or None.
        dropped_tool_calls: how many tool calls were dropped: all of them when the message was
            cut by max tokens (``finish_reason == "length"``), else those past the assembler's
            ``max_tool_calls``.
    """

    content: str
    reasoning: str
    tool_calls: list[AssembledToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    refusal: str | None = None
    dropped_tool_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict with the same field names; tool calls as
        ``{"id", "name", "arguments"}`` dicts."""
        return {
            "content": self.content,
            "reasoning": self.reasoning,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments}
                           for c in self.tool_calls],
            "finish_reason": self.finish_reason,
            "usage": self.usage,
            "refusal": self.refusal,
            "dropped_tool_calls": self.dropped_tool_calls,
        }


@dataclass(frozen=True, slots=True)
class Finish:
    """The last event of every successful stream; nothing follows it."""

    message: AssembledMessage


#: Everything :meth:`ChatClient.stream` and :class:`StreamAssembler` can produce.
StreamEvent = TextDelta | ReasoningDelta | ToolCallStarted | ToolCallDelta | Usage | Finish
