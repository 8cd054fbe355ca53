#!/usr/bin/env python3
"""Checkpoint overhead of one shell call on a big repository, against ``git status`` on that tree.

Role: issue 28's goal — a shell call's checkpoint (the snapshot before, the snapshot after and the
diff between them, as ``checkpoints.recorder`` runs them around ``bash``) on a 20,000-file git
repository with a 150 MB untracked data file stays within 3 × ``git status --porcelain -uall`` on
that tree, and the state folder after 10 calls (the session's first snapshot included) stays
≤ 40 MB. Figures (median, p10, p90 of ``--runs`` runs, the floor measured in the same run,
interleaved with the calls so both see the same machine):

* ``floor_ms``: ``git status --porcelain -uall`` in the workspace (the user's own repository);
* ``call_ms``: snapshot + snapshot + changes around a call that changes nothing (``echo hi``);
* ``chmod_ms``: the same around a call that only changes one file's mode (``chmod 600``, then back);
* ``floor_cpu_ms``, ``call_cpu_ms``, ``cpu_ratio``: the CPU time of each (this process's and git's),
  steadier than the wall time on a loaded machine;
* ``load``: the load average (1 min) before and after the runs;
* ``first_ms``: the session's first snapshot (its index seeded from the workspace's);
* ``state_mib``: the state folder after 10 calls, each changing one file.

    .venv/bin/python bench/checkpoint_overhead.py [--files 20000] [--big-mib 150] [--runs 7] [--json]
                                                  [--workspace DIR]

``--workspace`` measures an existing git repository instead of building one (e.g. the same tree
for two versions of the code, each run with its own state folder). This is a benchmark, not a test: it has no pass/fail threshold (``ratio`` says where it stands).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_server.checkpoints.blobs import BlobStore  # noqa: E402
from agent_server.checkpoints.recorder import DEFAULT_MAX_FILE_BYTES  # noqa: E402
from agent_server.checkpoints.shadow import ShadowRepo  # noqa: E402
from agent_server.policy.paths import DEFAULT_SECRET_PATTERNS, SecretMatcher  # noqa: E402


def _tree(root: Path, files: int, big_mib: int) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for i in range(files):
        folder = root / f"pkg{i % 200}" / f"sub{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"mod{i}.py").write_text(f"VALUE = {i}\n" * 8)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=env)
    subprocess.run(["git", "-C", str(root), "commit", "-qm", "tree"], check=True, env=env)
    chunk = os.urandom(1 << 20)
    with open(root / "data.bin", "wb") as fh:
        for _ in range(big_mib):
            fh.write(chunk)


def _ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def _cpu(fn, into: list[float]) -> float:
    """``fn``'s wall time in ms; its CPU time (this process's and its children's, in ms) appended to ``into``."""
    def used() -> float:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

    before = used()
    wall = _ms(fn)
    into.append((used() - before) * 1000)
    return wall


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 1), "p10": round(ordered[len(ordered) // 10], 1),
            "p90": round(ordered[min(len(ordered) - 1, (len(ordered) * 9) // 10)], 1)}


def _du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--big-mib", type=int, default=150)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--workspace", type=Path, help="an existing git repository, measured as it is")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-") as scratch:
        root, state = Path(scratch) / "ws", Path(scratch) / "state"
        if args.workspace is not None:
            root = args.workspace.resolve()
        else:
            root.mkdir()
            _tree(root, args.files, args.big_mib)
        load = [round(os.getloadavg()[0], 1)]
        secrets = SecretMatcher(DEFAULT_SECRET_PATTERNS)
        repo = ShadowRepo(state / "shadow" / "x.git", root, index=state / "sessions" / "s" / "shadow-index",
                          is_secret=secrets.match, name_patterns=tuple(p for p in DEFAULT_SECRET_PATTERNS if "/" not in p),
                          max_file_bytes=DEFAULT_MAX_FILE_BYTES)
        blobs = BlobStore(state / "blobs")
        status = ["git", "-C", str(root), "status", "--porcelain", "-uall"]
        subprocess.run(status, capture_output=True, check=True)  # the user's own index refreshed once
        private = next(p for p in sorted(root.rglob("*.py")) if ".git" not in p.parts)
        private.chmod(0o644)  # chmod 600 by each chmod call, and back
        first = _ms(repo.snapshot)
        floor, call, chmod, floor_cpu, call_cpu = [], [], [], [], []

        def one_call(change: int | str | None) -> None:
            before = repo.snapshot()
            if isinstance(change, int):
                (root / "pkg1" / "sub1" / "mod1.py").write_text(f"VALUE = {change}\n")
            elif change == "chmod":
                private.chmod(0o600)
            after = repo.snapshot()
            # as the recorder does (snapshots: mode-only changes too); a version without modes: trees
            found = repo.changes(before, after, blobs) if hasattr(before, "modes") \
                else repo.changes(before.tree, after.tree, blobs)
            if change == "chmod":
                assert [c.path for c in found] == [private] or not hasattr(before, "modes"), found
                private.chmod(0o644)

        for _ in range(args.runs):
            floor.append(_cpu(lambda: subprocess.run(status, capture_output=True, check=True), floor_cpu))
            call.append(_cpu(lambda: one_call(None), call_cpu))
            chmod.append(_ms(lambda: one_call("chmod")))
        load.append(round(os.getloadavg()[0], 1))
        for n in range(10 - 1):  # with the first snapshot's call: ten calls, each changing one file
            one_call(n)
        if args.workspace is not None:  # the workspace as it was
            subprocess.run(["git", "-C", str(root), "checkout", "-q", "--", "pkg1/sub1/mod1.py"], check=True)
        state_mib = _du(state) / (1 << 20)
        tree = {"workspace": str(root)} if args.workspace is not None else {"files": args.files, "big_mib": args.big_mib}
        figures = {**tree, "runs": args.runs, "floor_ms": _stats(floor),
                   "call_ms": _stats(call), "chmod_ms": _stats(chmod), "first_ms": round(first, 1),
                   "ratio": round(statistics.median(call) / statistics.median(floor), 2),
                   "chmod_ratio": round(statistics.median(chmod) / statistics.median(floor), 2),
                   "floor_cpu_ms": _stats(floor_cpu), "call_cpu_ms": _stats(call_cpu),
                   "cpu_ratio": round(statistics.median(call_cpu) / statistics.median(floor_cpu), 2), "load": load,
                   "state_mib": round(state_mib, 1)}
    if args.json:
        print(json.dumps(figures))
    else:
        for key, value in figures.items():
            print(f"{key:>10}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
