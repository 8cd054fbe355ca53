"""The one canonical serialisation of a chat-completions request body.

Role: ``encode_body`` is the single function that turns a request body (a JSON-able dict built
from the session log) into the bytes sent on the wire. Replaying a request from the log gives the
same bytes only because every caller goes through this function. ``compact_encoder`` gives the
same text for parts of a body encoded one at a time (the request memo's messages).

Must never: change the body (no defaults, no key sorting, no "stream" injection) — what the caller
built is what is sent.
"""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["compact_encoder", "encode_body"]


def encode_body(body: dict[str, Any]) -> bytes:
    """Serialise ``body`` as compact UTF-8 JSON, key order preserved.

    Exactly ``json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")``.

    Raises:
        TypeError: a value is not JSON-serialisable.
        ValueError: ``body`` contains a circular reference. (NaN/Infinity are written as
            ``NaN``/``Infinity`` like ``json.dumps`` does; do not put them in a body.)
    """
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


_SAMPLE: Any = {"role": "tool", "content": "a\tb\n\"c\" é \u2028 \x00 \ud83d\ude00", "n": [1, -2.5, 1e300, None, True,
                                                                                   False, {}, [], {"k": "v"}]}


def compact_encoder(ensure_ascii: bool = False, separators: tuple[str, str] = (",", ":")) -> Callable[[Any], str]:
    """``json.JSONEncoder(ensure_ascii=…, separators=…).encode``, the same text, for values encoded
    many at a time: that method builds its C encoder anew at every call (``iterencode``), a quarter
    of a small message's encoding (bench/README.md); this one is built once. Values must hold no
    reference cycle (JSON read from a log cannot): one would raise ``RecursionError`` here, not
    ``ValueError``. Where the interpreter has no C encoder, or it does not give the same text on
    a sample, ``encode`` itself."""
    slow = json.JSONEncoder(ensure_ascii=ensure_ascii, separators=separators).encode
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return slow
    try:
        encoder = make(None, json.JSONEncoder().default,
                       json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring,
                       None, separators[1], separators[0], False, False, True)

        def encode(value: Any, _encoder: Any = encoder, _join: Any = "".join) -> str:
            return _join(_encoder(value, 0))

        if encode(_SAMPLE) != slow(_SAMPLE) or encode("x\n") != slow("x\n"):
            return slow
    except Exception:  # noqa: BLE001 — another interpreter's private API: the public one then
        return slow
    return encode
