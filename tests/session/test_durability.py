"""Log durability and honest loading: fsync where an invariant depends on it, refusals that say
why, and read-only readers that never change a live log."""

import json
import os

import pytest

from agent_server.session import (
    DURABLE_TYPES,
    EventLog,
    LogCorruptError,
    LogVersionError,
    SessionStore,
    read_events,
    read_head,
)


def new_log(tmp_path):
    return EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w"})


def test_turn_end_tool_call_and_tool_result_reach_the_disk_with_fsync_chunks_only_flush(tmp_path, monkeypatch):
    log = new_log(tmp_path)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(log.last_seq + 1), real_fsync(fd)))  # seq: not in the list yet
    kinds = ["turn/start", "user", "assistant/chunk", "tool/call", "tool/result", "notice",
             "inbox/queued", "inbox/started", "turn/end"]
    for kind in kinds:
        log.append(kind, {})
    fsynced = {log.events[seq - 1].type for seq in synced}
    assert {"turn/end", "tool/call", "tool/result", "user", "notice", "inbox/queued", "inbox/started"} <= fsynced
    assert "assistant/chunk" not in fsynced and "turn/start" not in fsynced
    assert {"turn/end", "tool/call", "tool/result"} <= DURABLE_TYPES


def test_log_from_an_unmigratable_older_format_is_refused_not_started_empty(tmp_path):
    path = tmp_path / "events.jsonl"
    header = {"type": "session/header", "seq": 1, "time": 1.0, "data": {"format_version": 0}}
    path.write_text(json.dumps(header) + "\n")
    with pytest.raises(LogVersionError, match="older"):
        EventLog.open(path)
    assert path.read_text() == json.dumps(header) + "\n"


def test_future_format_log_with_a_torn_tail_is_refused_without_touching_the_file(tmp_path):
    path = tmp_path / "events.jsonl"
    header = {"type": "session/header", "seq": 1, "time": 1.0, "data": {"format_version": 99}}
    raw = (json.dumps(header) + '\n{"type":"tur').encode()
    path.write_bytes(raw)
    with pytest.raises(LogVersionError, match="newer"):
        EventLog.open(path)
    assert path.read_bytes() == raw  # a newer program's log is not "repaired" by an older one


def test_corrupt_middle_line_error_names_the_file_and_line(tmp_path):
    log = new_log(tmp_path)
    for turn in (1, 2):
        log.append("turn/start", {"turn": turn})
    log.close()
    lines = log.path.read_bytes().split(b"\n")
    lines[2] = b"\x00garbage"
    log.path.write_bytes(b"\n".join(lines))
    with pytest.raises(LogCorruptError) as info:
        read_events(log.path)
    assert info.value.line == 3 and f"{log.path}: line 3" in str(info.value)


def test_read_events_leaves_a_live_log_with_a_torn_tail_unchanged(tmp_path):
    log = new_log(tmp_path)
    log.append("turn/start", {"turn": 1})
    with open(log.path, "ab") as f:
        f.write(b'{"type":"user","seq":3,')
    before = log.path.read_bytes()
    assert [e.type for e in read_events(log.path)] == ["session/header", "turn/start"]
    assert log.path.read_bytes() == before


def test_read_head_returns_the_header_and_the_first_prompt_without_reading_on(tmp_path):
    log = new_log(tmp_path)
    log.append("turn/start", {"turn": 1})
    log.append("user", {"turn": 1, "content": "first"})
    log.append("user", {"turn": 2, "content": "second"})
    log.close()
    with open(log.path, "ab") as f:
        f.write(b"not json at all\n")  # never reached
    header, first = read_head(log.path, lambda e: e.type == "user")
    assert header.data["cwd"] == "/w" and first.data["content"] == "first"


def test_a_second_writer_is_refused_and_the_lock_dies_with_its_holder(tmp_path):
    import signal
    import subprocess
    import sys

    from agent_server.session import LogBusyError

    log = new_log(tmp_path)
    with pytest.raises(LogBusyError):
        EventLog.open(log.path)
    assert [e.type for e in read_events(log.path)] == ["session/header"]  # readers need no lock
    log.close()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from agent_server.session import EventLog; "
                               f"log = EventLog.open({str(log.path)!r}); print('held', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline() == b"held\n"
        with pytest.raises(LogBusyError):
            EventLog.open(log.path)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    EventLog.open(log.path).close()  # a killed holder does not keep the log locked


def test_delete_of_a_log_held_open_is_refused_busy_and_removes_nothing(tmp_path):
    from agent_server.session import LogBusyError

    store = SessionStore(tmp_path)
    sid, log = store.create({"cwd": "/w"})
    (log.path.parent / "spill").mkdir()
    with pytest.raises(LogBusyError):
        store.delete(sid)
    assert log.path.is_file() and (log.path.parent / "spill").is_dir()
    log.append("turn/start", {"turn": 1})  # the holder goes on writing to the same file
    log.close()
    store.delete(sid)
    assert not log.path.parent.exists()
    with pytest.raises(FileNotFoundError):
        store.delete(sid)


def test_open_of_a_log_deleted_between_its_open_and_its_lock_is_not_found(tmp_path, monkeypatch):
    import fcntl

    store = SessionStore(tmp_path)
    sid, log = store.create({"cwd": "/w"})
    log.close()
    real_flock, raced = fcntl.flock, []

    def flock_after_delete(fd, op):  # the delete wins the race: it removes the log under its lock
        if not raced:
            raced.append(fd)
            store.delete(sid)
        return real_flock(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock_after_delete)
    with pytest.raises(FileNotFoundError):
        EventLog.open(log.path)
    assert not log.path.parent.exists()
