"""Process-group helpers shared by the harnesses: spawn isolation and no-orphan teardown.

Role: every agent the harnesses start is the leader of its own session/process group
(``start_new_session=True``), so tearing it down is ``killpg`` on that group — which also reaches
shells, tool commands and other grandchildren the agent left behind.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

from .timeouts import HANG

STDERR_TAIL_CHARS = 4000


def child_env(env: Mapping[str, str] | None, *, inherit: bool = True) -> dict[str, str]:
    """The environment for an agent process: ``os.environ`` (if ``inherit``) updated with ``env``."""
    merged = dict(os.environ) if inherit else {}
    if env:
        merged.update(env)
    return merged


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to process group ``pgid``; False if the group no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def group_members(pgid: int) -> list[int]:
    """PIDs currently in process group ``pgid`` (Linux ``/proc`` scan; zombies excluded)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # fields after the parenthesised comm: state ppid pgrp ...
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


def pid_alive(pid: int) -> bool:
    """True if ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children, grandchildren …), from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent = int(stat[stat.rfind(")") + 2:].split()[1])
            children.setdefault(parent, []).append(int(entry.name))
    found, frontier = [], [pid]
    while frontier:
        kids = children.get(frontier.pop(), [])
        found += kids
        frontier += kids
    return [p for p in found if pid_alive(p)]


def processes_naming(text: str) -> list[int]:
    """Living processes (not this one) whose command line contains ``text`` (``/proc`` scan): finds
    a process tree that left ours (``setsid``, double fork, another PID namespace) by a marker."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if text.encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def wait_gone(pids: list[int], within: float = HANG) -> bool:
    """True once none of ``pids`` is alive (gone, or a zombie waiting to be reaped), within ``within`` s."""
    deadline = time.monotonic() + within
    while any(pid_alive(p) for p in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_group(pgid: int, *, term_grace: float = 1.0) -> None:
    """SIGTERM the group, wait up to ``term_grace`` s for it to empty, then SIGKILL what is left."""
    if not signal_group(pgid, signal.SIGTERM):
        return
    deadline = time.monotonic() + term_grace
    while time.monotonic() < deadline:
        if not group_members(pgid):
            break
        time.sleep(0.02)
    signal_group(pgid, signal.SIGKILL)


def tail(text: str, limit: int = STDERR_TAIL_CHARS) -> str:
    """The last ``limit`` characters of ``text`` (for failure messages)."""
    return text if len(text) <= limit else "…" + text[-limit:]
