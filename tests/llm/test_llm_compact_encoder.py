"""``compact_encoder`` (and the wire's own) give ``json.JSONEncoder.encode``'s text for any JSON value."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.llm import compact_encoder
from agent_server.server.rpc import wire

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(st.characters(codec=None, min_codepoint=0, max_codepoint=0x10FFFF)),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_the_encoder_built_once_writes_what_json_writes(value):
    for ascii_only in (False, True):
        for separators in ((",", ":"), (", ", ": ")):
            expected = json.JSONEncoder(ensure_ascii=ascii_only, separators=separators).encode(value)
            assert compact_encoder(ascii_only, separators)(value) == expected
    assert wire._encode(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))  # noqa: SLF001


def test_the_encoder_built_once_is_the_c_encoder_here():
    """On CPython the fast path is taken (else the figures in bench/README.md do not apply)."""
    for encoder in (compact_encoder(), compact_encoder(True), wire._encode):  # noqa: SLF001
        assert not hasattr(encoder, "__self__"), encoder  # not JSONEncoder.encode (a bound method)
