"""Stops every process of one scripts/try-vscode.sh run (its cleanup on exit, SIGHUP, SIGINT, SIGTERM).

    stop_marked.py NAME VALUE [PGID_FILE]

A process belongs to the run when NAME=VALUE is in the environment it was started with (the script
exports it before it starts anything; every descendant inherits it, whatever session or process
group it put itself in, and when it was reparented to init), or when it is in the process group
named by PGID_FILE (code-server's, written by the driver as soon as code-server is spawned). A group
kill alone misses what code-server and the extension start with setsid: the extension's agent-server
(and its tools), the login shell VS Code runs to read the user's environment, terminals' shells.

SIGTERM to all of them, up to TERM_GRACE s for them to end, then SIGKILL — scanning again each round,
so that a process started meanwhile is stopped too — until a scan finds none (or GIVE_UP s: then it
says which survived). Linux /proc only; never this process or its parent (the script's bash, whose
/proc environ predates the export anyway).
"""

from __future__ import annotations

import os
import signal
import sys
import time

TERM_GRACE = 1.5
GIVE_UP = 30.0


def _state_and_pgrp(pid: str) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[0], int(fields[2])


def _marked(pid: int | str, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return entry in f.read().split(b"\0")
    except OSError:
        return False


def members(entry: bytes, pgid: int | None) -> list[int]:
    """The run's live processes: its marker in their environment, or in group ``pgid`` while that
    group's leader is still the run's (a number reused by someone else's group is left alone)."""
    skip = {os.getpid(), os.getppid()}
    if pgid is not None and not _marked(pgid, entry):
        pgid = None
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in skip:
            continue
        sp = _state_and_pgrp(name)
        if sp is None or sp[0] in ("Z", "X"):
            continue
        if pgid is not None and sp[1] == pgid:
            found.append(int(name))
            continue
        if _marked(name, entry):
            found.append(int(name))
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def stop(entry: bytes, pgid: int | None) -> list[int]:
    """Stop the run's processes; the pids still alive after GIVE_UP s (normally none)."""
    start = time.monotonic()
    pids = members(entry, pgid)
    _signal(pids, signal.SIGTERM)
    while pids and time.monotonic() - start < TERM_GRACE:
        time.sleep(0.05)
        pids = members(entry, pgid)
    while pids and time.monotonic() - start < GIVE_UP:
        _signal(pids, signal.SIGKILL)
        time.sleep(0.05)
        pids = members(entry, pgid)
    return pids


def main(argv: list[str]) -> int:
    name, value = argv[1], argv[2]
    pgid = None
    if len(argv) > 3:
        try:
            with open(argv[3]) as f:
                pgid = int(f.read().strip())
        except (OSError, ValueError):
            pgid = None  # not spawned yet (or never): the marker still finds everything
    left = stop(f"{name}={value}".encode(), pgid)
    if left:
        print(f"try-vscode: processes of this run survived SIGKILL: {left}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
