"""Big texts: where they differ, found in linear time, and the diff a big change shows (the changed
region with context, marked partial) — and the proposal's hunks of a big text, which must apply to
exactly the new text (docs/protocol.md, "Edit proposals")."""

import random

import pytest

import agent_server.server.edits as we
import agent_server.tools.diff_view as dv
from agent_server.server.edits import apply_text_edits, text_edits
from agent_server.tools.diff_view import changed_region, common_prefix, diff_content


def words(rng, n):
    return "".join(rng.choice(["a", "b", "\n", "\r\n", "é", "😀", "xy\n"]) for _ in range(n))


@pytest.mark.parametrize("block", [1, 3, 1 << 16])
def test_changed_region_holds_every_difference(monkeypatch, block):
    monkeypatch.setattr(dv, "_BLOCK", block)
    rng = random.Random(block)
    for _ in range(2000):
        a, b = words(rng, rng.randint(0, 30)), words(rng, rng.randint(0, 30))
        p = common_prefix(a, b)
        assert a[:p] == b[:p] and (p == min(len(a), len(b)) or a[p] != b[p])
        a0, a1, b0, b1 = changed_region(a, b)
        assert a0 == b0 and a[:a0] + b[b0:b1] + a[a1:] == b and a[a1:] == b[b1:]


def test_a_small_change_is_shown_whole_and_a_big_one_as_its_region_with_context():
    assert diff_content("/w/a", "x\n", "y\n") == {"type": "diff", "path": "/w/a", "oldText": "x\n", "newText": "y\n"}
    old = "".join(f"line {i}\n" for i in range(1, 200_001))
    new = old.replace("line 1000\n", "changed\nlines\n")
    d = diff_content("/w/a", old, new)
    assert d["_meta"]["agentServer"]["diff"] == {"partial": True, "oldLine": 995, "newLine": 995}
    assert d["oldText"] == "".join(f"line {i}\n" for i in range(995, 1006))
    assert d["newText"] == d["oldText"].replace("line 1000\n", "changed\nlines\n")
    created = diff_content("/w/a", None, old)
    assert created["oldText"] is None and created["_meta"]["agentServer"]["diff"]["truncated"] is True
    assert len(created["newText"]) <= dv.REGION_CHARS and created["newText"].endswith("\n")


def test_a_change_at_either_end_of_a_big_text_keeps_its_lines():
    old = "".join(f"line {i}\n" for i in range(1, 200_001))
    first = diff_content("/w/a", old, "new first\n" + old)
    assert first["oldText"].startswith("line 1\n") and first["newText"].startswith("new first\nline 1\n")
    last = diff_content("/w/a", old, old + "tail")
    assert last["newText"].endswith("line 200000\ntail") and last["oldText"].endswith("line 200000\n")


@pytest.mark.parametrize("seed", range(40))
def test_the_hunks_of_a_big_text_apply_to_exactly_the_new_text(monkeypatch, seed):
    monkeypatch.setattr(we, "BIG_TEXT_CHARS", 50)
    monkeypatch.setattr(we, "MIDDLE_LINES", 4 if seed % 2 else 1000)
    rng = random.Random(seed)
    old = words(rng, rng.randint(0, 200))
    new = list(old)
    for _ in range(rng.randint(0, 4)):
        at = rng.randint(0, len(new))
        new[at:at + rng.randint(0, 5)] = words(rng, rng.randint(0, 6))
    new = "".join(new)
    for encoding in ("utf-16", "utf-8", "utf-32"):
        edits = text_edits(old, new, encoding)
        assert apply_text_edits(old, edits, encoding) == new
        assert (edits == []) == (old == new)


def test_a_one_line_edit_of_a_30_mb_text_is_one_small_hunk_without_difflib_over_every_line(monkeypatch):
    import difflib

    compared = []  # the lengths of what difflib was asked to match (over every line it took ~11 s)

    class Counting(difflib.SequenceMatcher):
        def __init__(self, isjunk=None, a="", b="", autojunk=True):
            compared.append(max(len(a), len(b)))
            super().__init__(isjunk, a, b, autojunk)
    monkeypatch.setattr(difflib, "SequenceMatcher", Counting)
    old = "".join(f"LINE {i}\n" for i in range(1, 2_500_001))
    new = old.replace("LINE 250000\n", "CHANGED 250000\n")
    edits = text_edits(old, new)
    assert max(compared, default=0) <= 10, compared  # only the changed line's region, never the 2.5 M lines
    assert edits == [{"range": {"start": {"line": 249999, "character": 0}, "end": {"line": 249999, "character": 4}},
                      "newText": "CHANGED"}]


def test_finding_18_a_one_line_2_mb_file_showed_the_same_first_256_ki_on_both_sides():
    # a minified file: the region began at the line's start and both sides were cut to the same text
    # (the VS Code Changes box said +0 -0)
    old = "".join(f"var a{i}={i};" for i in range(120_000))
    new = old.replace("var a60000=60000;", "var a60000=6;")
    d = diff_content("/w/big.min.js", old, new)
    assert d["oldText"] != d["newText"]
    assert "var a60000=60000;" in d["oldText"] and "var a60000=6;" in d["newText"]
    meta = d["_meta"]["agentServer"]["diff"]
    assert meta["oldLine"] == 1 and old[meta["column"] - 1:].startswith(d["oldText"][:100])
