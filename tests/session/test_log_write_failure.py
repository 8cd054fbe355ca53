"""Issue 11 §2b, the log on its own: an append that cannot be written (here: ``RLIMIT_FSIZE``, which
fails a write with ``EFBIG`` after a short write, as a full disk does with ``ENOSPC``) leaves memory
equal to disk, nothing more is written until ``recover()``, and then appends go on.

Each case runs in a child process, so the file-size limit binds no one else; no root needed.
"""

from __future__ import annotations

import json
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
