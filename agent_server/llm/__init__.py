"""The LLM client layer: HTTP + SSE to an OpenAI-compatible endpoint, stream assembly, errors.

Role: send one request body (bytes from :func:`encode_body`) to ``…/chat/completions`` and turn
the provider's server-sent events into an ordered stream of events ending in exactly one
:class:`Finish` carrying the :class:`AssembledMessage` — or raise :class:`LLMError` with a code
from a closed set.

Must never: decide anything about the turn (retry, continue, stop, run tools), and never import
anything else of ``agent_server``.

``ChatClient`` is imported lazily (it pulls in ``httpx``, ~80 ms), so importing the error,
event and assembler types here stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._assembler import StreamAssembler
from ._body import encode_body
from ._errors import ERROR_CODES, RETRYABLE_CODES, LLMError
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

if TYPE_CHECKING:
    from ._client import ChatClient

__all__ = [
    "ERROR_CODES", "RETRYABLE_CODES", "AssembledMessage", "AssembledToolCall", "ChatClient",
    "Finish", "LLMError", "ReasoningDelta", "StreamAssembler", "StreamEvent", "TextDelta",
    "ToolCallDelta", "ToolCallStarted", "Usage", "encode_body",
]


def __getattr__(name: str) -> Any:
    if name == "ChatClient":
        from ._client import ChatClient

        globals()["ChatClient"] = ChatClient
        return ChatClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
