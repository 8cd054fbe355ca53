"""The read ledger rebuilt from the log, and the system text kept while nothing it depends on changed."""

from pathlib import Path

from agent_server.agent.header import context_data, header_note, kept_header
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


def kept(events, roots, latest):
    """``kept_header`` walking the events, checked equal to it finding them with ``EventLog.latest``
    (what the host does: no walk of a long log per request)."""
    walked = kept_header(events, roots)
    assert kept_header(events, roots, latest=latest) is walked
    return walked


def header_event(log, system="S", names=("read",), context=None, model="m"):
    tools = [{"type": "function", "function": {"name": n}} for n in names]
    data = {"system": system, "model": model, "params": {}, "tools": tools, "reasoning_content": "drop"}
    if context is not None:
        data["context"] = context
    return log.append("request/header", data)


RECORDS = [{"path": "/w/AGENTS.md", "sha256": "ab", "text": "Use tabs."}]


def test_the_logged_header_is_kept_whatever_changes_but_a_checkpoint_or_other_roots(tmp_path):
    log = new_log(tmp_path)
    assert kept(log.events, ["/w"], log.latest) is None  # nothing logged yet: render
    first = header_event(log)
    for kind in ("mode/changed", "project/instructions", "sandbox/status", "model/changed"):
        log.append(kind, {})
        assert kept(log.events, ["/w"], log.latest) is first
    assert kept(log.events, ["/w", "/extra"], log.latest) is None
    log.append("compaction/end", {"first_seq": 2, "last_seq": 3, "aborted": "failed"})  # replaced nothing
    assert kept(log.events, ["/w"], log.latest) is first
    log.append("compaction/end", {"first_seq": 2, "last_seq": 3, "message": "[checkpoint]"})
    log.append("compaction/end", {"first_seq": 2, "last_seq": 3, "aborted": "cancelled"})
    assert kept(log.events, ["/w"], log.latest) is None  # the notes may be in what the checkpoint replaced
    again = header_event(log, "S2")
    assert kept(log.events, ["/w"], log.latest) is again


def test_a_note_says_what_changed_since_the_header_told_it_and_nothing_when_nothing_did(tmp_path):
    log = new_log(tmp_path)
    told = context_data("workspace-write", True, RECORDS)
    header = header_event(log, context=told)
    assert header_note(header, told, "m", RECORDS, latest=log.latest) is None
    note = header_note(header, context_data("read-only", True, RECORDS), "m", RECORDS, latest=log.latest)
    assert note["changes"] == ["mode"] and "read-only" in note["text"] and "Use tabs" not in note["text"]
    note = header_note(header, context_data("workspace-write", True, []), "m2", [], latest=log.latest)
    assert note["changes"] == ["instructions", "model"]
    assert "there are none any more" in note["text"] and "now go to m2 (before: m)" in note["text"]
    other = [{"path": "/w/AGENTS.md", "sha256": "cd", "text": "Use spaces."}]
    note = header_note(header, context_data("workspace-write", True, other), "m", other, latest=log.latest)
    assert note["changes"] == ["instructions"] and "Use spaces." in note["text"]


def test_a_header_logged_before_notes_existed_is_told_again_only_when_an_input_came_after_it(tmp_path):
    log = new_log(tmp_path)
    log.append("mode/changed", {"from": None, "to": "workspace-write", "by": "default_mode"})
    header = header_event(log)  # no context: what the old code logged
    now = context_data("workspace-write", False, RECORDS)
    assert header_note(header, now, "m", RECORDS, latest=log.latest) is None  # rendered from what holds now
    log.append("mode/changed", {"from": "workspace-write", "to": "read-only", "by": "/mode"})
    note = header_note(header, context_data("read-only", False, RECORDS), "m", RECORDS, latest=log.latest)
    assert note["changes"] == ["mode", "sandboxed", "instructions"]  # unknown what it told: all of it again
    assert "read-only" in note["text"] and "not sandboxed" in note["text"] and "Use tabs." in note["text"]
