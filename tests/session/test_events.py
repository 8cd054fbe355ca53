"""The session log: append, seq, permissions, torn tails, corrupt lines, format versions."""

import json
import os
import stat

import pytest
from pydantic import ValidationError

from agent_server.session import (
    FORMAT_VERSION,
    EventLog,
    LogCorruptError,
    LogVersionError,
    SessionStore,
)


def new_log(tmp_path):
    return EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w"})


def test_append_gives_contiguous_seq_and_writes_one_line_per_event(tmp_path):
    log = new_log(tmp_path)
    log.append("turn/start", {"turn": 1})
    log.append("user", {"turn": 1, "content": "héllo\nworld"})
    lines = log.path.read_bytes().split(b"\n")
    assert lines[-1] == b""
    parsed = [json.loads(line) for line in lines[:-1]]
    assert [p["seq"] for p in parsed] == [1, 2, 3]
    assert [p["type"] for p in parsed] == ["session/header", "turn/start", "user"]
    assert parsed[0]["data"]["format_version"] == FORMAT_VERSION
    assert parsed[2]["data"]["content"] == "héllo\nworld"
    assert "héllo".encode() in lines[2]  # human-readable, not \\u-escaped


def test_log_file_and_folder_are_private(tmp_path):
    log = new_log(tmp_path)
    assert stat.S_IMODE(os.stat(log.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(log.path.parent).st_mode) == 0o700


def test_append_rejects_bad_type_names_and_non_json_data(tmp_path):
    log = new_log(tmp_path)
    with pytest.raises(ValidationError):
        log.append("Turn Start", {})
    with pytest.raises(TypeError):
        log.append("user", {"content": object()})
    assert log.last_seq == 1
    assert len(log.path.read_bytes().splitlines()) == 1


def test_reopen_sees_every_event_and_continues_seq(tmp_path):
    log = new_log(tmp_path)
    log.append("turn/start", {"turn": 1})
    log.close()
    again = EventLog.open(log.path)
    assert [e.seq for e in again.events] == [1, 2]
    assert again.append("turn/end", {"turn": 1, "exit": "end_turn"}).seq == 3


def test_torn_last_line_is_cut_and_the_cut_is_logged(tmp_path):
    log = new_log(tmp_path)
    log.append("turn/start", {"turn": 1})
    log.close()
    with open(log.path, "ab") as f:
        f.write(b'{"type":"user","seq":3,"time":1.0,"data":{"content":"half')
    again = EventLog.open(log.path)
    types = [e.type for e in again.events]
    assert types == ["session/header", "turn/start", "log/repaired"]
    repaired = again.events[-1]
    assert repaired.seq == 3
    assert repaired.data["line"] == 3
    assert repaired.data["cut_text"].endswith('"content":"half')
    # the file itself is whole again: every line parses
    for line in log.path.read_bytes().splitlines():
        json.loads(line)


def test_whole_last_event_missing_only_its_newline_is_kept(tmp_path):
    log = new_log(tmp_path)
    log.close()
    event = {"type": "turn/start", "seq": 2, "time": 1.0, "data": {"turn": 1}}
    with open(log.path, "ab") as f:
        f.write(json.dumps(event).encode())
    again = EventLog.open(log.path)
    assert [e.type for e in again.events] == ["session/header", "turn/start"]
    assert log.path.read_bytes().endswith(b"\n")


def test_corrupt_middle_line_fails_loudly_with_its_line_number(tmp_path):
    log = new_log(tmp_path)
    log.append("turn/start", {"turn": 1})
    log.append("turn/end", {"turn": 1, "exit": "end_turn"})
    log.close()
    lines = log.path.read_bytes().split(b"\n")
    lines[1] = b'{"type":"turn/start","seq":2,'
    log.path.write_bytes(b"\n".join(lines))
    with pytest.raises(LogCorruptError) as info:
        EventLog.open(log.path)
    assert info.value.line == 2


def test_seq_gap_is_corruption(tmp_path):
    log = new_log(tmp_path)
    log.close()
    with open(log.path, "ab") as f:
        f.write(b'{"type":"turn/start","seq":5,"time":1.0,"data":{}}\n')
    with pytest.raises(LogCorruptError, match="seq 5, expected 2"):
        EventLog.open(log.path)


def test_log_from_a_future_format_is_refused_clearly(tmp_path):
    path = tmp_path / "events.jsonl"
    header = {"type": "session/header", "seq": 1, "time": 1.0, "data": {"format_version": FORMAT_VERSION + 1}}
    path.write_text(json.dumps(header) + "\n")
    with pytest.raises(LogVersionError, match="newer"):
        EventLog.open(path)


def test_store_refuses_session_ids_that_escape_the_folder(tmp_path):
    store = SessionStore(tmp_path)
    for bad in ("../x", "a/b", "..", "", "x\n"):
        with pytest.raises(ValueError):
            store.log_path(bad)
    session_id, log = store.create({"cwd": "/w"})
    assert log.path == tmp_path / "sessions" / session_id / "events.jsonl"
    assert store.exists(session_id)


def test_lone_surrogates_and_nan_are_made_strict_json_not_a_broken_turn(tmp_path):
    log = new_log(tmp_path)
    event = log.append("user", {"content": "bad \udc80 text", "usage": {"total": float("nan"), "x": float("inf")}})
    assert event.data == {"content": "bad \ufffd text", "usage": {"total": None, "x": None}}
    raw = log.path.read_bytes().splitlines()[-1]
    raw.decode("utf-8")  # strict UTF-8
    assert b"NaN" not in raw and b"Infinity" not in raw
    json.loads(raw, parse_constant=lambda name: pytest.fail(f"{name} in the log"))
    log.close()
    assert EventLog.open(log.path).events[-1].data["content"] == "bad \ufffd text"
