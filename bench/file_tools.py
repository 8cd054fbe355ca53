#!/usr/bin/env python3
"""What the file tools' access rules (issue 11 §1 a, c, d, f) cost per call.

    .venv/bin/python bench/file_tools.py [--rounds 3000]
    .venv/bin/python bench/file_tools.py --grep-tree 20000 [--runs 7]

Measures, in-process and without a model: a plain ``open``+``read`` against the tools' path
(``FileAccess.check`` with a real ``CredentialStores`` + ``safe_fs.open_regular``: one resolution,
``openat2``, ``fstat``), and the write side's extra work (resolution, anchor, directory fd beneath
the root, no-follow re-read) — the best of ``--rounds`` runs each, in microseconds, so the figure is
the intrinsic cost and not the machine's load. Then whole tool calls (``read``, ``write``,
``edit``, one-file ``grep``) through ``Tool.run``, best and median. ``--grep-tree N``: a folder-wide
``grep`` of a generated repository of N files (some named like secrets) against plain ``rg`` over the
same folder in the same run — the server's way (secrets said to ``rg`` as rules) and the files listed
and judged one by one (``ctx.secret_rules = None``). A benchmark measures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_server.policy.paths import CredentialStores, SecretMatcher  # noqa: E402
from agent_server.tools._rg import RG_COMMON, find_rg  # noqa: E402
from agent_server.tools import DiskFiles, ReadLedger, ToolContext, safe_fs  # noqa: E402
from agent_server.tools.access import FileAccess, SecretRules  # noqa: E402
from agent_server.tools.base import validate_args  # noqa: E402
from agent_server.tools.read import ReadTool  # noqa: E402
from agent_server.tools.search import GrepTool  # noqa: E402
from agent_server.tools.write_edit import EditTool, WriteTool  # noqa: E402


def best_us(work, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return round(best * 1e6, 1)


async def tool_calls(ctx: ToolContext, rounds: int) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    read = ReadTool()
    for name in ("read", "write", "edit", "grep"):
        times = []
        for i in range(rounds):
            await read.run(validate_args(read, '{"path": "a.txt"}'), ctx)
            tool, args = {
                "read": (read, {"path": "a.txt"}),
                "write": (WriteTool(), {"path": "a.txt", "content": f"line {i}\n" * 200}),
                "edit": (EditTool(), {"path": "a.txt", "old_string": (ctx.cwd / "a.txt").read_text().split("\n")[0],
                                      "new_string": f"edited {i}", "replace_all": True}),
                "grep": (GrepTool(), {"pattern": "line", "path": "a.txt"}),
            }[name]
            parsed = validate_args(tool, json.dumps(args))
            start = time.perf_counter()
            result = await tool.run(parsed, ctx)
            times.append(time.perf_counter() - start)
            assert not result.is_error, result.text
        out[name] = (round(min(times) * 1e6), round(statistics.median(times) * 1e6))
    return out


def big_edit(runs: int = 3) -> dict[str, float]:
    """A one-line edit of a 30 MB text (2.5 M lines): the proposal's hunks (``text_edits``) and the tool
    card's diff (``diff_content``) against a floor of one pass over both texts (counting their line
    ends). Moved here from tests/e2e/test_big_file_edits.py and tests/tools/test_diff_view.py,
    where wall-clock bounds failed under load."""
    from agent_server.server.edits import text_edits
    from agent_server.tools.diff_view import diff_content

    old = "".join(f"LINE {i}\n" for i in range(1, 2_500_001))
    new = old.replace("LINE 250000\n", "CHANGED 250000\n")

    def best(work) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        return min(times)
    floor = best(lambda: old.count("\n") + new.count("\n"))
    hunks = best(lambda: text_edits(old, new))
    diff = best(lambda: diff_content("big.txt", old, new))
    return {"floor: one pass over both 31 MB texts (ms)": round(floor * 1e3, 2),
            "text_edits (ms)": round(hunks * 1e3, 1), "text_edits / floor": round(hunks / floor, 1),
            "diff_content (ms)": round(diff * 1e3, 1), "diff_content / floor": round(diff / floor, 1)}


def grep_tree(files: int, runs: int) -> dict[str, object]:
    """A folder-wide ``grep`` of a generated repository of ``files`` files against plain ``rg``."""
    import subprocess

    root = Path(tempfile.mkdtemp(prefix="bench-grep-tree-"))
    per = 100
    for n in range(files):
        folder = root / f"pkg{n // per:03}" / ("sub" if n % 3 else "")
        folder.mkdir(parents=True, exist_ok=True)
        body = "".join(f"def f{n}_{i}(x):\n    return x + {i}  # line of module {n}\n" for i in range(20))
        name = ".env" if n % 500 == 1 else f"cert{n}.pem" if n % 500 == 2 else f"mod{n}.py"
        if n % 97 == 0 or not name.endswith(".py"):  # the secrets match too: plain rg counts them, grep not
            body += "def main():\n    pass\n"
        (folder / name).write_text(body)
    (root / ".gitignore").write_text("build/\n*.log\n")
    home = os.path.expanduser("~")
    stores = CredentialStores(config=[home + "/.config/agent-server"], state_dir=home + "/.local/state/agent-server",
                              session_dir=home + "/.local/state/agent-server/sessions/s", roots=[root])
    access = FileAccess([root], protected=stores.match, protected_paths=stores.paths())
    secrets = SecretMatcher()
    ctx = ToolContext((root,), DiskFiles(access=access), ReadLedger(), access=access,
                      is_secret=lambda p: secrets.match(p, os.path.realpath(p)) is not None,
                      is_secret_resolved=lambda p: secrets.match(p) is not None,
                      secret_rules=SecretRules(secrets.name_patterns, secrets.path_patterns, secrets.exact_paths))
    listed = ToolContext((root,), DiskFiles(access=access), ReadLedger(), access=access, is_secret=ctx.is_secret,
                         is_secret_resolved=ctx.is_secret_resolved)
    grep = GrepTool("rg")
    args = validate_args(grep, '{"pattern": "def main"}')
    rg = find_rg()
    import resource

    times: dict[str, list[float]] = {"plain rg": [], "grep (rules)": [], "grep (listed)": []}
    cpu: dict[str, list[float]] = {key: [] for key in times}
    counts = {}

    def cpu_now() -> float:  # this process and its finished children (the rg runs), user + system
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    for _ in range(runs):  # interleaved: the machine's load falls on all three alike
        start, used = time.perf_counter(), cpu_now()
        out = subprocess.run([rg, *RG_COMMON, "--json", "--sort=path", "-e", "def main"], cwd=root,
                             stdout=subprocess.PIPE, check=False).stdout
        times["plain rg"].append(time.perf_counter() - start)
        cpu["plain rg"].append(cpu_now() - used)
        counts["plain rg"] = out.count(b'"type":"match"')
        for key, context in (("grep (rules)", ctx), ("grep (listed)", listed)):
            start, used = time.perf_counter(), cpu_now()
            result = asyncio.run(grep.run(args, context))
            times[key].append(time.perf_counter() - start)
            cpu[key].append(cpu_now() - used)
            counts[key] = result.meta.get("count")
    figures: dict[str, object] = {"files": files, "runs": runs, "matches": counts}
    for key, values in times.items():
        figures[f"{key} best/median (ms)"] = (round(min(values) * 1e3, 1), round(statistics.median(values) * 1e3, 1))
    for key, values in cpu.items():
        figures[f"{key} CPU median (ms)"] = round(statistics.median(values) * 1e3, 1)
    for key in ("grep (rules)", "grep (listed)"):
        figures[f"{key} / plain rg, CPU median"] = round(statistics.median(cpu[key]) / statistics.median(cpu["plain rg"]), 2)
        figures[f"{key} / plain rg, best/median"] = (round(min(times[key]) / min(times["plain rg"]), 2),
                                                     round(statistics.median(times[key]) /
                                                           statistics.median(times["plain rg"]), 2))
    shutil.rmtree(root, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--big", action="store_true", help="only the 30 MB one-line edit's hunks against its floor")
    parser.add_argument("--grep-tree", type=int, metavar="N", help="only a folder-wide grep of N files against plain rg")
    parser.add_argument("--runs", type=int, default=7)
    opts = parser.parse_args()
    if opts.grep_tree:
        print(json.dumps(grep_tree(opts.grep_tree, opts.runs), indent=2))
        return
    if opts.big:
        print(json.dumps(big_edit(), indent=2))
        return
    root = Path(tempfile.mkdtemp(prefix="bench-file-tools-"))
    target = root / "a.txt"
    target.write_text("line\n" * 200)
    home = os.path.expanduser("~")
    stores = CredentialStores(config=[home + "/.config/agent-server"], state_dir=home + "/.local/state/agent-server",
                              session_dir=home + "/.local/state/agent-server/sessions/s", roots=[root])
    access = FileAccess([root], protected=stores.match, write_outside=lambda: False)

    def plain_read() -> None:
        with open(target, "rb") as fh:
            fh.read()

    def checked_read() -> None:
        fd = safe_fs.open_regular(access.check(target))
        os.read(fd, 1 << 20)
        os.close(fd)

    def write_side() -> None:
        resolved = access.check(target)
        anchor = access.write_anchor(resolved)
        dirfd = safe_fs.open_dir_beneath(anchor, [], create=True)
        try:
            safe_fs.read_entry(dirfd, "a.txt", 1 << 20)
        finally:
            os.close(dirfd)

    figures = {
        "openat2": safe_fs.has_openat2(),
        "plain open+read (us)": best_us(plain_read, opts.rounds),
        "checked open+read (us)": best_us(checked_read, opts.rounds),
        "write-side checks + no-follow re-read (us)": best_us(write_side, opts.rounds),
    }
    ctx = ToolContext((root,), DiskFiles(access=access), ReadLedger(), access=access)
    figures["tool calls (best, median us)"] = asyncio.run(tool_calls(ctx, max(20, opts.rounds // 30)))
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
