"""The ``read`` tool: numbered lines, paging, long lines, bounds, binary, folders, the ledger."""

from __future__ import annotations

import re
import subprocess

from tooltest_helpers import BOM_PY, CRLF, FIXTURES, KATEX, NO_NL, body_lines, call

from agent_server.tools.read import MAX_OUTPUT_BYTES
from agent_server.tools.text import decode_text


async def test_lines_are_numbered_cat_n_style(ws, ctx):
    (ws / "a.py").write_text("first\n\tsecond\n")
    res = await call(ctx, "read", path="a.py")
    assert not res.is_error
    assert res.text == "     1\tfirst\n     2\t\tsecond"
    assert res.locations == [{"path": str(ws / "a.py"), "line": 1}]


async def test_each_fixture_is_shown_as_its_lines(ctx, ws):
    for name in (CRLF, NO_NL, BOM_PY):
        res = await call(ctx, "read", path=name)
        assert not res.is_error, res.text
        view = decode_text((FIXTURES / name).read_bytes())
        assert body_lines(res.text) == view.lines()
        assert "\r" not in res.text and "\ufeff" not in res.text
        assert ctx.reads.last(ws / name).raw == (FIXTURES / name).read_bytes()


async def test_offset_and_limit_page_with_the_exact_next_offset(ws, ctx):
    (ws / "n.txt").write_text("".join(f"line {i}\n" for i in range(1, 101)))
    res = await call(ctx, "read", path="n.txt", offset=10, limit=5)
    assert body_lines(res.text) == [f"line {i}" for i in range(10, 15)]
    assert res.text.splitlines()[0].startswith("    10\t")
    assert "Showed lines 10-14 of 100. Continue with offset=15." in res.text
    assert res.locations[0]["line"] == 10
    res = await call(ctx, "read", path="n.txt", offset=98)
    assert body_lines(res.text) == ["line 98", "line 99", "line 100"]
    assert "End of file: 100 lines" in res.text and "Continue" not in res.text


async def test_offset_past_the_end_is_an_error_with_the_line_count(ws, ctx):
    (ws / "n.txt").write_text("a\nb\n")
    res = await call(ctx, "read", path="n.txt", offset=3)
    assert res.is_error and "2 lines" in res.text


async def test_output_is_bounded_at_50_kb_and_says_where_to_continue(ws, ctx):
    (ws / "big.txt").write_text("".join(f"{i:05d} " + "x" * 200 + "\n" for i in range(1, 3001)))
    res = await call(ctx, "read", path="big.txt")
    assert len(res.text.encode()) <= MAX_OUTPUT_BYTES
    shown = body_lines(res.text)
    assert 200 < len(shown) < 3000
    nxt = int(re.search(r"Continue with offset=(\d+)\.", res.text).group(1))
    assert nxt == len(shown) + 1 and "50 KB" in res.text
    more = await call(ctx, "read", path="big.txt", offset=nxt, limit=1)
    assert body_lines(more.text) == [f"{nxt:05d} " + "x" * 200]


async def test_minified_276kb_line_is_bounded_not_empty_and_says_how_to_read_on(ws, ctx):
    raw = (FIXTURES / KATEX).read_bytes()
    res = await call(ctx, "read", path=KATEX)
    assert not res.is_error
    assert 2000 < len(res.text.encode()) <= MAX_OUTPUT_BYTES
    [line] = body_lines(res.text)
    assert line.startswith(raw[:2000].decode()) and "line cut: 274,701 more characters" in line
    assert "276,701 characters long" in res.text and "grep" in res.text
    command = re.search(r"`(cut -b 2001-8000 \S+)`", res.text).group(1)
    # the suggested command really shows the next slice, starting right after the shown part
    out = subprocess.run(["bash", "-c", command], cwd=ws, capture_output=True, check=True).stdout
    assert out.rstrip(b"\n") == raw[2000:8000]


async def test_long_line_in_a_multi_line_file_points_at_that_line(ws, ctx):
    long = "é" * 2500  # 2 bytes a character: the byte offset is not the character offset
    (ws / "m.txt").write_text(f"short\n{long}\nend\n")
    res = await call(ctx, "read", path="m.txt")
    assert body_lines(res.text)[0] == "short" and body_lines(res.text)[2] == "end"
    command = re.search(r"`(sed -n '2p' \S+ \| cut -b (\d+)-\d+)`", res.text)
    assert command.group(2) == "4001"
    out = subprocess.run(["bash", "-c", command.group(1)], cwd=ws, capture_output=True, check=True).stdout
    assert out.decode().rstrip("\n") == "é" * 500


async def test_two_megabyte_single_line_is_bounded(ws, ctx):
    (ws / "huge.js").write_bytes(b"a" * (2 * 1024 * 1024))
    res = await call(ctx, "read", path="huge.js")
    assert not res.is_error
    assert 2000 < len(res.text.encode()) <= 3000
    assert "2,097,152 characters long" in res.text


async def test_binary_is_refused_and_not_recorded(ws, ctx):
    (ws / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    res = await call(ctx, "read", path="img.png")
    assert res.is_error and "binary" in res.text
    assert ctx.reads.last(ws / "img.png") is None


async def test_a_directory_is_an_error_listing_its_entries(ws, ctx):
    (ws / "pkg").mkdir()
    (ws / "pkg" / "mod.py").write_text("")
    (ws / "pkg" / "sub").mkdir()
    res = await call(ctx, "read", path="pkg")
    assert res.is_error and "is a directory" in res.text and "mod.py" in res.text and "sub/" in res.text


async def test_missing_file_suggests_close_names(ws, ctx):
    (ws / "config.toml").write_text("")
    res = await call(ctx, "read", path=str(ws / "confg.toml"))
    assert res.is_error and "not found" in res.text and str(ws / "config.toml") in res.text


async def test_empty_file_says_so(ws, ctx):
    (ws / "e.txt").write_bytes(b"")
    res = await call(ctx, "read", path="e.txt")
    assert not res.is_error and "empty file" in res.text
    assert ctx.reads.last(ws / "e.txt") is not None


async def test_read_title_and_locations(ws, ctx):
    from agent_server.tools.read import ReadArgs, ReadTool

    tool = ReadTool()
    assert tool.title(ReadArgs(path="src/app.py", offset=10, limit=31), ctx) == "Read src/app.py:10-40"
    assert tool.title(ReadArgs(path=str(ws / "src/app.py")), ctx) == "Read src/app.py"
    assert tool.title(ReadArgs(path="/etc/hosts"), ctx) == "Read /etc/hosts"
    assert tool.title(ReadArgs(path="a.py", offset=7), ctx) == "Read a.py from line 7"
    assert tool.locations(ReadArgs(path="a.py", offset=7), ctx) == [{"path": str(ws / "a.py"), "line": 7}]


async def test_read_dropped_a_lone_cr_at_the_very_end_of_the_file(ws, ctx):
    """``a\\rb\\r`` was shown as ``a\\rb``: the last ``\\r`` was taken for the CR of a CRLF, though no
    ``\\n`` follows it — the model saw a file that is not on disk (and an edit or write made from
    that view puts its text where the model did not mean it). It is shown like any lone CR."""
    (ws / "cr.txt").write_bytes(b"a\rb\r")
    assert (await call(ctx, "read", path="cr.txt")).text == "     1\ta\rb\r"
    (ws / "mixed.txt").write_bytes(b"one\r\ntwo\r")
    assert (await call(ctx, "read", path="mixed.txt")).text == "     1\tone\n     2\ttwo\r"
    (ws / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    assert (await call(ctx, "read", path="crlf.txt")).text == "     1\tone\n     2\ttwo"
