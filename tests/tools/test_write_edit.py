"""``write`` and ``edit``: read-before-write, stale refusal, byte-faithful results, matching."""

from __future__ import annotations

import pytest
from tooltest_helpers import BOM_PY, CRLF, FIXTURE_NAMES, FIXTURES, KATEX, NO_NL, body_lines, call

from agent_server.tools.text import decode_text


def model_content(name: str) -> str:
    """The content a model rebuilds from what `read` showed it: lines joined with LF, a final
    newline when the file has one (no BOM, no CR)."""
    view = decode_text((FIXTURES / name).read_bytes())
    return "\n".join(view.lines()) + ("\n" if view.final_newline else "")


@pytest.mark.parametrize("name", FIXTURE_NAMES)
async def test_fixture_rewritten_from_what_the_model_saw_is_byte_identical(ws, ctx, name):
    original = (FIXTURES / name).read_bytes()
    assert not (await call(ctx, "read", path=name)).is_error
    # change it first, so writing the original back really writes
    changed = await call(ctx, "write", path=name, content="placeholder\n")
    assert not changed.is_error, changed.text
    assert (ws / name).read_bytes() != original
    back = await call(ctx, "write", path=name, content=model_content(name))
    assert not back.is_error, back.text
    assert (ws / name).read_bytes() == original


async def test_write_keeps_bom_once_and_converts_lf_to_crlf(ws, ctx):
    await call(ctx, "read", path=BOM_PY)
    res = await call(ctx, "write", path=BOM_PY, content="x = 1\n")
    assert (ws / BOM_PY).read_bytes() == b"\xef\xbb\xbfx = 1\n" and "BOM" in res.text
    await call(ctx, "write", path=BOM_PY, content="\ufeffy = 2\n")  # the model sent a BOM itself
    assert (ws / BOM_PY).read_bytes() == b"\xef\xbb\xbfy = 2\n"
    await call(ctx, "read", path=CRLF)
    res = await call(ctx, "write", path=CRLF, content="a\nb\n")
    assert (ws / CRLF).read_bytes() == b"a\r\nb\r\n" and "CRLF" in res.text


async def test_write_of_identical_content_is_a_no_op(ws, ctx):
    await call(ctx, "read", path=NO_NL)
    before = (ws / NO_NL).stat().st_mtime_ns
    res = await call(ctx, "write", path=NO_NL, content=model_content(NO_NL))
    assert not res.is_error and "No change" in res.text
    assert (ws / NO_NL).stat().st_mtime_ns == before


async def test_write_without_read_is_refused(ws, ctx):
    original = (ws / NO_NL).read_bytes()
    res = await call(ctx, "write", path=NO_NL, content="gone\n")
    assert res.is_error and "not read" in res.text and "`read` first" in res.text
    assert (ws / NO_NL).read_bytes() == original


async def test_write_after_an_outside_change_is_stale_and_touches_nothing(ws, ctx):
    await call(ctx, "read", path=NO_NL)
    (ws / NO_NL).write_bytes(b"changed by the user\n")
    res = await call(ctx, "write", path=NO_NL, content="model text\n")
    assert res.is_error and "changed since you last read it" in res.text
    assert (ws / NO_NL).read_bytes() == b"changed by the user\n"


async def test_write_new_file_needs_no_read_and_creates_folders(ws, ctx):
    res = await call(ctx, "write", path="src/pkg/new.py", content="print('hi')\n")
    assert not res.is_error and res.text.startswith("Created src/pkg/new.py")
    assert (ws / "src/pkg/new.py").read_bytes() == b"print('hi')\n"
    [diff] = res.content
    assert diff == {"type": "diff", "path": str(ws / "src/pkg/new.py"), "oldText": None, "newText": "print('hi')\n"}
    # written files count as seen: an edit right after needs no read
    assert not (await call(ctx, "edit", path="src/pkg/new.py", old_string="hi", new_string="yo")).is_error


async def test_write_diff_carries_old_and_new_text(ws, ctx):
    await call(ctx, "read", path=BOM_PY)
    res = await call(ctx, "write", path=BOM_PY, content="new\n")
    [diff] = res.content
    assert diff["oldText"] == decode_text((FIXTURES / BOM_PY).read_bytes()).text
    assert diff["newText"] == "new\n" and diff["path"] == str(ws / BOM_PY)


