"""Byte-faithful text codec: BOM, line endings, final newline, binary detection, LF folding."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tooltest_helpers import BOM_PY, CRLF, FIXTURE_NAMES, FIXTURES, KATEX, NO_NL

from agent_server.tools.text import BOM, LfView, NotTextError, decode_text, encode_text, lf_to


@pytest.mark.parametrize("name", FIXTURE_NAMES)
def test_every_fixture_round_trips_byte_for_byte(name):
    raw = (FIXTURES / name).read_bytes()
    view = decode_text(raw)
    assert encode_text(view.text, bom=view.bom) == raw


def test_bom_is_stripped_for_the_model_and_restored_once():
    raw = (FIXTURES / BOM_PY).read_bytes()
    view = decode_text(raw)
    assert view.bom and not view.text.startswith("\ufeff")
    out = encode_text(view.text, bom=True)
    assert out.startswith(BOM) and not out[3:].startswith(BOM)


def test_fixture_line_styles_are_detected():
    crlf = decode_text((FIXTURES / CRLF).read_bytes())
    assert (crlf.newline, crlf.crlf, crlf.lf, crlf.cr) == ("crlf", 247, 0, 0)
    assert crlf.dominant_newline == "\r\n"
    no_nl = decode_text((FIXTURES / NO_NL).read_bytes())
    assert no_nl.newline == "lf" and not no_nl.final_newline
    katex = decode_text((FIXTURES / KATEX).read_bytes())
    assert katex.newline == "none" and len(katex.lines()) == 1


def test_lines_drop_cr_of_crlf_but_keep_lone_cr():
    view = decode_text(b"a\r\nb\rc\nd")
    assert view.lines() == ["a", "b\rc", "d"]
    assert view.newline == "mixed"
    assert decode_text(b"").lines() == []
    assert decode_text(b"x\n").lines() == ["x"]


def test_nul_byte_means_binary():
    with pytest.raises(NotTextError, match="binary"):
        decode_text(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")


def test_a_few_invalid_bytes_are_tolerated_and_kept_exactly():
    raw = b"# caf\xe9 au lait\n" + b"print('ok')\n" * 50
    view = decode_text(raw)
    assert view.invalid_bytes == 1
    assert "caf\ufffd" in view.model_text
    assert encode_text(view.text, bom=False) == raw


def test_mostly_invalid_utf8_is_refused():
    with pytest.raises(NotTextError, match="not UTF-8"):
        decode_text(bytes(range(0x80, 0x100)) * 4)


def test_lf_to_converts_only_pure_lf_text():
    assert lf_to("a\nb\n", "\r\n") == "a\r\nb\r\n"
    assert lf_to("a\r\nb\n", "\r\n") == "a\r\nb\n"  # already chose its endings
    assert lf_to("a\nb", "\n") == "a\nb"


def test_lf_view_maps_positions_back_to_the_crlf_text():
    text = "one\r\ntwo\r\nthree\nfour\r\n"
    lv = LfView(text)
    assert lv.text == "one\ntwo\nthree\nfour\n"
    start = lv.text.index("two\nthree")
    end = start + len("two\nthree")
    assert text[lv.to_original(start) : lv.to_original(end)] == "two\r\nthree"
    nl = lv.text.index("\ntwo")  # a match starting at a folded break takes its \r too
    assert text[lv.to_original(nl) : lv.to_original(nl + 4)] == "\r\ntwo"
    lone = lv.text.index("\nfour")  # a lone LF stays a lone LF
    assert text[lv.to_original(lone) : lv.to_original(lone + 5)] == "\nfour"


@given(st.binary(max_size=300).filter(lambda b: b"\x00" not in b))
def test_round_trip_of_any_decodable_bytes(raw):
    try:
        view = decode_text(raw)
    except NotTextError:
        return
    assert encode_text(view.text, bom=view.bom) == raw


@given(st.lists(st.sampled_from(["a", "é", "\n", "\r", "\r\n", "\ufeff", "日"]), max_size=40),
       st.booleans())
def test_round_trip_of_texts_with_any_endings(pieces, bom):
    raw = (BOM if bom else b"") + "".join(pieces).encode()
    view = decode_text(raw)
    assert encode_text(view.text, bom=view.bom) == raw
