"""Issue 32 §3: one ``glob`` (``*a*a*…*b`` against a 100-character name) or one ``grep`` regex
(``(a+)+$``) held Python's backtracking ``re`` — and with it the GIL and every session — for
minutes. The glob matcher is an NFA whose work per path is bounded by the pattern's states times
the path's length (counted in ``steps``, no clock); the Python grep/glob fallback runs as a child
process, cut at the tool's deadline while the event loop keeps serving."""

from __future__ import annotations

import asyncio
import itertools
import os
import sys

import pytest

from agent_server.tools import ToolContext, ToolResult, validate_args
from agent_server.tools._globmatch import GlobMatcher, compile_glob
from agent_server.tools.search import GlobTool, GrepTool


def bounded(matcher: GlobMatcher, path: str) -> bool:
    """Match once on a fresh matcher and check its work: per character, each NFA state at most
    tested once and visited once in the closure."""
    before = matcher.steps
    result = matcher(path)
    work = matcher.steps - before
    assert 0 < work <= 2 * matcher.states * len(path), (work, matcher.states, len(path))
    return result


def test_thirty_stars_in_one_segment_froze_every_session_now_linear():
    pattern = "*a" * 30 + "b"
    assert bounded(GlobMatcher(pattern), "a" * 100) is False
    assert bounded(GlobMatcher(pattern), "a" * 100 + "b") is True
    assert bounded(GlobMatcher("*a*a*a*a*a*a*a*a*a*a*a*a*b"), "x/" + "a" * 100) is False  # the pattern


def test_twelve_double_star_folders_on_a_40_deep_path_now_linear():
    pattern = "**/a/" * 12 + "b"
    deep = "/".join(["a"] * 40)
    assert bounded(GlobMatcher(pattern), deep + "/c") is False
    assert bounded(GlobMatcher(pattern), deep + "/b") is True
    assert bounded(GlobMatcher(pattern), "/".join(["a"] * 11) + "/b") is False  # twelve folders needed


def test_ten_nested_brace_groups_now_linear():
    nested = "x"
    for depth in range(10):
        nested = "{" + f"*{depth}*," + nested + "}"
    pattern = nested + "{*a,*b}" * 10 + "c"
    matcher = GlobMatcher(pattern)
    assert matcher.states < 40 * len(pattern)  # linear in the pattern: braces are forks, not copies
    assert bounded(matcher, "a" * 200) is False
    assert bounded(GlobMatcher(pattern), "x" + "ab" * 10 + "c") is True
    assert bounded(GlobMatcher(pattern), "9" + "a" * 10 + "c") is True


def expansions(pattern: str) -> list[str]:
    """Every brace-free pattern a (small) brace pattern stands for — the reference the NFA's
    alternation must agree with."""
    depth, start = 0, -1
    for i, c in enumerate(pattern):
        if c == "{":
            depth += 1
            if depth == 1:
                start = i
        elif c == "}" and depth:
            depth -= 1
            if depth == 0:
                body, parts, level, cur = pattern[start + 1:i], [], 0, ""
                for ch in body:
                    if ch == "," and level == 0:
                        parts.append(cur)
                        cur = ""
                        continue
                    level += ch == "{"
                    level -= ch == "}"
                    cur += ch
                parts.append(cur)
                return [e for part in parts for e in expansions(pattern[:start] + part + pattern[i + 1:])]
    return [pattern]


@pytest.mark.parametrize("pattern", ["src/{a,b{c,d/e}}/*.py", "{*.{js,ts},lib/**/x}", "{a,{b,{c,{d,e}}}}f",
                                     "[!a]{x,?}{,y}", "**/{test_,}*.{py,pyi}"])
def test_brace_alternatives_mean_their_expansions(pattern):
    alphabet = ["src", "a", "bc", "bd", "e", "x.py", "y.js", "z.ts", "lib", "x", "test_q.pyi", "bf", "ef", "f"]
    anchor = "/" if "/" in pattern else ""  # the whole pattern decides whether it is anchored
    references = [compile_glob(anchor + e) for e in expansions(pattern)]
    matcher = compile_glob(pattern)
    for depth in (1, 2, 3):
        for parts in itertools.product(alphabet, repeat=depth):
            path = "/".join(parts)
            assert matcher(path) is any(r(path) for r in references), (pattern, path)


def test_a_slash_is_never_matched_by_a_class_or_a_question_mark():
    assert compile_glob("a[!x]b")("a/b") is False
    assert compile_glob("a?b")("a/b") is False
    assert compile_glob("a[!x]b")("a-b") is True


async def run(tool, ctx, **arguments):
    import json

    args = validate_args(tool, json.dumps(arguments))
    assert not isinstance(args, ToolResult), args.text
    return await tool.run(args, ctx)


def fallback_children() -> list[int]:
    """Our live children running the Python fallback (``_walk.py``)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == os.getpid() and b"_walk.py" in cmdline:
            found.append(int(entry))
    return found


async def ticking_while(work) -> tuple[int, object]:
    """Run ``work`` while counting the event loop's turns: a frozen loop counts none."""
    ticks = 0
    done = asyncio.Event()

    async def tick() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    try:
        outcome = await work
    except BaseException as exc:  # noqa: BLE001 - the outcome is what the test looks at
        outcome = exc
    done.set()
    await ticker
    return ticks, outcome


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
async def test_grep_regex_a_plus_plus_dollar_froze_the_server_now_a_child_cut_by_the_deadline(tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    (root / "victim.txt").write_text("a" * 40 + "b\n")
    ctx = ToolContext.on_disk(root)
    deadline = 2.0  # stands for the tool's deadline (the pipeline cancels the call at it)
    ticks, outcome = await ticking_while(asyncio.wait_for(run(GrepTool("python"), ctx, pattern="(a+)+$"), deadline))
    assert isinstance(outcome, asyncio.TimeoutError)  # cut, not finished: 2**40 backtracking steps
    assert ticks >= 20  # the loop kept serving meanwhile (other sessions, cancel, SIGTERM)
    assert fallback_children() == []  # the child was killed and reaped


async def test_the_python_fallback_still_finds_lines_and_reports_a_bad_regex(tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    (root / "one.txt").write_text("x\né needle\n")
    ctx = ToolContext.on_disk(root)
    assert (await run(GrepTool("python"), ctx, pattern="needle")).text == "one.txt:2: é needle"
    assert (await run(GrepTool("python"), ctx, pattern="NEEDLE", ignore_case=True, path="one.txt")).text == \
        "one.txt:2: é needle"
    bad = await run(GrepTool("python"), ctx, pattern="(a")
    assert bad.is_error and "missing ), unterminated subpattern" in bad.text
    assert (await run(GlobTool("python"), ctx, pattern="*.txt")).text == "one.txt"
