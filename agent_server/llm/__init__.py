"""The LLM client layer: HTTP + SSE to an OpenAI-compatible endpoint, stream assembly, errors.

Role: send one request body (bytes from :func:`encode_body`) to ``…/chat/completions`` and turn
the provider's server-sent events into an ordered stream of events ending in exactly one
:class:`Finish` carrying the :class:`AssembledMessage` — or raise :class:`LLMError` with a code
from a closed set.

Must never: decide anything about the turn (retry, continue, stop, run tools), and never import
anything else of ``agent_server``.

Every name is imported on first use (PEP 562): ``ChatClient`` pulls in ``httpx``, so importing
the error, event and assembler types stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AssembledMessage": "_events",
    "AssembledToolCall": "_events",
    "ChatClient": "_client",
    "ERROR_CODES": "_errors",
    "Finish": "_events",
    "LLMError": "_errors",
    "RETRYABLE_CODES": "_errors",
    "ReasoningDelta": "_events",
    "StreamAssembler": "_assembler",
    "StreamEvent": "_events",
    "TextDelta": "_events",
    "ToolCallDelta": "_events",
    "ToolCallStarted": "_events",
    "Usage": "_events",
    "cached_tokens": "_usage",
    "compact_encoder": "_body",
    "encode_body": "_body",
}
"""Each name this package offers → the module that defines it, imported on first use (PEP 562)."""

__all__ = sorted([*_EXPORTS, "preloaded"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def preloaded() -> bool:
    """Whether ``ChatClient.preload()`` has finished in this process: the network layer is imported,
    and making a ``ChatClient`` now imports nothing (never blocks on another thread's import)."""
    import sys

    client = sys.modules.get(f"{__name__}._client")
    return client is not None and getattr(client, "_PRELOADED", False)


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
