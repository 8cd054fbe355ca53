#!/usr/bin/env python3
"""What recording a confined command's writes costs: no record, the record alone
(``sandbox_notify.supervise``), and the record with its watch of other writers (``Watch``).

Role: figures for bench/README.md. Each variant runs the same ``bash`` command in a child
``python`` that loads the notifying filter as the sandbox's PID 1 does (no namespaces: only the
record's own cost), alternating variants run by run; reports wall-time and CPU medians (the
child's and its children's CPU seconds, robust on a loaded machine).

    .venv/bin/python bench/shell_record.py [--runs 7] [--json]

Must never: pass or fail; it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDER = ROOT / "agent_server" / "policy" / "sandbox"

SCRIPT = r"""
import ctypes, os, sys, _thread
sys.path.insert(0, sys.argv[1])
import sandbox_notify as n
variant = sys.argv[5]
record = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
assert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0
watch = n.Watch() if variant == "watch" else None
if variant != "none":
    listener = n.listen()
    os.write(record, n.LISTENING)
    _thread.start_new_thread(n.supervise, (listener, record, watch))
child = os.fork()
if child == 0:
    os.chdir(sys.argv[3])
    os.execvp("bash", ["bash", "-c", sys.argv[4]])
_, status = os.waitpid(child, 0)
if watch is not None:
    os.write(record, watch.finish())
os._exit(os.waitstatus_to_exitcode(status))
"""

COMMANDS = {
    "2000 new files": "for i in $(seq 2000); do echo $i > f$i.txt; done",
    "2000 appends to one file": "for i in $(seq 2000); do echo $i >> one.txt; done",
    "sed -i on 200 files": "for i in $(seq 200); do sed -i s/1/one/ f$i.txt; done",
}
VARIANTS = ("none", "record", "watch")


def one(variant: str, command: str, work: Path, record: Path) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, "-I", "-S", "-B", "-c", SCRIPT, str(FOLDER), str(record), str(work),
                    command, variant], check=True, timeout=600)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall * 1000, cpu * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    out: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, command in COMMANDS.items():
            samples: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
            for _ in range(args.runs):
                for variant in VARIANTS:
                    work = Path(tmp) / "work"
                    shutil.rmtree(work, ignore_errors=True)
                    work.mkdir()
                    for i in range(1, 201):
                        (work / f"f{i}.txt").write_text(f"{i}\n")
                    samples[variant].append(one(variant, command, work, Path(tmp) / "record"))
            out[name] = {v: {"wall_ms": round(statistics.median(s[0] for s in samples[v]), 1),
                             "cpu_ms": round(statistics.median(s[1] for s in samples[v]), 1)}
                         for v in VARIANTS}
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"load": load, "figures": out}))
        return
    print(f"load average {load:.1f}, {args.runs} runs, medians")
    for name, figures in out.items():
        print(f"{name}: " + ", ".join(f"{v} {f['wall_ms']} ms wall / {f['cpu_ms']} ms CPU"
                                      for v, f in figures.items()))


if __name__ == "__main__":
    main()
