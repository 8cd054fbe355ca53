#!/usr/bin/env python3
"""Shell-tool overhead benchmark: a confined ``cat`` of a small file through the ``bash`` tool,
call to result, against a bare ``bash -c`` of the same command.

Role: show what the OS sandbox costs per shell call (issue 11: PID/mount/network namespaces,
masks, seccomp, Landlock, the setuid sweep; issue 14 wants ≤ 15 ms over bare bash). Three
figures, each the median/p10/p90 of ``--runs`` runs after ``--warmup`` unmeasured ones:

* ``bare``: ``asyncio.create_subprocess_exec("bash", "-c", "cat small.txt")`` to its exit;
* ``tool-unconfined``: ``BashTool().run`` with no launcher (the tool's own cost);
* ``tool-confined``: ``BashTool().run`` with the session's ``ShellConfiner`` in workspace-write
  (the probe runs once, before the measured runs; the warm-up starts the shell launcher).

Each variant also reports ``cpu``: CPU milliseconds per run of this process, its reaped children
and the shell launcher with the children it reaped (robust on a loaded machine, unlike wall time).

    .venv/bin/python bench/shell_overhead.py [--runs 30] [--warmup 3] [--json] [--files N]

``--files N`` puts N extra files in the scratch workspace (the secret scan and setuid sweep walk
it). This is a benchmark, not a test: it has no pass/fail threshold.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_server.config.load import PolicySettings  # noqa: E402
from agent_server.policy.modes import ModeState  # noqa: E402
from agent_server.policy.sandbox.confiner import ShellConfiner, probe_status  # noqa: E402
from agent_server.session import EventLog  # noqa: E402
from agent_server.tools import ToolContext  # noqa: E402
from agent_server.tools.bash import BashArgs, BashTool  # noqa: E402

COMMAND = "cat small.txt"


def _cpu_ms() -> float:
    """CPU ms so far of this process, its reaped children, and the shell launcher (with its own)."""
    import resource

    from agent_server.policy.sandbox.shell_spawn import launcher_pid

    total = sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN))) * 1000
    pid = launcher_pid()
    if pid is not None:
        text = Path(f"/proc/{pid}/stat").read_text()
        ticks = sum(int(x) for x in text[text.rfind(")") + 2:].split()[11:15])
        total += ticks * 1000 / os.sysconf("SC_CLK_TCK")
    return total


async def _bare(ws: Path) -> None:
    proc = await asyncio.create_subprocess_exec("bash", "-c", COMMAND, cwd=ws, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
    await proc.communicate()


async def measure(runs: int, warmup: int, files: int) -> dict:
    """Median/p10/p90 milliseconds of each variant (see the module docstring)."""
    base = Path(tempfile.mkdtemp(prefix="agent-server-bench-"))
    ws, tmp = base / "ws", base / "session" / "tmp"
    for folder in (ws, tmp):
        folder.mkdir(parents=True)
    (ws / "small.txt").write_text("hello\n")
    for i in range(files):
        sub = ws / f"d{i // 100}"
        sub.mkdir(exist_ok=True)
        (sub / f"f{i}.txt").write_text("x")
    log = EventLog.create(base / "session" / "events.jsonl", {"cwd": str(ws)})
    settings = PolicySettings()
    status = await probe_status(settings)
    env = {"PATH": os.environ["PATH"], "HOME": str(base), "LANG": "C.UTF-8"}
    on_disk = ToolContext.on_disk(ws)
    plain = ToolContext(on_disk.roots, on_disk.files, on_disk.reads, env=env)
    confined = ToolContext(on_disk.roots, on_disk.files, on_disk.reads, env=env,
                           shell_launcher=ShellConfiner(ModeState(log, "workspace-write"), status, [ws], tmp, settings))
    tool = BashTool()
    variants = {
        "bare": lambda: _bare(ws),
        "tool-unconfined": lambda: tool.run(BashArgs(command=COMMAND), plain),
        "tool-confined": lambda: tool.run(BashArgs(command=COMMAND), confined),
    }
    out: dict = {"sandbox": status.as_data()["level"], "files": files, "runs": runs}
    for name, make in variants.items():
        times = []
        for i in range(warmup + runs):
            if i == warmup:
                cpu = _cpu_ms()
            started = time.perf_counter()
            result = await make()
            elapsed = (time.perf_counter() - started) * 1000
            if result is not None and "hello" not in result.text:
                raise SystemExit(f"{name}: unexpected result {result.text!r}")
            if i >= warmup:
                times.append(elapsed)
        cpu = (_cpu_ms() - cpu) / runs
        times.sort()
        out[name] = {"median": round(statistics.median(times), 1), "p10": round(times[len(times) // 10], 1),
                     "p90": round(times[(len(times) * 9) // 10], 1), "cpu": round(cpu, 1)}
    out["confined_over_bare_ms"] = round(out["tool-confined"]["median"] - out["bare"]["median"], 1)
    out["confined_over_bare_cpu_ms"] = round(out["tool-confined"]["cpu"] - out["bare"]["cpu"], 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--files", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.runs, args.warmup, args.files))
    if args.json:
        print(json.dumps(result))
        return
    print(f"sandbox: {result['sandbox']}, workspace files: {result['files']}, runs: {result['runs']}")
    for name in ("bare", "tool-unconfined", "tool-confined"):
        r = result[name]
        print(f"{name:16} median {r['median']:7.1f} ms   p10 {r['p10']:7.1f}   p90 {r['p90']:7.1f}   "
              f"CPU {r['cpu']:5.1f} ms/run")
    print(f"confined over bare: {result['confined_over_bare_ms']:+.1f} ms (median), "
          f"{result['confined_over_bare_cpu_ms']:+.1f} ms CPU per run")


if __name__ == "__main__":
    main()
