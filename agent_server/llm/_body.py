"""The one canonical serialisation of a chat-completions request body.

Role: ``encode_body`` is the single function that turns a request body (a JSON-able dict built
from the session log) into the bytes sent on the wire. Replaying a request from the log gives the
same bytes only because every caller goes through this function.

Must never: change the body (no defaults, no key sorting, no "stream" injection) — what the caller
built is what is sent.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["encode_body"]


def encode_body(body: dict[str, Any]) -> bytes:
    """Serialise ``body`` as compact UTF-8 JSON, key order preserved.

    Exactly ``json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")``.

    Raises:
        TypeError: a value is not JSON-serialisable.
        ValueError: ``body`` contains a circular reference. (NaN/Infinity are written as
            ``NaN``/``Infinity`` like ``json.dumps`` does; do not put them in a body.)
    """
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
