"""Reading a long log in bulk (issue: parsing a 100k-event log took 2.3 s, mostly garbage
collection and one pydantic call per line): the fast path must read exactly what the model reads,
line for line, and every bad line must still fail the load with its line number."""

from __future__ import annotations

import gc
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.session import EventLog, LogCorruptError, SessionEvent, read_events

HEADER = b'{"type":"session/header","seq":1,"time":1.5,"data":{"format_version":1,"cwd":"/w"}}\n'


def by_the_model(raw: bytes) -> list[SessionEvent]:
    """What ``SessionEvent.model_validate_json`` reads from each line (the slow path of before)."""
    return [SessionEvent.model_validate_json(line) for line in raw.split(b"\n") if line]


def write(tmp_path, *lines: bytes) -> object:
    path = tmp_path / "events.jsonl"
    path.write_bytes(HEADER + b"".join(line + b"\n" for line in lines))
    return path


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["user", "tool/result", "request/header", "a_b/c_d"]),
                          st.dictionaries(st.text(max_size=12), json_values, max_size=5),
                          st.booleans()), max_size=12))
def test_bulk_read_equals_the_model_line_by_line(tmp_path_factory, appended):
    """Events as ``append`` writes them — any JSON data, big payloads repeated (shared on read)
    or not — read back equal to what the model reads from each line."""
    log = EventLog.create(tmp_path_factory.mktemp("log") / "events.jsonl", {"cwd": "/w"})
    for kind, data, big in appended:
        log.append(kind, {**data, "pad": "x" * 2000} if big else data)
    log.close()
    raw = log.path.read_bytes()
    assert read_events(log.path) == by_the_model(raw) == list(log.events)
    assert EventLog.open(log.path).events == tuple(by_the_model(raw))


def test_repeated_large_data_is_read_equal_and_shared_only_when_byte_equal(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w"})
    header = {"system": "é" * 3000, "tools": [{"name": "read"}], "params": {}}
    for _ in range(3):
        log.append("request/header", header)
    log.append("request/header", {**header, "system": "other" * 1000})
    log.close()
    events = read_events(log.path)
    assert [e.data for e in events[1:]] == [header, header, header, {**header, "system": "other" * 1000}]
    assert events[1].data is events[2].data is events[3].data  # parsed once
    assert events[4].data is not events[3].data
    assert events == by_the_model(log.path.read_bytes())


@pytest.mark.parametrize("line", [
    b'{ "type": "user", "seq": 2, "time": 2, "data": {"content": "spaced"} }',
    b'{"seq":2,"type":"user","time":2.0,"data":{"content":"keys in another order"}}',
    b'{"type":"user","seq":2,"time":2e0,"data":{"content":"\\u00e9 escaped"}}',
    b'{"type":"user","seq":2,"time":-0.5,"data":{}}\r',
    b'{"type":"user","seq":2,"time":"2","data":{}}',
])
def test_lines_in_another_shape_are_read_by_the_model(tmp_path, line):
    path = write(tmp_path, line)
    assert read_events(path) == by_the_model(path.read_bytes())


@pytest.mark.parametrize(("line", "reason"), [
    (b'{"type":"user","seq":2,"time":2.0,"data":{"content":}}', "JSON"),
    (b'{"type":"user","seq":2,"time":2.0,"data":{"content":"x"},"extra":1}', "Extra inputs"),
    (b'{"type":"user","seq":2,"time":2.0,"data":[1,2]}', "object"),
    (b'{"type":"user","seq":2,"time":2.0,"data":{"a":1}}}', "JSON"),
    (b'{"type":"user","seq":3,"time":2.0,"data":{}}', "seq 3, expected 2"),
    (b'{"type":"User","seq":2,"time":2.0,"data":{}}', "pattern"),
    (b'\x00garbage', "JSON"),
    (b'', "JSON"),
])
def test_a_bad_earlier_line_fails_with_its_line_number(tmp_path, line, reason):
    path = write(tmp_path, line, b'{"type":"turn/end","seq":3,"time":3.0,"data":{}}')
    for reader in (read_events, EventLog.open):
        with pytest.raises(LogCorruptError) as info:
            reader(path)
        assert info.value.line == 2
        assert reason in info.value.reason
    assert path.read_bytes().endswith(b'"data":{}}\n')  # left as it was


def test_a_torn_last_line_is_still_cut_and_logged(tmp_path):
    path = write(tmp_path, b'{"type":"user","seq":2,"time":2.0,"data":{"content":"whole"}}')
    with open(path, "ab") as f:
        f.write(b'{"type":"user","seq":3,"time":3.0,"data":{"content":"ha')
    assert [e.seq for e in read_events(path)] == [1, 2]
    log = EventLog.open(path)
    assert [e.type for e in log.events] == ["session/header", "user", "log/repaired"]
    assert log.events[-1].data["line"] == 3


def test_the_garbage_collector_runs_again_after_a_bulk_read(tmp_path):
    path = write(tmp_path, *(json.dumps({"type": "user", "seq": n, "time": 1.0, "data": {"n": n}},
                                        separators=(",", ":")).encode() for n in range(2, 50)))
    assert gc.isenabled()
    read_events(path)
    assert gc.isenabled()
    with pytest.raises(LogCorruptError):
        read_events(write(tmp_path, b"{"))
    assert gc.isenabled()


def test_latest_and_count_follow_appends_and_a_reload(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w"})
    for n in range(5):
        log.append("turn/start", {"turn": n})
        log.append("model/changed" if n % 2 else "user", {"to": f"m{n}"})

    def walked(events, kind):
        return next((e for e in reversed(events) if e.type == kind), None), sum(e.type == kind for e in events)

    for opened in (log, (log.close(), EventLog.open(log.path))[1]):
        for kind in ("turn/start", "model/changed", "user", "session/header", "nothing/such"):
            assert (opened.latest(kind), opened.count(kind)) == walked(opened.events, kind)
