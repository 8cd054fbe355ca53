"""``agent-server spare status|stop [--json]``: this user's warm spares (``spare/__init__.py``).

``status`` lists the spares of the folder this environment resolves to (``spare_folder``) and
the key a launch from here would use (``--json``: ``{"folder", "disabled", "key", "spares"}``): for each
key whose lock is held, the spare's pid, its age, its resident memory, how many servers it forked
that still run, its standby child (forked ahead, its pages copied, waiting for the next launch),
and whether it serves this launch's key (the one ``agent-server`` would use from here). ``stop`` sends each a SIGTERM (through a pidfd, after checking that the pid still holds
that key's lock) and waits up to 5 s for each to stop serving: it unlinks its socket and releases
its lock at once, then stays only until the servers it reports on have ended (they keep running).
Exit status 0; 1 when the folder cannot be used.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import stat
import sys
import time

from agent_server.spare import _launcher as L

USAGE = "usage: agent-server spare status|stop [--json]\n"


def spares(dirfd: int) -> list[dict]:
    """The live spares of the folder ``dirfd``: ``{key, pid, lock}`` for each held lock."""
    out = []
    for entry in sorted(os.listdir(L.fd_path(dirfd, ""))):
        if not (entry.startswith("spare-") and entry.endswith(".lock")):
            continue
        try:
            # O_NONBLOCK: a FIFO of that name would block the open until a writer came
            fd = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dirfd)
        except OSError:
            continue
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                continue  # not a lock file of ours
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                continue  # free: no spare of that key runs
            except BlockingIOError:
                pass
            pids = os.read(fd, 64).split()
            try:
                pid, standby = int(pids[0]), int(pids[1]) if len(pids) > 1 else 0
            except (ValueError, IndexError):
                pid, standby = 0, 0
        finally:
            os.close(fd)
        out.append({"key": entry[len("spare-"):-len(".lock")], "pid": pid, "standby": standby or None})
    return out


def _proc(pid: int, standby: int | None) -> dict:
    info: dict = {"rss_kib": None, "age_s": None, "servers": None}
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                info["rss_kib"] = int(line.split()[1])
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        started = int(stat[19]) / os.sysconf("SC_CLK_TCK")
        uptime = float(open("/proc/uptime").read().split()[0])
        info["age_s"] = round(uptime - started, 1)
        children = {int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()}
        info["servers"] = len(children - {standby})
    except (OSError, ValueError, IndexError):
        pass
    return info


def _is_spare(pid: int) -> bool:
    try:
        return b"agent_server.spare" in open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return False


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    rest = [a for a in argv if a != "--json"]
    if len(rest) != 1 or rest[0] not in ("status", "stop"):
        sys.stderr.write(USAGE)
        return 2
    folder = L.spare_folder()
    try:
        current = L.key_sum(L.key_bytes())
    except OSError:
        current = ""
    try:
        dirfd = L.open_folder(folder, create=False)
    except L.FolderError as exc:
        if not os.path.lexists(folder):
            if as_json:
                print(json.dumps({"folder": folder, "disabled": L.disabled(), "key": current, "spares": []}))
            else:
                print(f"no spare ({folder} does not exist)")
            return 0
        sys.stderr.write(f"agent-server spare: {exc}\n")
        return 1
    try:
        found = spares(dirfd)
        if rest[0] == "status":
            for spare in found:
                spare.update(_proc(spare["pid"], spare["standby"]), serves_this_launch=spare["key"] == current)
            if as_json:
                print(json.dumps({"folder": folder, "disabled": L.disabled(), "key": current, "spares": found}))
            else:
                print(f"folder {folder}" + (" (AGENT_SERVER_SPARE is off here)" if L.disabled() else ""))
                if not found:
                    print("no spare runs")
                for s in found:
                    rss = f"{s['rss_kib'] / 1024:.1f} MiB" if s["rss_kib"] else "?"
                    print(f"spare {s['key']}: pid {s['pid']}, up {s['age_s']} s, {rss}, {s['servers']} server(s) running"
                          + (f", standby pid {s['standby']}" if s["standby"] else "")
                          + (" — serves launches from here" if s["serves_this_launch"] else ""))
            return 0
        stopped = []
        for spare in found:
            pid = spare["pid"]
            if pid <= 0 or not _is_spare(pid):
                continue
            try:
                pidfd = os.pidfd_open(pid)
            except OSError:
                continue
            try:
                if not _is_spare(pid):  # the pid was reused between the check and the open
                    continue
                signal.pidfd_send_signal(pidfd, signal.SIGTERM)
                stopped.append(spare)
            except OSError:
                pass
            finally:
                os.close(pidfd)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and {s["key"] for s in spares(dirfd)} & {s["key"] for s in stopped}:
            time.sleep(0.02)
        if as_json:
            print(json.dumps({"folder": folder, "stopped": stopped}))
        else:
            print(f"stopped {len(stopped)} spare(s) in {folder}")
        return 0
    finally:
        os.close(dirfd)
