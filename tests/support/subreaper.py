"""``python subreaper.py REPORT -- COMMAND...``: run COMMAND as this process's child, with this
process the *child subreaper* of everything COMMAND starts (``PR_SET_CHILD_SUBREAPER``: an orphan
— double-forked, ``setsid``, a daemon — becomes a child of this process instead of init's).

Stdin, stdout and stderr are COMMAND's own (this process only waits). When COMMAND has exited,
every process it left is a child of this one: they are given ``within`` s (``SUBREAPER_WITHIN``,
default 10) to end by themselves, reaped as they do; what is still running then is written to
REPORT as JSON (``[{"pid", "cmdline"}]``, ``[]`` when nothing was left) and killed. Exits with
COMMAND's status.
"""

import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def children() -> list[int]:
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            if int(fields[1]) == me and fields[0] != "Z":
                found.append(int(entry))
    return found


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def main(argv: list[str]) -> int:
    report, command = argv[0], argv[argv.index("--") + 1:]
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")
    proc = subprocess.Popen(command)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # passed on, as an editor's would be
        signal.signal(signum, lambda s, _f: proc.send_signal(s))
    status = proc.wait()
    deadline = time.monotonic() + float(os.environ.get("SUBREAPER_WITHIN", "10"))
    while True:
        reap()
        left = children()
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    with open(report, "w") as f:
        json.dump([{"pid": pid, "cmdline": cmdline(pid)} for pid in left], f)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    reap()
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
