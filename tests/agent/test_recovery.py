"""Closing interrupted turns (agent/recovery.py) on hand-made logs: what a dead process leaves."""

from agent_server.agent.recovery import close_open_turn, open_calls
from agent_server.offline._validate import history_problem
from agent_server.session import EventLog, derive_messages
from agent_server.llm import encode_body

CALLS = [{"id": "c1", "name": "bash", "arguments": '{"command": "make"}'},
         {"id": "c2", "name": "write", "arguments": '{"path": "a", "content": "x"}'},
         {"id": "c3", "name": "read", "arguments": '{"path": "b"}'}]


def make(tmp_path, events):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    for kind, data in events:
        log.append(kind, data)
    return log


def turn_with_calls(logged_calls=2, results=0):
    events = [("turn/start", {"turn": 1}), ("user", {"turn": 1, "content": "build it"}),
              ("step/start", {"turn": 1, "step": 1}),
              ("assistant", {"turn": 1, "step": 1, "text": "", "tool_calls": CALLS}),
              ("step/end", {"turn": 1, "step": 1})]
    for c in CALLS[:logged_calls]:  # each announced, then allowed by the policy (the pipeline's guard), then run
        events += [("tool/call", {"turn": 1, "call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}),
                   ("policy/decision", {"call_id": c["id"], "tool": c["name"], "outcome": "allow", "decided_by": "policy"})]
    events += [("tool/result", {"turn": 1, "call_id": c["id"], "tool_call_id": "tc-x", "name": c["name"],
                                "status": "completed", "content": "ok"}) for c in CALLS[:results]]
    return events


def valid(log):
    body = {"messages": [{"role": "system", "content": "S"}, *derive_messages(log.events),
                         {"role": "user", "content": "next"}]}
    return history_problem(encode_body(body))


def test_crash_between_tool_call_and_tool_result_leaves_no_dangling_call(tmp_path):
    log = make(tmp_path, turn_with_calls(logged_calls=2, results=1))
    assert valid(log) is not None  # as the dead process left it, a provider would refuse it
    before = log.path.read_bytes()
    recovery = close_open_turn(log)
    assert log.path.read_bytes().startswith(before)  # appended, never truncated
    assert valid(log) is None
    assert [(e.data["call_id"], e.data["reason"]) for e in recovery.results] == [("c2", "interrupted"), ("c3", "aborted")]
    assert recovery.results[0].data["tool_call_id"] == f"tc-{[e for e in log.events if e.type == 'tool/call'][1].seq}"
    assert "ABORTED_BEFORE_DISPATCH" in recovery.results[1].data["content"]
    notice = recovery.notice.data
    assert notice["reason"] == "interrupted" and notice["not_run"] == ["c3"] and notice["may_have_run"] == ["c2"]
    assert "write (call c2)" in notice["text"] and "read (call c3)" in notice["text"]
    assert log.events[-1].type == "turn/end" and log.events[-1].data == {"turn": 1, "exit": "interrupted"}
    assert open_calls(log.events) == []


def test_a_call_still_waiting_for_permission_when_the_server_died_was_said_to_have_maybe_run(tmp_path):
    """Newcomer 6 finding 9: ``cat .env && echo …`` asked before it ran (a secret file); the server was
    killed while the question waited; the card and the model were told it "may have had part or all of
    its effect" — though nothing allowed it, so it never ran. A call announced without its policy's
    ``allow`` did not run."""
    events = turn_with_calls(logged_calls=1)
    events += [("tool/call", {"turn": 1, "call_id": "c2", "name": "write", "arguments": CALLS[1]["arguments"]})]
    log = make(tmp_path, events)
    recovery = close_open_turn(log)
    assert [(e.data["call_id"], e.data["reason"]) for e in recovery.results] == [
        ("c1", "interrupted"), ("c2", "aborted"), ("c3", "aborted")]
    assert "before its permission check let it run" in recovery.results[1].data["content"]
    assert recovery.notice.data["not_run"] == ["c2", "c3"] and recovery.notice.data["may_have_run"] == ["c1"]
    assert valid(log) is None


def test_crash_before_any_tool_call_was_logged_says_none_of_them_ran(tmp_path):
    log = make(tmp_path, turn_with_calls(logged_calls=0))
    recovery = close_open_turn(log)
    assert [e.data["reason"] for e in recovery.results] == ["aborted"] * 3
    assert recovery.notice.data["not_run"] == ["c1", "c2", "c3"] and recovery.notice.data["may_have_run"] == []
    assert valid(log) is None


def test_crash_mid_stream_says_the_reply_was_lost_and_adds_no_message_of_its_own(tmp_path):
    log = make(tmp_path, [("turn/start", {"turn": 1}), ("user", {"turn": 1, "content": "hi"}),
                          ("step/start", {"turn": 1, "step": 1})])
    before = derive_messages(log.events)
    recovery = close_open_turn(log)
    after = derive_messages(log.events)
    assert after[:-1] == before and after[-1]["role"] == "user"
    assert after[-1]["content"].startswith("[agent-server notice] The previous turn was interrupted")
    assert recovery.notice.data["reply_lost"] is True and recovery.results == []


def test_log_whose_last_turn_ended_is_left_untouched(tmp_path):
    log = make(tmp_path, [("turn/start", {"turn": 1}), ("user", {"turn": 1, "content": "hi"}),
                          ("turn/end", {"turn": 1, "exit": "end_turn"})])
    size = log.path.stat().st_size
    assert not close_open_turn(log).changed
    assert log.path.stat().st_size == size


def test_prompt_queued_when_the_process_died_is_kept_visible_and_not_run(tmp_path):
    log = make(tmp_path, [("turn/start", {"turn": 1}), ("user", {"turn": 1, "content": "one"}),
                          ("inbox/queued", {"content": "two", "blocks": [{"type": "text", "text": "two"}]}),
                          ("inbox/queued", {"content": "three", "blocks": []})])
    recovery = close_open_turn(log)
    assert [e.data["content"] for e in recovery.dropped] == ["two", "three"]
    assert [e.data["queued_seq"] for e in recovery.dropped] == [4, 5]
    assert all(e.data["reason"] == "process_ended" for e in recovery.dropped)
    assert not any(m["content"] in ("two", "three") for m in derive_messages(log.events))  # never projected
    assert not close_open_turn(log).changed  # a second load changes nothing


def test_replay_checks_each_rebuilt_request_not_only_its_bytes():
    from agent_server.agent.replay import request_problem
    call = {"id": "A", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    ok = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                       {"role": "assistant", "content": None, "tool_calls": [call]},
                       {"role": "tool", "tool_call_id": "A", "content": "r"}]}
    assert request_problem(ok) is None
    dangling = {"messages": ok["messages"][:3] + [{"role": "user", "content": "again"}]}
    assert "A" in request_problem(dangling) and "no result" in request_problem(dangling)
    assert "no result" in request_problem({"messages": ok["messages"][:3]})
    stray = {"messages": ok["messages"][:2] + [{"role": "tool", "tool_call_id": "Z", "content": "r"}]}
    assert "no pending call" in request_problem(stray)
    empty = {"messages": ok["messages"][:2] + [{"role": "assistant", "content": ""}]}
    assert "empty assistant" in request_problem(empty)
