"""Reading a long log in bulk (issue: parsing a 100k-event log took 2.3 s, mostly garbage
collection and one pydantic call per line): the fast path must read exactly what the model reads,
line for line, and every bad line must still fail the load with its line number."""

from __future__ import annotations

import gc
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_server.session import EventLog, LogCorruptError, SessionEvent, _parse, read_events

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


# -- the fast parse against the model, line by line, on random logs with bad lines ----------------

def by_the_model_line_by_line(path, raw: bytes):
    """The reference: every ``\\n``-terminated line through the model (``parse_line``), numbered
    from 1; the first bad one raises. Returns ``(events, tail event or None, tail bytes)``, or the
    ``(line, reason)`` of the ``LogCorruptError``."""
    *lines, rest = raw.split(b"\n")
    try:
        events = [_parse.parse_line(SessionEvent, path, n, line, expected_seq=n) for n, line in enumerate(lines, 1)]
    except LogCorruptError as exc:
        return exc.line, exc.reason
    try:
        tail = _parse.parse_line(SessionEvent, path, len(lines) + 1, rest, expected_seq=len(lines) + 1) if rest else None
    except LogCorruptError:
        tail = None
    return events, tail, rest


def exactly(result):
    """Events with their fields in order and every value as ``repr`` shows it (the model's ``==``
    ignores the order of the field dict, and ``0.0 == -0.0``)."""
    if len(result) == 2:
        return result
    events, tail, rest = result
    return [repr(list(e.__dict__.items())) for e in events], tail and repr(list(tail.__dict__.items())), rest


def fast(reader, path, raw: bytes):
    try:
        if reader == "bytes":
            events, tail = _parse.parse_log(SessionEvent, path, raw)
        else:
            path.write_bytes(raw)
            events, tail, size = _parse.read_log(SessionEvent, path)
            assert size == len(raw)
    except LogCorruptError as exc:
        return exc.line, exc.reason
    return events, (tail.event if tail else None), (tail.raw if tail else b"")


def _line(kind: str, seq: int, data: dict, when: float = 1.5) -> bytes:
    return SessionEvent(type=kind, seq=seq, time=when, data=data).to_line()[:-1]