async def test_edit_crlf_file_with_lf_old_string_keeps_crlf_elsewhere(ws, ctx):
    original = (FIXTURES / CRLF).read_bytes()
    old_region = b"<#\r\n.Synopsis\r\nActivate a Python virtual environment"
    new_region = b"<#\r\n.SYNOPSIS\r\nActivates a Python\r\nvirtual environment"
    assert original.count(old_region) == 1
    expected = original.replace(old_region, new_region)
    await call(ctx, "read", path=CRLF)
    res = await call(ctx, "edit", path=CRLF,
                     old_string="<#\n.Synopsis\nActivate a Python virtual environment",
                     new_string="<#\n.SYNOPSIS\nActivates a Python\nvirtual environment")
    assert not res.is_error, res.text
    assert (ws / CRLF).read_bytes() == expected
    assert "lines 1-4" in res.text and "CRLF" in res.text
    assert res.locations == [{"path": str(ws / CRLF), "line": 1}]


async def test_edit_mixed_endings_and_lone_cr_survive_outside_the_region(ws, ctx):
    raw = b"keep\r\nlone\rcr\nlf only\nold one\r\nold two\r\ntail\r\n"
    (ws / "mixed.txt").write_bytes(raw)
    await call(ctx, "read", path="mixed.txt")
    res = await call(ctx, "edit", path="mixed.txt", old_string="old one\nold two", new_string="new\nlines\nhere")
    assert not res.is_error, res.text
    assert (ws / "mixed.txt").read_bytes() == b"keep\r\nlone\rcr\nlf only\nnew\r\nlines\r\nhere\r\ntail\r\n"
    # a one-line old_string growing into several lines takes the file's dominant ending (CRLF)
    await call(ctx, "edit", path="mixed.txt", old_string="tail", new_string="tail\nplus")
    assert (ws / "mixed.txt").read_bytes().endswith(b"here\r\ntail\r\nplus\r\n")


async def test_edit_keeps_bom_and_missing_final_newline(ws, ctx):
    for name in (BOM_PY, NO_NL):
        original = (FIXTURES / name).read_bytes()
        await call(ctx, "read", path=name)
        res = await call(ctx, "edit", path=name, old_string="import ", new_string="import  ", replace_all=True)
        assert not res.is_error, res.text
        assert (ws / name).read_bytes() == original.replace(b"import ", b"import  ")


async def test_edit_inside_the_minified_line_changes_only_those_bytes(ws, ctx):
    original = (FIXTURES / KATEX).read_bytes()
    needle = b'protocolFromUrl:function(e)'
    assert original.count(needle) == 1
    await call(ctx, "read", path=KATEX)
    res = await call(ctx, "edit", path=KATEX, old_string=needle.decode(), new_string="protocolOf:function(e)")
    assert not res.is_error, res.text
    assert (ws / KATEX).read_bytes() == original.replace(needle, b"protocolOf:function(e)")
    assert len(res.text) < 2000  # the confirmation snippet is bounded even on a 276 KB line


async def test_edit_with_no_match_hints_at_the_closest_line(ws, ctx):
    (ws / "a.py").write_text("def compute_total(items):\n    return sum(items)\n")
    await call(ctx, "read", path="a.py")
    res = await call(ctx, "edit", path="a.py", old_string="def compute_totals(items):", new_string="x")
    assert res.is_error and "not found" in res.text
    assert "closest line is line 1" in res.text and res.meta["matches"] == 0
    res = await call(ctx, "edit", path="a.py", old_string="     1\tdef compute_total(items):", new_string="x")
    assert res.is_error and "line-number prefix" in res.text


async def test_edit_with_two_matches_gives_count_and_lines(ws, ctx):
    (ws / "a.py").write_text("x = 1\ny = 2\nx = 1\n")
    await call(ctx, "read", path="a.py")
    res = await call(ctx, "edit", path="a.py", old_string="x = 1", new_string="x = 3")
    assert res.is_error and "2 times" in res.text and "lines 1, 3" in res.text and "replace_all" in res.text
    assert (ws / "a.py").read_text() == "x = 1\ny = 2\nx = 1\n"


