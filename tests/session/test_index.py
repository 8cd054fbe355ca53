"""session/list through the index beside the logs: sessions that had a prompt, each log read once.

Issue 31, item 7: three ``session/new`` without a prompt cluttered CodeCompanion's ``/resume``, and
with 2,041 stored sessions every page re-read every log.
"""

from __future__ import annotations

import builtins
import json
import os

from agent_server.host.lifecycle import list_sessions
from agent_server.session import EventLog, SessionStore
from agent_server.session.index import INDEX_NAME


def make(store: SessionStore, cwd: str, prompt: str | None) -> str:
    sid, log = store.create({"cwd": cwd})
    if prompt is not None:
        log.append("user", {"turn": 1, "content": prompt, "blocks": [{"type": "text", "text": prompt}]})
        log.append("assistant", {"text": "ok"})
    log.close()
    return sid


def walk(store: SessionStore, cwd: str | None) -> list[dict]:
    seen, cursor = [], None
    while True:
        page, cursor = list_sessions(store, cwd, cursor)
        seen += page
        if cursor is None:
            return seen


class LogOpens:
    """Counts opens of session logs (``events.jsonl``) while installed."""

    def __init__(self, monkeypatch) -> None:
        self.count = 0
        real = builtins.open

        def counting(file, *args, **kwargs):
            if str(file).endswith("events.jsonl"):
                self.count += 1
            return real(file, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", counting)


def test_three_session_new_without_a_prompt_are_not_listed(tmp_path):
    store = SessionStore(tmp_path / "state")
    cwd = str(tmp_path)
    for _ in range(3):
        make(store, cwd, None)
    prompted = make(store, cwd, "fix the parser\nplease")
    listed = walk(store, cwd)
    assert [s["sessionId"] for s in listed] == [prompted]
    assert listed[0]["title"] == "fix the parser"


def test_paging_through_many_sessions_reads_each_log_once_not_once_per_page(tmp_path, monkeypatch):
    store = SessionStore(tmp_path / "state")
    cwd = str(tmp_path)
    created = {make(store, cwd, f"prompt {i}") for i in range(130)}  # three pages of 50
    opens = LogOpens(monkeypatch)
    listed = walk(store, cwd)
    assert {s["sessionId"] for s in listed} == created and len(listed) == 130
    assert opens.count <= 130  # building the index reads each log's head once
    before = opens.count
    assert {s["sessionId"] for s in walk(store, cwd)} == created
    # a new process (a new store object) reads the index file, not the logs
    assert {s["sessionId"] for s in walk(SessionStore(tmp_path / "state"), cwd)} == created
    assert opens.count == before


def test_the_index_follows_a_first_prompt_a_deletion_and_a_damaged_index_file(tmp_path):
    store = SessionStore(tmp_path / "state")
    cwd = str(tmp_path)
    empty = make(store, cwd, None)
    kept = make(store, cwd, "one")
    assert [s["sessionId"] for s in walk(store, cwd)] == [kept]
    log = EventLog.open(store.log_path(empty))  # the empty session gets its first prompt
    log.append("user", {"turn": 1, "content": "now", "blocks": [{"type": "text", "text": "now it has one"}]})
    log.close()
    listed = walk(store, cwd)
    assert {s["sessionId"]: s.get("title") for s in listed} == {empty: "now it has one", kept: "one"}
    store.delete(kept)
    assert [s["sessionId"] for s in walk(store, cwd)] == [empty]
    index = store.root / INDEX_NAME
    index.write_text("{not json")
    assert [s["sessionId"] for s in walk(SessionStore(tmp_path / "state"), cwd)] == [empty]
    assert json.loads(index.read_text())["sessions"].keys() == {empty}
    assert oct(os.stat(index).st_mode & 0o777) == "0o600"


def test_an_index_that_lies_is_corrected_by_the_logs_stamp(tmp_path):
    store = SessionStore(tmp_path / "state")
    cwd = str(tmp_path)
    sid = make(store, cwd, "real title")
    walk(store, cwd)
    index = store.root / INDEX_NAME
    data = json.loads(index.read_text())
    data["sessions"][sid]["title"] = "forged"
    data["sessions"][sid]["stamp"][0] -= 1  # no longer the log's stamp
    index.write_text(json.dumps(data))
    assert walk(SessionStore(tmp_path / "state"), cwd)[0]["title"] == "real title"


def test_the_first_session_list_after_a_new_session_encoded_the_whole_index_before_answering(tmp_path):
    """Issue 31 item 7 (the cold first page): a listing that found a new session rewrote the
    2,000-entry index file before the page was answered (a third of the page's time, with
    ``json.dump``'s pure-Python encoder). With ``defer_save`` (what ``session/list`` passes) the page
    is made first and the file written by ``save_listing()``, after the answer."""
    store = SessionStore(tmp_path / "state")
    first = make(store, str(tmp_path), "one")
    assert [s["sessionId"] for s in list_sessions(store, None)[0]] == [first]
    index = store.root / INDEX_NAME
    before = index.read_bytes()
    second = make(store, str(tmp_path), "two")
    assert [s["sessionId"] for s in list_sessions(store, None, defer_save=True)[0]] == [second, first]
    assert index.read_bytes() == before  # not yet
    store.save_listing()
    assert set(json.loads(index.read_bytes())["sessions"]) == {first, second}
    store.save_listing()  # nothing left to write: a no-op


def test_a_listing_rewrote_the_index_file_for_logs_only_appended_to(tmp_path):
    """Issue 31 item 7: every session appended to after its first prompt made the next listing
    rewrite the whole index file, though only its stamp changed. The stamp is refreshed in memory
    (the list is right, ordered by the new time); the file is left as it is."""
    store = SessionStore(tmp_path / "state")
    old, new = make(store, str(tmp_path), "old"), make(store, str(tmp_path), "new")
    list_sessions(store, None)
    index = store.root / INDEX_NAME
    written = index.stat().st_mtime_ns, index.read_bytes()
    log = EventLog.open(store.log_path(old))
    log.append("user", {"turn": 2, "content": "again", "blocks": [{"type": "text", "text": "again"}]})
    log.close()
    for fresh in (store, SessionStore(tmp_path / "state")):  # this process, and another
        assert [s["sessionId"] for s in list_sessions(fresh, None)[0]] == [old, new]
    assert (index.stat().st_mtime_ns, index.read_bytes()) == written
