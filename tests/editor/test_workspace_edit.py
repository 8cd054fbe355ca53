"""WorkspaceEdits built from text changes, checked by an independent reference applier."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support.editor import rows_apply

from agent_server.server.edits import apply_text_edits, text_edits, workspace_edit


def reference_apply(text, edits, encoding):
    """An independent applier: walk the text once, counting LSP lines and code units."""
    def unit_len(ch):
        if encoding == "utf-16":
            return 2 if ord(ch) > 0xFFFF else 1
        if encoding == "utf-8":
            return len(ch.encode("utf-8", "surrogatepass"))
        return 1

    def offset(pos):
        line, char, i = 0, 0, 0
        while i < len(text) and line < pos["line"]:
            if text[i] == "\r" and text[i + 1:i + 2] == "\n":
                i += 2
                line += 1
            elif text[i] in "\r\n":
                i += 1
                line += 1
            else:
                i += 1
        while i < len(text) and char < pos["character"] and text[i] not in "\r\n":
            char += unit_len(text[i])
            i += 1
        assert char == pos["character"] or i == len(text) or text[i] in "\r\n", "position inside a character"
        return i

    out = text
    for edit in sorted(edits, key=lambda e: (e["range"]["start"]["line"], e["range"]["start"]["character"]), reverse=True):
        a, b = offset(edit["range"]["start"]), offset(edit["range"]["end"])
        out = out[:a] + edit["newText"] + out[b:]
    return out


@pytest.mark.parametrize("encoding, expected_start", [("utf-16", 13), ("utf-8", 19), ("utf-32", 12)])
def test_emoji_line_edit_after_the_emoji_in_each_encoding(encoding, expected_start):
    old = 'x = "⚙️😀" # é\nprint(x)\n'
    new = 'x = "⚙️😀" # è\nprint(x)\n'
    (edit,) = text_edits(old, new, encoding)
    assert edit["range"]["start"] == {"line": 0, "character": expected_start}
    assert edit["newText"] == "è"
    assert reference_apply(old, [edit], encoding) == new


def test_crlf_change_keeps_positions_out_of_line_breaks():
    old = "a\r\nb\r\nc\r\n"
    new = "a\r\nB\r\nc\r\n"
    (edit,) = text_edits(old, new)
    assert edit == {"range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 1}}, "newText": "B"}
    changed = text_edits("x\r\ny", "x\rz")
    assert reference_apply("x\r\ny", changed, "utf-16") == "x\rz"


def test_one_text_edit_per_contiguous_change():
    old = "".join(f"line {i}\n" for i in range(20))
    new = old.replace("line 2\n", "LINE 2\n").replace("line 10\nline 11\n", "").replace("line 19\n", "line 19\nextra\n")
    edits = text_edits(old, new)
    assert len(edits) == 3
    assert reference_apply(old, edits, "utf-16") == new


def test_equal_texts_give_no_edits():
    assert text_edits("same\n", "same\n") == []


def test_new_file_is_create_file_then_insert():
    edit = workspace_edit("/w/new.py", None, "print(1)\n", version=None)
    create, insert = edit["documentChanges"]
    assert create == {"kind": "create", "uri": "file:///w/new.py", "options": {"overwrite": False, "ignoreIfExists": False}}
    assert insert["textDocument"] == {"uri": "file:///w/new.py", "version": None}
    assert insert["edits"][0]["newText"] == "print(1)\n"
    json.dumps(edit)


def test_workspace_edit_validates_as_lsprotocol_types():
    from lsprotocol import converters, types

    edit = workspace_edit("/w/a b.py", "x = 1\n", "result = 1\n", version=12)
    parsed = converters.get_converter().structure(edit, types.WorkspaceEdit)
    assert parsed.document_changes[0].text_document.version == 12
    assert edit["documentChanges"][0]["textDocument"]["uri"] == "file:///w/a%20b.py"


texts = st.text(alphabet=st.sampled_from(list("ab \t\r\né⚙😀\u0301x\n")), max_size=60)


@settings(max_examples=400, deadline=None)
@given(old=texts, new=texts, encoding=st.sampled_from(["utf-16", "utf-8", "utf-32"]))
def test_built_edits_reproduce_the_new_text_exactly(old, new, encoding):
    edits = text_edits(old, new, encoding)
    assert reference_apply(old, edits, encoding) == new
    assert apply_text_edits(old, edits, encoding) == new


@settings(max_examples=200, deadline=None)
@given(old=texts, data=st.data())
def test_random_splices_round_trip(old, data):
    a = data.draw(st.integers(0, len(old)))
    b = data.draw(st.integers(a, len(old)))
    new = old[:a] + data.draw(texts) + old[b:]
    edits = text_edits(old, new, "utf-16")
    assert reference_apply(old, edits, "utf-16") == new


def test_negative_positions_are_refused_not_read_as_python_indexes():
    bad = [{"range": {"start": {"line": -1, "character": 0}, "end": {"line": 0, "character": 1}}, "newText": "x"}]
    with pytest.raises(ValueError):
        apply_text_edits("abc\n", bad)


odd_texts = st.text(alphabet=st.sampled_from(list("ab\r\n\u2028\u2029\x85\x0c\x0b😀é")), max_size=50)


@settings(max_examples=300, deadline=None)
@given(old=odd_texts, new=odd_texts, encoding=st.sampled_from(["utf-16", "utf-8", "utf-32"]))
def test_edits_for_a_client_that_counts_rows_land_where_neovim_puts_them(old, new, encoding):
    """Newcomer 4's finding 0 over LSP: edits counted on LSP lines landed on the wrong row of a
    Neovim buffer holding a lone CR. Counted as "lf", they land exactly where Neovim applies them;
    counted as LSP says, U+2028, U+0085 and a form feed end no line either."""
    edits = text_edits(old, new, encoding, "lf")
    assert rows_apply(old, edits, encoding) == new
    assert apply_text_edits(old, edits, encoding, "lf") == new
    lsp = text_edits(old, new, encoding)
    assert reference_apply(old, lsp, encoding) == new
    assert apply_text_edits(old, lsp, encoding) == new
