#!/usr/bin/env python3
"""What the editor-configuration watch costs a confined shell call on a big repository (issue 32 §4).

Role: after each confined command, editor configuration below the roots that a read-only mount
cannot hold (a sub-folder's ``.vscode/``, ``*.code-workspace`` …) is compared with what was there
before it (``editor_config.ConfigWatch``). This measures a confined ``true`` through
``BashTool.run`` on a workspace of ``--files`` files (default 20,000, 20 per folder, with a few
configuration files among them), with the watch and without it (the floor: the same call, the watch
replaced by one that does nothing, measured in the same run, alternating), and the watch's two looks
on their own, in process. Median/p10/p90 of ``--runs`` runs after ``--warmup`` unmeasured ones.

    .venv/bin/python bench/editor_config_watch.py [--runs 20] [--files 20000] [--json]

A benchmark, not a test: no pass/fail threshold.
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

from agent_server.config.load import PolicySettings  # noqa: E402
from agent_server.policy.modes import ModeState  # noqa: E402
from agent_server.policy.sandbox import confiner  # noqa: E402
from agent_server.session import EventLog  # noqa: E402
from agent_server.tools import ToolContext  # noqa: E402
from agent_server.tools.bash import BashArgs, BashTool  # noqa: E402


class _NoWatch:
    changes: list = []

    def __init__(self, *_args, **_kwargs) -> None:
        pass

    def snapshot(self) -> None:
        pass

    def restore(self) -> list:
        return []


def _tree(ws: Path, files: int) -> None:
    for i in range(files):
        sub = ws / f"pkg{i // 400}" / f"d{(i // 20) % 20}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"f{i}.py").write_text("x = 1\n")
    for i in range(0, files // 400 + 1, 5):  # a few sub-folder configurations to keep
        (ws / f"pkg{i}" / ".vscode").mkdir(parents=True, exist_ok=True)
        (ws / f"pkg{i}" / ".vscode" / "settings.json").write_text("{}\n")
    (ws / "team.code-workspace").write_text("{}\n")
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "settings.json").write_text("{}\n")


def _stats(times: list[float]) -> dict:
    times = sorted(times)
    return {"median": round(statistics.median(times), 2), "p10": round(times[len(times) // 10], 2),
            "p90": round(times[(len(times) * 9) // 10], 2)}


async def measure(runs: int, warmup: int, files: int) -> dict:
    base = Path(tempfile.mkdtemp(prefix="agent-server-bench-"))
    try:
        ws, tmp = base / "ws", base / "session" / "tmp"
        ws.mkdir()
        tmp.mkdir(parents=True)
        _tree(ws, files)
        log = EventLog.create(base / "session" / "events.jsonl", {"cwd": str(ws)})
        settings = PolicySettings()
        status = await confiner.probe_status(settings)
        env = {"PATH": os.environ["PATH"], "HOME": str(base), "LANG": "C.UTF-8"}
        disk = ToolContext.on_disk(ws)
        launcher = confiner.ShellConfiner(ModeState(log, "workspace-write"), status, [ws], tmp, settings)
        ctx = ToolContext(disk.roots, disk.files, disk.reads, env=env, shell_launcher=launcher)
        tool = BashTool()
        real = confiner.ConfigWatch
        timed: dict[str, list[float]] = {"watch": [], "floor": []}
        for i in range(warmup + runs):
            for name in ("watch", "floor") if i % 2 else ("floor", "watch"):
                confiner.ConfigWatch = real if name == "watch" else _NoWatch
                started = time.perf_counter()
                result = await tool.run(BashArgs(command="true"), ctx)
                elapsed = (time.perf_counter() - started) * 1000
                if result.meta.get("exit_code", 0) not in (0, None) or "error" in result.meta:
                    raise SystemExit(f"unexpected result {result.text!r}")
                if i >= warmup:
                    timed[name].append(elapsed)
        confiner.ConfigWatch = real
        looks = []
        watch = launcher.config_watch() if hasattr(launcher, "config_watch") else real([ws])
        for i in range(warmup + runs):
            started = time.perf_counter()
            watch.snapshot()
            watch.restore()
            if i >= warmup:
                looks.append((time.perf_counter() - started) * 1000)
        out = {"sandbox": status.level, "files": files, "runs": runs, "call_with_watch": _stats(timed["watch"]),
               "call_floor": _stats(timed["floor"]), "watch_in_process": _stats(looks)}
        out["ratio"] = round(out["call_with_watch"]["median"] / out["call_floor"]["median"], 2)
        out["over_floor_ms"] = round(out["call_with_watch"]["median"] - out["call_floor"]["median"], 1)
        return out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.runs, args.warmup, args.files))
    if args.json:
        print(json.dumps(result))
        return
    print(f"sandbox: {result['sandbox']}, workspace files: {result['files']}, runs: {result['runs']}")
    for name in ("call_floor", "call_with_watch", "watch_in_process"):
        r = result[name]
        print(f"{name:18} median {r['median']:8.2f} ms   p10 {r['p10']:8.2f}   p90 {r['p90']:8.2f}")
    print(f"with the watch / floor: {result['ratio']} × ({result['over_floor_ms']:+.1f} ms)")


if __name__ == "__main__":
    main()
