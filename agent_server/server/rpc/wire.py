"""One JSON-RPC message as one line, standard library only.

Role: the line format of the ACP stdio transport, shared by the engine (``jsonrpc.Connection``)
and the CLI's pre-asyncio answers (``cli._fast_initialize``, ``fast_session``), so a message
leaves as the same bytes whichever path answers it.

Must never: import anything but the standard library (the fast paths run before asyncio loads).
"""

from __future__ import annotations

import json
import os
from typing import Any, Sequence


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""``json.dumps(…, ensure_ascii=False, separators=(",", ":"))`` made once (``dumps`` with those
arguments builds a new encoder on every call)."""


def encode_message(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as one UTF-8 line (``\\n``-terminated).

    Non-ASCII text is written as is; if the message holds text UTF-8 cannot carry (a lone
    surrogate from a peer's ``\\ud800`` escape), it is written with ASCII escapes instead, which
    every JSON parser reads — a message is never dropped for its content.
    """
    line = _COMPACT.encode(message) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def encode_notifications(method: str, params: Sequence[dict[str, Any]]) -> bytes:
    """``b"".join(encode_message({"jsonrpc": "2.0", "method": method, "params": p}) for p in
    params)``, byte for byte, with one encoder call per item (no message dict built, the line's
    frame encoded once) and one UTF-8 encode for them all — a replay sends tens of thousands."""
    head = '{"jsonrpc":"2.0","method":' + _COMPACT.encode(method) + ',"params":'
    encode = _COMPACT.encode
    text = "".join([head + encode(p) + "}\n" for p in params])
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # some item holds a lone surrogate: each line as encode_message makes it
        return b"".join([encode_message({"jsonrpc": "2.0", "method": method, "params": p}) for p in params])


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the blocking descriptor ``fd`` (``os.write`` may take part of it).
    Raises ``OSError`` as ``os.write`` does."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
