"""Issue 11 §2b, the log on its own: an append that cannot be written (here: ``RLIMIT_FSIZE``, which
fails a write with ``EFBIG`` after a short write, as a full disk does with ``ENOSPC``) leaves memory
equal to disk, nothing more is written until ``recover()``, and then appends go on.

Each case runs in a child process, so the file-size limit binds no one else; no root needed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent('''
    import json, os, resource, sys
    from pathlib import Path
    from agent_server.session import EventLog, LogWriteError, read_events

    path = Path(sys.argv[1])
    log = EventLog.create(path, {"cwd": "/"})
    log.append("user", {"content": "small"})
    size = path.stat().st_size
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 300, hard))  # room for a short write only
    out = {}
    try:
        log.append("tool/result", {"content": "x" * 5000})
        out["first"] = "written"
    except LogWriteError as exc:
        out["first"] = type(exc.cause).__name__ + ":" + str(exc.cause.errno)
    out["size_after_failure"] = path.stat().st_size
    out["memory_after_failure"] = len(log)
    try:
        log.append("turn/end", {"turn": 1, "exit": "error"})  # small: would fit, must not be written
        out["second"] = "written"
    except LogWriteError:
        out["second"] = "refused"
    out["size_after_refusal"] = path.stat().st_size
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space comes back
    out["recovered"] = log.recover()
    log.append("turn/end", {"turn": 1, "exit": "error"})
    log.close()
    on_disk = read_events(path)
    out["disk_types"] = [e.type for e in on_disk]
    out["memory_types"] = [e.type for e in log.events]
    out["size"] = size
    out["reopened"] = len(EventLog.open(path))
    print(json.dumps(out))
''')


def test_failed_append_leaves_memory_equal_to_disk_writes_nothing_more_and_recovers(tmp_path):
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "s" / "events.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["first"] == "OSError:27"  # EFBIG after a short write
    assert out["size_after_failure"] == out["size"]  # the partial line was cut off again
    assert out["memory_after_failure"] == 2
    assert out["second"] == "refused" and out["size_after_refusal"] == out["size"]
    assert out["recovered"] is True
    assert out["disk_types"] == out["memory_types"] == ["session/header", "user", "turn/end"]
    assert out["reopened"] == 3  # loads whole: no torn line, nothing repaired


def test_a_failed_deferred_fsync_cuts_off_its_event_and_those_written_after_it(tmp_path):
    """``append(…, sync_later=True)`` then ``sync`` in a worker thread: when that ``fsync`` fails,
    ``synced`` cuts the file and memory back to before the unsynced event (the events written after
    it go too), ``latest``/``count`` forget them, earlier snapshots stay as they were, and appends
    are refused until ``recover()``."""
    import errno

    import pytest

    from agent_server.session import EventLog, LogWriteError, read_events

    path = tmp_path / "events.jsonl"
    log = EventLog.create(path, {"cwd": "/"})
    log.append("step/start", {"turn": 0, "step": 1})
    size, kept = path.stat().st_size, [e.type for e in log.events]
    log.append("user", {"turn": 1, "content": "x"}, sync_later=True)
    token = log.unsynced
    assert token is not None
    log.append("step/start", {"turn": 1, "step": 1})
    snapshot = log.events
    with pytest.raises(LogWriteError):
        log.synced(token, OSError(errno.EIO, "Input/output error"))
    assert [e.type for e in log.events] == kept == [e.type for e in read_events(path)]
    assert path.stat().st_size == size and len(snapshot) == len(kept) + 2
    assert log.latest("user") is None and log.count("step/start") == 1 and log.latest("step/start").data["turn"] == 0
    with pytest.raises(LogWriteError):
        log.append("turn/end", {"turn": 1, "exit": "error"})
    assert log.recover() and log.append("turn/end", {"turn": 1, "exit": "error"}).seq == len(kept) + 1
    # a deferred fsync that succeeded, or that a later durable append covered, changes nothing
    log.append("user", {"turn": 2, "content": "y"}, sync_later=True)
    token = log.unsynced
    log.sync()
    log.synced(token)
    assert log.unsynced is None
    log.append("user", {"turn": 3, "content": "z"}, sync_later=True)
    token = log.unsynced
    log.append("turn/end", {"turn": 3, "exit": "end_turn"})  # durable: its fsync covers the user event
    log.synced(token, OSError(errno.EIO, "late"))
    assert log.failed is None and log.latest("user").data["content"] == "z"
    log.close()


def test_a_durable_append_after_a_failed_deferred_fsync_vouched_for_the_user_event_its_fsync_could_not_see(
        tmp_path, monkeypatch):
    """Linux reports a failed write-back once per open file (``fsync``: ``EIO``), and the next
    ``fsync`` of that file returns 0 although the pages it lost are not on disk (PostgreSQL's
    "fsyncgate", 2018). The worker's ``fsync`` of a ``user`` event failed; before the loop heard of
    it, a durable append (an ``inbox/queued``: a prompt sent meanwhile) ``fsync``\\ed on the loop,
    got 0 and took the ``user`` event as covered: the worker's error was dropped and the event
    whose ``fsync`` failed stayed, as if on disk. A durable append ``fsync``\\ed after a deferred
    ``fsync`` failed is refused as that one is: both are cut off."""
    import errno

    import pytest

    from agent_server.session import EventLog, LogWriteError, read_events

    path = tmp_path / "events.jsonl"
    log = EventLog.create(path, {"cwd": "/"})
    log.append("turn/start", {"turn": 1})
    size, kept = path.stat().st_size, [e.type for e in log.events]
    log.append("user", {"turn": 1, "content": "x"}, sync_later=True)
    token = log.unsynced
    real_fsync = os.fsync
    reported = []

    def fsync(fd):  # the kernel's way: the write-back error is reported to the first fsync only
        real_fsync(fd)
        if not reported:
            reported.append(fd)
            raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as failed:
        log.sync()  # the worker thread's
    with pytest.raises(LogWriteError):
        log.append("inbox/queued", {"content": "meanwhile", "blocks": []})  # its fsync returns 0
    with pytest.raises(LogWriteError):
        log.synced(token, failed.value)  # the loop hears of the worker's error
    assert [e.type for e in log.events] == kept == [e.type for e in read_events(path)]
    assert path.stat().st_size == size and log.latest("user") is None
    log.close()