async def test_edit_replace_all(ws, ctx):
    (ws / "a.py").write_text("x = 1\ny = 2\nx = 1\n")
    await call(ctx, "read", path="a.py")
    res = await call(ctx, "edit", path="a.py", old_string="x = 1", new_string="x = 3", replace_all=True)
    assert not res.is_error and "2 occurrences" in res.text and "lines 1, 3" in res.text
    assert (ws / "a.py").read_text() == "x = 3\ny = 2\nx = 3\n"
    [diff] = res.content
    assert diff["oldText"] == "x = 1\ny = 2\nx = 1\n" and diff["newText"] == "x = 3\ny = 2\nx = 3\n"


async def test_edit_requires_read_and_detects_stale(ws, ctx):
    (ws / "a.py").write_text("x = 1\n")
    res = await call(ctx, "edit", path="a.py", old_string="x", new_string="y")
    assert res.is_error and "not read" in res.text
    await call(ctx, "read", path="a.py")
    (ws / "a.py").write_text("x = 2\n")
    res = await call(ctx, "edit", path="a.py", old_string="x", new_string="y")
    assert res.is_error and "changed since you last read it" in res.text
    assert (ws / "a.py").read_text() == "x = 2\n"


async def test_edit_argument_mistakes_are_errors(ws, ctx):
    (ws / "a.py").write_text("x = 1\n")
    await call(ctx, "read", path="a.py")
    assert "empty" in (await call(ctx, "edit", path="a.py", old_string="", new_string="y")).text
    assert "identical" in (await call(ctx, "edit", path="a.py", old_string="x", new_string="x")).text
    res = await call(ctx, "edit", path="nope.py", old_string="x", new_string="y")
    assert res.is_error and "not found" in res.text.lower() and "`write`" in res.text


async def test_successive_edits_need_no_re_read(ws, ctx):
    (ws / "a.py").write_text("a\nb\n")
    await call(ctx, "read", path="a.py")
    assert not (await call(ctx, "edit", path="a.py", old_string="a", new_string="A")).is_error
    assert not (await call(ctx, "edit", path="a.py", old_string="b", new_string="B")).is_error
    assert (ws / "a.py").read_text() == "A\nB\n"
    assert body_lines((await call(ctx, "read", path="a.py")).text) == ["A", "B"]


async def test_titles(ws, ctx):
    from agent_server.tools.write_edit import EditArgs, EditTool, WriteArgs, WriteTool

    assert WriteTool().title(WriteArgs(path=str(ws / "src/app.py"), content=""), ctx) == "Write src/app.py"
    assert EditTool().title(EditArgs(path="src/app.py", old_string="a", new_string="b"), ctx) == "Edit src/app.py"
    assert EditTool().locations(EditArgs(path="x.py", old_string="a", new_string="b"), ctx) == [
        {"path": str(ws / "x.py")}
    ]


async def test_edits_of_a_file_ending_in_a_lone_cr_stay_byte_exact(ws, ctx):
    """A file whose last byte is a lone ``\\r`` (no ``\\n`` after it): an edit changes only its
    region, the result snippet shows the ``\\r`` that is there, and a write of the text the model
    read leaves the bytes as they were."""
    (ws / "cr.txt").write_bytes(b"a\rb\r")
    await call(ctx, "read", path="cr.txt")
    res = await call(ctx, "edit", path="cr.txt", old_string="b", new_string="c")
    assert not res.is_error, res.text
    assert (ws / "cr.txt").read_bytes() == b"a\rc\r"
    assert res.text.endswith("     1\ta\rc\r"), res.text
    res = await call(ctx, "edit", path="cr.txt", old_string="a\rc\r", new_string="a\rc\rd\r")
    assert not res.is_error, res.text
    assert (ws / "cr.txt").read_bytes() == b"a\rc\rd\r"
    seen = (await call(ctx, "read", path="cr.txt")).text.removeprefix("     1\t")
    res = await call(ctx, "write", path="cr.txt", content=seen)
    assert not res.is_error, res.text
    assert (ws / "cr.txt").read_bytes() == b"a\rc\rd\r"
