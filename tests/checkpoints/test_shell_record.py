"""The confined shell's own writes, recorded through seccomp user notifications (``sandbox_notify``):
what a command asks to change is named in the record, what it only reads is not, and a write by
another process is never in it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agent_server.policy.sandbox import sandbox_notify

SCRIPT = r"""
import ctypes, os, sys, _thread
sys.path.insert(0, sys.argv[1])
import sandbox_notify as n
record = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
assert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0  # no_new_privs, as the sandbox sets it
listener = n.listen()
os.write(record, n.LISTENING)
_thread.start_new_thread(n.supervise, (listener, record))
child = os.fork()
if child == 0:
    os.chdir(sys.argv[3])
    os.execvp("bash", ["bash", "-c", sys.argv[4]])
_, status = os.waitpid(child, 0)
os._exit(os.waitstatus_to_exitcode(status))
"""


def supported() -> bool:
    try:
        sandbox_notify.build()
    except sandbox_notify.NotifyError:
        return False
    return True


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_commands_own_writes_are_recorded_and_nothing_else(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "read.txt").write_text("only read\n")
    (work / "old.txt").write_text("to be moved\n")
    (work / "gone.txt").write_text("to be removed\n")
    (work / "run.sh").write_text("#!/bin/sh\n")
    (work / "other.txt").write_text("written by someone else\n")
    record = tmp_path / "record"
    command = ("cat read.txt > /dev/null; echo hi > new.txt; mv old.txt moved.txt; rm gone.txt; chmod +x run.sh; "
               "mkdir -p d/e; sed -i s/hi/ho/ new.txt; ln -s new.txt link.txt")
    folder = str(Path(sandbox_notify.__file__).parent)
    subprocess.run([sys.executable, "-I", "-S", "-B", "-c", SCRIPT, folder, str(record), str(work), command],
                   check=True, timeout=60)
    (work / "other.txt").write_text("another process wrote this meanwhile\n")
    named = sandbox_notify.read_record(str(record))
    assert named is not None
    for name in ("new.txt", "old.txt", "moved.txt", "gone.txt", "run.sh", "d/e", "link.txt"):
        assert str(work / name) in named, name
    assert str(work / "read.txt") not in named and str(work / "other.txt") not in named
    assert (work / "new.txt").read_text() == "ho\n"  # the calls went through unchanged


def test_a_record_without_its_header_or_with_an_unreadable_path_proves_nothing(tmp_path):
    record = tmp_path / "record"
    assert sandbox_notify.read_record(str(record)) is None
    record.write_bytes(b"/w/a.txt\0")
    assert sandbox_notify.read_record(str(record)) is None
    record.write_bytes(sandbox_notify.LISTENING + b"/w/a.txt\0" + sandbox_notify.INCOMPLETE)
    assert sandbox_notify.read_record(str(record)) is None
    record.write_bytes(sandbox_notify.LISTENING + b"/w/a.txt\0/w/b.txt\0")
    assert sandbox_notify.read_record(str(record)) == {"/w/a.txt", "/w/b.txt"}
