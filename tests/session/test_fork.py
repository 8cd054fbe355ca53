"""Forks on the log: the prefix a fork keeps, copied verbatim into a new log; the parent untouched."""

import os
import stat

import pytest

from agent_server.session import EventLog, ForkError, SessionStore, derive_messages, fork_history


def three_turns(tmp_path):
    store = SessionStore(tmp_path)
    sid, log = store.create({"cwd": "/w"})
    log.append("mode/changed", {"from": None, "to": "workspace-write", "by": "default_mode"})
    for turn in (1, 2, 3):
        log.append("turn/start", {"turn": turn})
        log.append("user", {"turn": turn, "content": f"q{turn}"})
        log.append("assistant", {"turn": turn, "step": 1, "text": f"a{turn}", "tool_calls": []})
        log.append("turn/end", {"turn": turn, "exit": "end_turn"})
    return store, sid, log


def test_fork_at_a_named_turn_keeps_everything_up_to_its_end_and_nothing_after(tmp_path):
    _, _, log = three_turns(tmp_path)
    point = fork_history(log.events, 2)
    assert point.turn == 2 and point.history[-1].type == "turn/end" and point.history[-1].data["turn"] == 2
    assert [e.seq for e in point.history] == list(range(2, point.seq + 1))
    assert [m["content"] for m in derive_messages(point.history)] == ["q1", "a1", "q2", "a2"]


def test_fork_without_a_turn_takes_the_whole_idle_log_but_leaves_a_running_turn_out(tmp_path):
    _, _, log = three_turns(tmp_path)
    assert fork_history(log.events).seq == log.last_seq
    log.append("turn/start", {"turn": 4})
    log.append("user", {"turn": 4, "content": "q4"})
    point = fork_history(log.events)
    assert point.turn == 3 and point.history[-1].type == "turn/end"


def test_fork_at_a_turn_that_did_not_end_is_refused_with_the_closed_turns(tmp_path):
    _, _, log = three_turns(tmp_path)
    log.append("turn/start", {"turn": 4})
    with pytest.raises(ForkError, match=r"turn 4 .*closed turns: 1, 2, 3"):
        fork_history(log.events, 4)
    with pytest.raises(ForkError):
        fork_history(log.events, 0)


def test_fork_log_copies_the_history_verbatim_and_leaves_the_parent_byte_identical(tmp_path):
    store, parent_id, log = three_turns(tmp_path)
    before = log.path.read_bytes()
    point = fork_history(log.events, 2)
    fork_id, fork = store.create_fork({"cwd": "/w", "forked_from": {"session_id": parent_id, "turn": 2,
                                                                    "seq": point.seq}}, point.history)
    assert fork_id != parent_id
    assert fork.events[0].data["forked_from"]["session_id"] == parent_id
    assert fork.events[0].data["session_id"] == fork_id
    parent_lines = before.split(b"\n")
    fork_lines = fork.path.read_bytes().split(b"\n")
    assert fork_lines[1:point.seq] == parent_lines[1:point.seq]  # byte for byte
    fork.append("turn/start", {"turn": 3})
    assert fork.events[-1].seq == point.seq + 1
    assert log.path.read_bytes() == before
    assert stat.S_IMODE(os.stat(fork.path).st_mode) == 0o600
    fork.close()
    reopened = EventLog.open(fork.path)
    assert [e.seq for e in reopened.events] == list(range(1, point.seq + 2))


def test_create_from_refuses_a_history_with_a_gap(tmp_path):
    _, _, log = three_turns(tmp_path)
    with pytest.raises(ValueError, match="without gaps"):
        EventLog.create_from(tmp_path / "f" / "events.jsonl", {"cwd": "/w"}, log.events[2:5])


def test_replay_of_a_fork_lists_only_the_requests_the_fork_made(tmp_path):
    from agent_server.agent.replay import logged_requests

    store = SessionStore(tmp_path)
    _, parent = store.create({"cwd": "/w"})
    for turn in (1, 2):
        parent.append("turn/start", {"turn": turn})
        parent.append("user", {"turn": turn, "content": f"q{turn}"})
        parent.append("request/header", {"system": "S", "model": "m", "params": {}, "tools": [],
                                         "reasoning_content": "drop"})
        parent.append("step/start", {"turn": turn, "step": 1})
        parent.append("assistant", {"turn": turn, "step": 1, "text": f"a{turn}", "tool_calls": []})
        parent.append("turn/end", {"turn": turn, "exit": "end_turn"})
    point = fork_history(parent.events, 1)
    _, fork = store.create_fork({"cwd": "/w", "forked_from": {"session_id": "p", "turn": 1, "seq": point.seq}},
                                point.history)
    fork.append("turn/start", {"turn": 2})
    fork.append("user", {"turn": 2, "content": "q2"})
    fork.append("step/start", {"turn": 2, "step": 1})
    fork.append("assistant", {"turn": 2, "step": 1, "text": "other", "tool_calls": []})
    fork.append("turn/end", {"turn": 2, "exit": "end_turn"})
    parent_requests = logged_requests(parent.events)
    own = logged_requests(fork.events)
    assert [(r.turn, r.step_index) for r in own] == [(2, 2)]
    assert own[0].body == parent_requests[1].body  # same history, same header: the same bytes
    assert len(logged_requests(fork.events, inherited=True)) == 2
