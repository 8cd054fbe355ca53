#!/usr/bin/env python3
"""Shell-tool overhead benchmark: a confined ``cat`` of a small file through the ``bash`` tool,
call to result, against a bare ``bash -c`` of the same command.

Role: show what the OS sandbox costs per shell call (issue 11: PID/mount/network namespaces,
masks, seccomp, Landlock, the setuid sweep; issue 14 wants ≤ 15 ms over bare bash). Five
figures, each the median/p10/p90 of ``--runs`` runs after ``--warmup`` unmeasured ones (the
variants alternate run by run), with its ratio to ``bare`` of the same run:

* ``bare``: ``asyncio.create_subprocess_exec("bash", "-c", "cat small.txt")`` to its exit;
* ``tool-unreaped``: ``BashTool().run`` with no launcher and no reaper (the tool's own cost: the
  command is a plain ``asyncio`` child);
* ``tool-unconfined``: ``BashTool().run`` with no launcher (on Linux the command runs under
  ``tools/mcp/reaper.py``, a Python start per call: what an unconfined session call cost before
  the launcher forked those too);
* ``tool-full-access``: ``BashTool().run`` with the session's ``ShellConfiner`` in
  danger-full-access (unconfined, as a session runs it: issue 32 §11's whole-tree reaping);
* ``tool-confined``: ``BashTool().run`` with the session's ``ShellConfiner`` in workspace-write
  (the probe runs once, before the measured runs; the warm-up starts the shell launcher).

Each variant also reports ``cpu``: CPU milliseconds per run of this process, its reaped children
and the shell launcher with the children it reaped (robust on a loaded machine, unlike wall time).

    .venv/bin/python bench/shell_overhead.py [--runs 30] [--warmup 3] [--json] [--files N] [--command true]

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


async def _launcher_idle() -> None:
    """Wait (≤ 1 s) until the shell launcher has reaped every child it forked."""
    from agent_server.policy.sandbox.shell_spawn import launcher_pid

    pid = launcher_pid()
    for _ in range(1000):
        try:
            if not Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
                return
        except (OSError, TypeError):
            return
        await asyncio.sleep(0.001)


async def _bare(ws: Path, command: str) -> None:
    proc = await asyncio.create_subprocess_exec("bash", "-c", command, cwd=ws, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT, stdin=asyncio.subprocess.DEVNULL)
    await proc.communicate()


async def measure(runs: int, warmup: int, files: int, command: str = COMMAND) -> dict:
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
    full = ToolContext(on_disk.roots, on_disk.files, on_disk.reads, env=env,
                       shell_launcher=ShellConfiner(ModeState(log, "danger-full-access"), status, [ws], tmp, settings))
    confined = ToolContext(on_disk.roots, on_disk.files, on_disk.reads, env=env,
                           shell_launcher=ShellConfiner(ModeState(log, "workspace-write"), status, [ws], tmp, settings))
    tool = BashTool()
    async def unreaped():
        from agent_server.tools import bash

        bash.reaped, saved = (lambda argv: argv), bash.reaped
        try:
            return await tool.run(BashArgs(command=command), plain)
        finally:
            bash.reaped = saved

    variants = {
        "bare": lambda: _bare(ws, command),
        "tool-unreaped": unreaped,
        "tool-unconfined": lambda: tool.run(BashArgs(command=command), plain),
        "tool-full-access": lambda: tool.run(BashArgs(command=command), full),
        "tool-confined": lambda: tool.run(BashArgs(command=command), confined),
    }
    out: dict = {"sandbox": status.as_data()["level"], "files": files, "runs": runs, "command": command}
    times: dict[str, list[float]] = {name: [] for name in variants}
    cpu = dict.fromkeys(variants, 0.0)
    for i in range(warmup + runs):  # the variants alternate: a change of load hits each alike
        for name, make in variants.items():
            before = _cpu_ms()
            started = time.perf_counter()
            result = await make()
            elapsed = (time.perf_counter() - started) * 1000
            await _launcher_idle()  # its child reports before it exits: count its CPU in this run
            spent = _cpu_ms() - before
            if result is not None and (result.is_error or (command == COMMAND and "hello" not in result.text)):
                raise SystemExit(f"{name}: unexpected result {result.text!r}")
            if i >= warmup:
                times[name].append(elapsed)
                cpu[name] += spent
    for name in variants:
        ordered = sorted(times[name])
        out[name] = {"median": round(statistics.median(ordered), 1), "p10": round(ordered[len(ordered) // 10], 1),
                     "p90": round(ordered[(len(ordered) * 9) // 10], 1), "cpu": round(cpu[name] / runs, 1)}
    for name in variants:
        out[name]["ratio"] = round(out[name]["median"] / out["bare"]["median"], 2)
    out["confined_over_bare_ms"] = round(out["tool-confined"]["median"] - out["bare"]["median"], 1)
    out["confined_over_bare_cpu_ms"] = round(out["tool-confined"]["cpu"] - out["bare"]["cpu"], 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--files", type=int, default=0)
    parser.add_argument("--command", default=COMMAND, help=f"the shell command (default: {COMMAND})")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.runs, args.warmup, args.files, args.command))
    if args.json:
        print(json.dumps(result))
        return
    print(f"sandbox: {result['sandbox']}, workspace files: {result['files']}, runs: {result['runs']}, "
          f"command: {result['command']}")
    for name in ("bare", "tool-unreaped", "tool-unconfined", "tool-full-access", "tool-confined"):
        r = result[name]
        print(f"{name:16} median {r['median']:7.1f} ms   p10 {r['p10']:7.1f}   p90 {r['p90']:7.1f}   "
              f"CPU {r['cpu']:5.1f} ms/run   {r['ratio']:5.2f} x bare")
    print(f"confined over bare: {result['confined_over_bare_ms']:+.1f} ms (median), "
          f"{result['confined_over_bare_cpu_ms']:+.1f} ms CPU per run")


if __name__ == "__main__":
    main()
