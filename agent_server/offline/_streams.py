"""Builders of streamed answers in the exact shape OpenAI-compatible providers send.

Role: a streamed text answer (``text_stream``) and a streamed tool-call answer
(``tool_call_stream``), as ``sse`` responses of the offline endpoint's script format (``_script``).

Must never: touch the network or the clock — this module is data only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)]


def _chunk(model: str, delta: dict[str, Any] | None, finish_reason: str | None = None
           ) -> dict[str, Any]:
    choices = [] if delta is None else [
        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
    return {"id": "chatcmpl-offline", "object": "chat.completion.chunk", "created": 0,
            "model": model, "choices": choices}


def _usage_frame(model: str, usage: Mapping[str, Any] | None, produced: str) -> dict[str, Any]:
    if usage is None:
        completion = math.ceil(len(produced) / 4)
        usage = {"prompt_tokens": 0, "completion_tokens": completion,
                 "total_tokens": completion}
    frame = _chunk(model, None)
    frame["usage"] = dict(usage)
    return frame


def text_stream(text: str, chunk_size: int = 8, *, reasoning: str = "", delay: float = 0.0,
                model: str = "offline-model", finish_reason: str = "stop",
                include_usage: bool = True, usage: Mapping[str, Any] | None = None
                ) -> dict[str, Any]:
    """An ``sse`` response shaped like OpenAI's: a role chunk, ``reasoning_content`` chunks (if
    ``reasoning``), content chunks of ``chunk_size`` code points, a chunk with
    ``finish_reason``, a usage chunk with empty ``choices`` (``usage`` or a rough
    characters/4 count with ``prompt_tokens`` 0), then ``[DONE]``. ``delay`` is seconds
    between frames."""
    frames: list[Any] = [_chunk(model, {"role": "assistant", "content": ""})]
    frames += [_chunk(model, {"reasoning_content": p}) for p in _pieces(reasoning, chunk_size)]
    frames += [_chunk(model, {"content": p}) for p in _pieces(text, chunk_size)]
    frames.append(_chunk(model, {}, finish_reason))
    if include_usage:
        frames.append(_usage_frame(model, usage, reasoning + text))
    return {"kind": "sse", "frames": frames, "delay": delay, "done": True}


def tool_call_stream(calls: Sequence[tuple[str, str, str]], *, text: str = "",
                     args_chunk_size: int = 16, delay: float = 0.0,
                     model: str = "offline-model", include_usage: bool = True,
                     usage: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An ``sse`` response with optional leading ``text`` and then the tool ``calls``
    (``(id, name, arguments_json)`` each), OpenAI-style: the first delta of call *i* carries
    ``index`` *i*, ``id``, ``type`` and ``name`` with empty arguments, the following deltas carry
    ``index`` and ``args_chunk_size``-sized argument fragments; then finish ``tool_calls``,
    usage and ``[DONE]``."""
    frames: list[Any] = [_chunk(model, {"role": "assistant", "content": None})]
    frames += [_chunk(model, {"content": p}) for p in _pieces(text, 16)]
    produced = text
    for i, (call_id, name, arguments) in enumerate(calls):
        frames.append(_chunk(model, {"tool_calls": [{
            "index": i, "id": call_id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}))
        frames += [_chunk(model, {"tool_calls": [{"index": i, "function": {"arguments": p}}]})
                   for p in _pieces(arguments, args_chunk_size)]
        produced += name + arguments
    frames.append(_chunk(model, {}, "tool_calls"))
    if include_usage:
        frames.append(_usage_frame(model, usage, produced))
    return {"kind": "sse", "frames": frames, "delay": delay, "done": True}
