"""One JSON-RPC message as one line, standard library only.

Role: the line format of the ACP stdio transport, shared by the engine (``jsonrpc.Connection``)
and the CLI's pre-asyncio answers (``cli._fast_initialize``, ``fast_session``), so a message
leaves as the same bytes whichever path answers it.

Must never: import anything but the standard library (the fast paths run before asyncio loads).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Sequence


def _compact() -> Callable[[Any], str]:
    """``json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode``, its C encoder built
    once: ``encode`` builds it anew at every call (``iterencode``), a quarter of a small update's
    encoding, and a replay encodes tens of thousands (as ``llm._body.compact_encoder``, which this
    module may not import). Where the C encoder is missing or gives other text on a sample:
    ``encode``. (No reference cycle can be in a message read from JSON or built for one.)"""
    slow = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return slow
    try:
        encoder = make(None, json.JSONEncoder().default, json.encoder.encode_basestring, None, ":", ",",
                       False, False, True)

        def encode(value: Any, _encoder: Any = encoder, _join: Any = "".join) -> str:
            return _join(_encoder(value, 0))

        sample = {"method": "x", "params": {"text": "a\tb\n\"c\" é \u2028 \x00", "n": [1, -2.5, None, True, {}, []]}}
        if encode(sample) != slow(sample) or encode("x\n") != slow("x\n"):
            return slow
    except Exception:  # noqa: BLE001 — another interpreter's private API: the public one then
        return slow
    return encode


_encode = _compact()
"""``json.dumps(…, ensure_ascii=False, separators=(",", ":"))``, made once (``_compact``)."""


def encode_message(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as one UTF-8 line (``\\n``-terminated).

    Non-ASCII text is written as is; if the message holds text UTF-8 cannot carry (a lone
    surrogate from a peer's ``\\ud800`` escape), it is written with ASCII escapes instead, which
    every JSON parser reads — a message is never dropped for its content.
    """
    line = _encode(message) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def encode_notifications(method: str, params: Sequence[dict[str, Any]]) -> bytes:
    """``b"".join(encode_message({"jsonrpc": "2.0", "method": method, "params": p}) for p in
    params)``, byte for byte, with one encoder call per item (no message dict built, the line's
    frame encoded once) and one UTF-8 encode for them all — a replay sends tens of thousands."""
    head = '{"jsonrpc":"2.0","method":' + _encode(method) + ',"params":'
    encode = _encode
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