def _mutations(line: bytes):
    """Ways a line goes bad or changes shape (each still a single line)."""
    return st.sampled_from([
        line,
        line[:-1],                                    # its closing brace lost
        line[: len(line) // 2],                       # cut in the middle
        line + b"}",                                  # a brace too many
        line.replace(b'"seq":', b'"seq": ', 1),        # another shape the model reads
        line.replace(b',"data":', b',"extra":1,"data":', 1),
        line.replace(b',"data":', b',"datum":', 1),
        line.replace(b'"time":1.5', b'"time":2', 1),   # an integer time: the model makes it 2.0
        line.replace(b'"time":1.5', b'"time":"1.5"', 1),
        line.replace(b'"type":"', b'"type":"X', 1),    # a type off the pattern
        line.replace(b'","seq"', b'!","seq"', 1),
        line.replace(b'","seq"', b'\\n","seq"', 1),     # Python's $ would let this one in
        line.replace(b'{"type":"user","seq":', b'{"seq":', 1).replace(b',"time"', b',"type":"user","time"', 1),
        line.replace(b'"data":{', b'"data":[{', 1)[:-1] + b"]}",
        line.replace(b'{"type"', b'{"seq":0,"type"', 1),  # a duplicate key: the last one wins
        b"\x00" + line[1:],
        b"",
        line + b"\r",
    ])


@st.composite
def logs(draw):
    """A log's bytes: a header, then events in the shape ``to_line`` writes — short and long
    (≥ ``SHARE_FROM``, repeated: shared on read) — some mutated or misnumbered, maybe a tail."""
    lines = [HEADER[:-1]]
    big = {"system": "s" * 1100}
    for seq in range(2, draw(st.integers(2, 16))):
        kind = draw(st.sampled_from(["user", "request/header", "tool/result", "a_b/c_d"]))
        data = draw(st.sampled_from([big, {**big, "n": seq}, {}, {"n": seq, "é": "\u2028x"}]))
        odd = draw(st.integers(0, 11))  # most lines are good: a bad one ends the read
        line = _line(kind, seq + (odd if odd < 2 else 0), dict(data))  # misnumbered when odd == 1
        if odd in (2, 3):
            line = draw(_mutations(line))
        lines.append(line)
    raw = b"\n".join(lines) + b"\n"
    tail = draw(st.sampled_from([b"", b"", b'{"type":"user","seq":', None]))
    if tail is None:  # a whole last event without its newline
        tail = _line("user", len(lines) + 1, {"last": True})
    return raw + tail


@settings(max_examples=400, deadline=None)
@given(raw=logs(), reader=st.sampled_from(["bytes", "file"]), chunk=st.sampled_from([7, 64, 1500, 4 << 20]))
def test_fast_parse_equals_the_model_line_by_line_on_random_logs_with_bad_lines(tmp_path_factory, raw, reader, chunk):
    """Bad and odd lines among good ones, long repeated payloads, a torn or whole tail, any
    chunk size (lines cut across reads): the same events, or the same first bad line and reason."""
    path = tmp_path_factory.mktemp("log") / "events.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_parse, "CHUNK", chunk)
        assert exactly(fast(reader, path, raw)) == exactly(by_the_model_line_by_line(path, raw))


# -- lines the model reads in its own way: the bulk read must read them the same ------------------

TRICKY = [
    b'{"seq":1,"type":"user","time":2.5,"data":{"keys":"in another order"}}',
    b'{"type":"user","seq":1,"time":2,"data":{"time":"an int: the model makes it 2.0"}}',
    b'{"type":"user","seq":1,"time":-0,"data":{"time":"-0: the model makes it 0.0, float() -0.0"}}',
    b'{"type":"user","seq":1,"time":-0.0,"data":{}}',
    b'{"type":"user","seq":1,"time":1e400,"data":{"x":1e400}}',
    b'{"type":"user","seq":1,"time":NaN,"data":{"x":NaN,"y":-Infinity}}',
    b'{"type":"user","seq":1,"time":123456789012345678901234567890,"data":{}}',
    b'{"type":"user","seq":true,"time":1.5,"data":{"seq":"a bool: the model makes it 1"}}',
    b'{"type":"user","seq":1.0,"time":1.5,"data":{}}',
    b'{"type":"user","seq":100000000000000000000000000001,"time":1.5,"data":{}}',
    b'{"type":"user","seq":1,"time":1.5,"data":{"big":123456789012345678901234567890,"neg":-1e-400}}',
    b'{"type":"user","seq":1,"time":1.5,"data":{},"extra":1}',
    b'{"type":"User","seq":1,"time":1.5,"data":{}}',
    b'{"type":"user\\n","seq":1,"time":1.5,"data":{}}',
    b'{"type":"us\\u0065r","seq":1,"time":1.5,"data":{"type":"escaped, of the pattern once read"}}',
    b'{"type":1,"seq":1,"time":1.5,"data":{}}',
    b'{"type":["user"],"seq":1,"time":1.5,"data":{}}',
    b'{"type":"user","seq":1,"time":1.5,"data":[1]}',
    b'{"type":"user","seq":1,"time":1.5,"data":null}',
    b'{"type":"user","seq":1,"time":1.5,"data":{"x":"\\ud800"}}',
    b'{"type":"user","seq":1,"time":1.5,"data":{"x":"\\ud83d\\ude00 \\u00e9 \\u2028"}}',
    b'{"type":"user","seq":1,"time":1.5,"data":{"x":"a\\u0000b","":1}}',
    b'{"type":"user","seq":1,"time":1.5,"data":{"a":1,"b":2,"a":3}}',
    b'{"type":"user","seq":0,"time":1.5,"data":{},"seq":1}',
    b'{"type":"user","seq":1,"time":1.5,"data":{},"seq":0}',
    b'{"type":"X","seq":1,"time":1.5,"data":{},"type":"user"}',
    b'{"type":"user","seq":1,"time":1.5,"data":{},"data":{"second":"wins"}}',
    b'{"type":"user","seq":1,"time":1.5,"time":"1.5","data":{}}',
    b'{"type":"user","seq":1,"time":{"a":1,"data":2},"data":{}}',
    b'{"data":{"x":1},"type":"user","seq":1,"time":1.5,"data":{}}',
    b'{"type":"user","seq":1,"time":1.5,"data":{"x":{"y":1,"data":2}} }',
    b'{"type":"user","seq":1,"time":1.5,"data":{"x":1}}}',
    b'{"type":"user","time":1.5,"data":{}}',
    b'{"type":"user","seq":1,"time":1.5}',
    b'{"type":"user","seq":1,"time":1.5,"datum":{}}',
    b'{}',
    b'["type","seq","time","data"]',
    b'"type"',
    b'null',
    b' {"type":"user","seq":1,"time":1.5,"data":{}} \t',
]
"""Each as line 1 (``seq`` 1): key order, number forms, a ``seq`` the model reads as 1, extra
keys, types off the pattern, data that is no object, big numbers, surrogates, duplicate keys
(the last one wins, in the first one's place), values that are no object, a ``,"data":`` that
is not the line's own, spaces or a brace too many after the data."""

NEXT = b'{"type":"turn/end","seq":2,"time":3.0,"data":{}}'


def _shapes():
    """Each tricky line short, and made ``SHARE_FROM`` bytes or more: a long ``pad`` key in its
    ``data`` (the envelope path, when it has an object there) and spaces before its last byte
    (another shape)."""
    for number, line in enumerate(TRICKY):
        yield pytest.param(line, id=f"short-{number}")
        padded = line.replace(b'"data":{', b'"data":{"pad":"' + b"p" * _parse.SHARE_FROM + b'",', 1)
        if padded != line:
            yield pytest.param(padded, id=f"long-{number}")
        yield pytest.param(line[:-1] + b" " * _parse.SHARE_FROM + line[-1:], id=f"spaced-{number}")


@pytest.mark.parametrize("line", list(_shapes()))
@pytest.mark.parametrize("reader", ["bytes", "file"])
def test_tricky_lines_are_read_exactly_as_the_model_reads_them(tmp_path, line, reader):
    """Short (one bulk parse of many lines) and long (the envelope path), followed by a line in
    the usual shape, twice over (the second long line shares its data): the same events, with the
    same values (``repr``: ``-0.0``, ``nan``) in the same order, or the same first bad line."""
    path = tmp_path / "events.jsonl"
    again = line.replace(b'"seq":1,', b'"seq":3,', 1) if b'"seq":1,' in line else line
    raw = b"\n".join([line, NEXT, again]) + b"\n"
    assert exactly(fast(reader, path, raw)) == exactly(by_the_model_line_by_line(path, raw))


def test_a_long_line_with_time_minus_zero_is_read_as_zero_as_the_model_reads_it(tmp_path):
    """The envelope path read ``time`` with ``float()``, which makes ``-0`` into ``-0.0``; the model
    reads the JSON integer ``-0`` as ``0.0`` (equal by ``==``, so no ``==`` test saw it)."""
    line = b'{"type":"user","seq":1,"time":-0,"data":{"pad":"' + b"p" * _parse.SHARE_FROM + b'"}}'
    events, _ = _parse.parse_log(SessionEvent, tmp_path / "events.jsonl", line + b"\n")
    assert repr(events[0].time) == repr(SessionEvent.model_validate_json(line).time) == "0.0"


def test_the_bulk_read_has_the_models_validators(tmp_path):
    """Without them (a core schema of another shape) every line is read by the model, right but
    ~4x slower: this pins that the installed pydantic gives the fast path."""
    assert _parse._Validators.of(SessionEvent) is not None
