"""The size bound of what the server sends: no line it writes is longer than ``MAX_SEND_BYTES``.

Role: ``fit_line(message, data, limit)`` turns a message whose encoded line is over the bound into
lines within it, or says it cannot (docs/protocol.md "Transport", *Size limit*): a text chunk
(``agent_message_chunk``, ``agent_thought_chunk``, ``user_message_chunk``) is split into several
consecutive chunks (nothing is lost: chunks are appended); any other ``session/update``, and a
``session/request_permission``, has its longest strings cut (display only — the log and the model
keep every byte) and is marked ``_meta.agentServer.truncated``; a result is replaced by an error
answer to the same request. Anything else over the bound is ``None``: the caller raises
(``jsonrpc.MessageTooLarge``), so a request that cannot be sent fails at once and clearly.

Must never: import anything but the standard library (``jsonrpc`` is on the start-up path), or
return a line over ``limit``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from agent_server.server.rpc.wire import encode_message

MAX_SEND_BYTES = 16 * 1024 * 1024
"""Longest line (its newline included) the server writes to a client: 16 MiB, half the 32 MiB
(33554432 bytes) the official TypeScript SDK reads by default, so a client on it never drops the
connection for a message of ours (docs/protocol.md "Transport")."""

_TEXT_CHUNKS = ("agent_message_chunk", "agent_thought_chunk", "user_message_chunk")
_MARGIN = 4096
_INTERNAL_ERROR = -32603


def _cut_note(dropped: int, limit: int) -> str:
    return (f"\n[… agent-server: {dropped:,} more characters not shown: a message to the editor may be at most "
            f"{limit:,} bytes]")


def fit_line(message: dict[str, Any], data: bytes, limit: int = MAX_SEND_BYTES) -> bytes | None:
    """Lines (each ``\\n``-terminated, each at most ``limit`` bytes) that carry ``message`` —
    whose one line ``data`` is over ``limit`` — as the module says, or ``None`` when it cannot
    be shrunk (the caller refuses to send it)."""
    method = message.get("method")
    params = message.get("params") if isinstance(message.get("params"), dict) else None
    if method == "session/update" and params is not None and isinstance(params.get("update"), dict):
        update = params["update"]
        content = update.get("content")
        if update.get("sessionUpdate") in _TEXT_CHUNKS and isinstance(content, dict) \
                and isinstance(content.get("text"), str):
            return _split_chunk(message, limit)
        return _cut_strings(message, ("params", "update"), len(data), limit)
    if method == "session/request_permission" and params is not None and isinstance(params.get("toolCall"), dict):
        return _cut_strings(message, ("params", "toolCall"), len(data), limit)
    if "method" not in message and "result" in message:
        return encode_message({"jsonrpc": "2.0", "id": message.get("id"), "error": {
            "code": _INTERNAL_ERROR,
            "message": f"the answer is too large to send: {len(data):,} bytes, over the {limit:,} bytes a "
                       "message may be (docs/protocol.md, Size limit)",
            "data": {"agentServer": {"tooLarge": {"bytes": len(data), "limit": limit}},
                     "details": f"the answer is too large to send: {len(data):,} bytes"}}})
    if "method" not in message and "error" in message:
        error = dict(message["error"]) if isinstance(message["error"], dict) else {}
        error.pop("data", None)
        error["message"] = str(error.get("message", ""))[: limit // 8]
        error["data"] = {"details": error["message"]}
        return encode_message({"jsonrpc": "2.0", "id": message.get("id"), "error": error})
    return None


def _split_chunk(message: dict[str, Any], limit: int) -> bytes:
    """One text chunk as several, each line within ``limit``."""
    update = message["params"]["update"]
    text: str = update["content"]["text"]
    frame = copy.deepcopy(message)
    frame["params"]["update"]["content"]["text"] = ""
    room = limit - len(encode_message(frame)) - _MARGIN
    lines: list[bytes] = []
    start = 0
    while start < len(text):
        size = max(1, room // 4)  # UTF-8: at most 4 bytes a character
        piece = text[start:start + size]
        while True:
            frame["params"]["update"]["content"]["text"] = piece
            line = encode_message(frame)
            if len(line) <= limit or len(piece) == 1:
                break
            piece = piece[: len(piece) // 2]  # escapes (\u0001 is 6 bytes) made it longer
        lines.append(line)
        start += len(piece)
    return b"".join(lines)


def _cut_strings(message: dict[str, Any], where: tuple[str, ...], size: int, limit: int) -> bytes | None:
    """``message`` with the longest strings under ``where`` cut until its line fits ``limit``,
    marked ``_meta.agentServer.truncated: {bytes, limit}`` there; ``None`` if it still does not."""
    message = copy.deepcopy(message)
    target: Any = message
    for key in where:
        target = target[key]
    meta = target.get("_meta") if isinstance(target.get("_meta"), dict) else {}
    ours = meta.get("agentServer") if isinstance(meta.get("agentServer"), dict) else {}
    target["_meta"] = {**meta, "agentServer": {**ours, "truncated": {"bytes": size, "limit": limit}}}
    for _ in range(64):
        line = encode_message(message)
        if len(line) <= limit:
            return line
        leaves = list(_string_leaves(target))
        if not leaves:
            return None
        holder, key, value = max(leaves, key=lambda leaf: len(leaf[2]))
        excess = len(line) - limit + _MARGIN
        encoded = len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if encoded <= 512:
            return None
        keep = max(0, int(len(value) * max(0, encoded - excess) / encoded) - 256)
        holder[key] = value[:keep] + _cut_note(len(value) - keep, limit)
    return None


def _string_leaves(node: Any):
    """``(container, key, string)`` for every string in ``node`` (keys of ``_meta`` aside)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "_meta":
                continue
            if isinstance(value, str):
                yield node, key, value
            else:
                yield from _string_leaves(value)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            if isinstance(value, str):
                yield node, index, value
            else:
                yield from _string_leaves(value)
