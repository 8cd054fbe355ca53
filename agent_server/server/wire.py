"""One JSON-RPC message as one line, standard library only.

Role: the line format of the ACP stdio transport, shared by the engine (``jsonrpc.Connection``)
and the CLI's pre-asyncio answers (``cli._fast_initialize``, ``fast_session``), so a message
leaves as the same bytes whichever path answers it.

Must never: import anything but the standard library (the fast paths run before asyncio loads).
"""

from __future__ import annotations

import json
import os
from typing import Any


def encode_message(message: dict[str, Any]) -> bytes:
    """One JSON-RPC message as one UTF-8 line (``\\n``-terminated).

    Non-ASCII text is written as is; if the message holds text UTF-8 cannot carry (a lone
    surrogate from a peer's ``\\ud800`` escape), it is written with ASCII escapes instead, which
    every JSON parser reads — a message is never dropped for its content.
    """
    line = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return (json.dumps(message, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to the blocking descriptor ``fd`` (``os.write`` may take part of it).
    Raises ``OSError`` as ``os.write`` does."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
