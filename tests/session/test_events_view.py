"""``EventLog.events`` is a snapshot made in O(1) (``session.view.Prefix``), not a copy of the
whole log per read (issue 14: a late turn of a long session copied its log several times), and
the log's indexes (``latest``, ``count``) equal a walk of it after every append."""

from __future__ import annotations

import pytest

from agent_server.session import EventLog
from agent_server.session.view import Prefix


def test_a_prefix_reads_as_the_tuple_of_its_items_and_ignores_later_appends():
    items = list(range(10))
    view = Prefix(items, 6)
    items += [10, 11]
    expected = (0, 1, 2, 3, 4, 5)
    assert len(view) == 6 and tuple(view) == expected and list(reversed(view)) == list(reversed(expected))
    assert view[-1] == 5 and view[0] == 0 and view[2:4] == (2, 3) and view[4:] == (4, 5) and view[::-2] == (5, 3, 1)
    assert view == expected and view == list(expected) and view != (0, 1) and 5 in view and 7 not in view
    assert view.index(3) == 3 and view.count(1) == 1
    for bad in (6, -7):
        with pytest.raises(IndexError):
            view[bad]


def test_the_log_events_are_a_snapshot_and_its_indexes_equal_a_walk(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    kinds = ["turn/start", "user", "step/start", "assistant", "turn/end", "notice", "user"]
    snapshots = []
    for i, kind in enumerate(kinds * 3):
        data = {"turn": i, "content": "x", "text": "t"} if kind != "assistant" else {"turn": i, "text": "a"}
        log.append(kind, data)
        snapshots.append((log.events, len(log)))
        events = list(log.events)
        for each in set(kinds) | {"session/header", "absent"}:
            walked = [e for e in events if e.type == each]
            assert log.count(each) == len(walked)
            assert log.latest(each) is (walked[-1] if walked else None)
    for view, n in snapshots:  # taken before the appends after them
        assert len(view) == n and view[-1].seq == n and [e.seq for e in view] == list(range(1, n + 1))
