"""The read ledger rebuilt from the log, and the system text kept while nothing it depends on changed."""

from pathlib import Path

from agent_server.agent.header import pinned_header as _pinned_header
from agent_server.agent.ledger import LoggedReadLedger
from agent_server.session import EventLog
from agent_server.tools.files import FileSnapshot


def new_log(tmp_path, **header):
    return EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w", "additional_directories": [], **header})


def test_ledger_logs_a_snapshot_once_and_a_log_rebuilds_it_without_bytes(tmp_path):
    log = new_log(tmp_path)
    ledger = LoggedReadLedger(log)
    ledger.record(FileSnapshot.of(Path("/w/a.py"), b"one\n"))
    ledger.record(FileSnapshot.of(Path("/w/a.py"), b"one\n"))  # read again, unchanged: nothing new
    ledger.record(FileSnapshot.of(Path("/w/a.py"), b"two\n", version=4))
    seen = [e.data for e in log.events if e.type == "file/seen"]
    assert [(d["path"], d["version"]) for d in seen] == [("/w/a.py", None), ("/w/a.py", 4)]
    rebuilt = LoggedReadLedger.from_log(log)
    entry = rebuilt.last("/w/a.py")
    assert entry.sha256 == FileSnapshot.of(Path("/w/a.py"), b"two\n").sha256 and entry.version == 4
    assert rebuilt.last("/w/other.py") is None
    before = len(log.events)
    rebuilt.record(FileSnapshot.of(Path("/w/a.py"), b"two\n", version=4))
    assert len(log.events) == before  # what the log already says is not logged again


def pinned_header(events, roots, tool_names):
    """``pinned_header`` walking the events, checked equal to it finding them with ``EventLog.latest``
    (what the host does: no walk of a long log per request)."""
    walked = _pinned_header(events, roots, tool_names)
    assert _pinned_header(events, roots, tool_names, latest=LATEST[0]) == walked
    return walked


LATEST: list = [None]


def header_event(log, system="S", names=("read",)):
    tools = [{"type": "function", "function": {"name": n}} for n in names]
    log.append("request/header", {"system": system, "model": "m", "params": {}, "tools": tools,
                                  "reasoning_content": "drop"})


def test_the_logged_header_holds_until_something_it_was_rendered_from_is_logged(tmp_path):
    log = new_log(tmp_path)
    LATEST[0] = log.latest
    assert pinned_header(log.events, ["/w"], ["read"]) is None  # nothing logged yet: render
    header_event(log)
    log.append("turn/start", {"turn": 1})
    assert pinned_header(log.events, ["/w"], ["read"])["system"] == "S"
    log.append("mode/changed", {"from": "workspace-write", "to": "read-only", "by": "/mode"})
    assert pinned_header(log.events, ["/w"], ["read"]) is None
    header_event(log, "S2")
    assert pinned_header(log.events, ["/w"], ["read"])["system"] == "S2"
    for kind in ("project/instructions", "sandbox/status"):
        log.append(kind, {})
        assert pinned_header(log.events, ["/w"], ["read"]) is None
        header_event(log)


def test_other_roots_or_other_tools_render_again(tmp_path):
    log = new_log(tmp_path)
    LATEST[0] = log.latest
    header_event(log)
    assert pinned_header(log.events, ["/w", "/extra"], ["read"]) is None
    assert pinned_header(log.events, ["/w"], ["read", "write"]) is None
    assert pinned_header(log.events, ["/w"], ["read"]) is not None
