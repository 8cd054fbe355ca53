"""derive_messages: the projection rules of DESIGN.md §3."""

from agent_server.session import EventLog, derive_messages


def make(tmp_path, events):
    log = EventLog.create(tmp_path / "events.jsonl", {})
    for kind, data in events:
        log.append(kind, data)
    return log


CALL = {"id": "c1", "name": "read", "arguments": '{"path": "a.py"}'}


def test_user_assistant_tool_result_project_in_log_order(tmp_path):
    log = make(tmp_path, [
        ("turn/start", {"turn": 1}),
        ("user", {"turn": 1, "content": "fix it"}),
        ("step/start", {"turn": 1, "step": 1}),
        ("assistant", {"text": "", "reasoning": "think", "tool_calls": [CALL]}),
        ("tool/call", {"call_id": "c1"}),
        ("tool/result", {"call_id": "c1", "content": "1: x"}),
        ("assistant", {"text": "done", "reasoning": "", "tool_calls": []}),
        ("turn/end", {"turn": 1, "exit": "end_turn"}),
    ])
    assert derive_messages(log.events) == [
        {"role": "user", "content": "fix it"},
        {"role": "assistant", "content": None, "reasoning_content": "think",
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": '{"path": "a.py"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1: x"},
        {"role": "assistant", "content": "done"},
    ]


def test_empty_assistant_message_is_not_projected(tmp_path):
    log = make(tmp_path, [
        ("turn/start", {"turn": 1}),
        ("user", {"turn": 1, "content": "hi"}),
        ("assistant", {"text": "", "reasoning": "only thinking", "tool_calls": []}),
    ])
    assert derive_messages(log.events) == [{"role": "user", "content": "hi"}]


def test_refused_turn_is_left_out_from_its_user_message_on(tmp_path):
    log = make(tmp_path, [
        ("turn/start", {"turn": 1}),
        ("user", {"turn": 1, "content": "first"}),
        ("assistant", {"text": "ok", "tool_calls": []}),
        ("turn/end", {"turn": 1, "exit": "end_turn"}),
        ("turn/start", {"turn": 2}),
        ("user", {"turn": 2, "content": "bad"}),
        ("assistant", {"text": "partial", "tool_calls": []}),
        ("turn/end", {"turn": 2, "exit": "refusal"}),
        ("turn/start", {"turn": 3}),
        ("user", {"turn": 3, "content": "third"}),
    ])
    assert [m["content"] for m in derive_messages(log.events)] == ["first", "ok", "third"]


def test_projection_is_a_fresh_view_every_time(tmp_path):
    log = make(tmp_path, [("turn/start", {"turn": 1}), ("user", {"turn": 1, "content": "hi"})])
    first = derive_messages(log.events)
    first[0]["content"] = "mutated"
    assert derive_messages(log.events)[0]["content"] == "hi"


def test_a_result_appended_after_later_turns_is_projected_right_after_its_call(tmp_path):
    # a tool/result lost to a full disk, the turn ended anyway (old code), a later turn failed, then
    # recovery appended the synthetic result: the request must still carry it right after its call
    log = make(tmp_path, [
        ("turn/start", {"turn": 1}),
        ("user", {"turn": 1, "content": "read"}),
        ("assistant", {"text": "", "tool_calls": [CALL, {**CALL, "id": "c2"}]}),
        ("tool/result", {"call_id": "c1", "content": "one"}),
        ("turn/end", {"turn": 1, "exit": "error"}),
        ("turn/start", {"turn": 2}),
        ("user", {"turn": 2, "content": "again"}),
        ("turn/end", {"turn": 2, "exit": "error"}),
        ("tool/result", {"call_id": "c2", "content": "lost"}),
        ("notice", {"text": "the log could not be written"}),
    ])
    assert [(m["role"], m.get("tool_call_id"), m.get("content")) for m in derive_messages(log.events)] == [
        ("user", None, "read"), ("assistant", None, None), ("tool", "c1", "one"), ("tool", "c2", "lost"),
        ("user", None, "again"), ("user", None, "[agent-server notice] the log could not be written")]


def test_a_stray_result_stays_where_it_is(tmp_path):
    log = make(tmp_path, [("user", {"content": "q"}), ("tool/result", {"call_id": "nobody", "content": "x"})])
    assert [m["role"] for m in derive_messages(log.events)] == ["user", "tool"]


def test_the_memo_moves_a_late_result_to_its_call_like_the_full_projection(tmp_path):
    from agent_server.session import ProjectionMemo, surface_messages
    log = make(tmp_path, [
        ("turn/start", {"turn": 1}), ("user", {"turn": 1, "content": "read"}),
        ("assistant", {"text": "", "tool_calls": [CALL, {**CALL, "id": "c2"}]}),
        ("tool/result", {"call_id": "c1", "content": "one"}), ("turn/end", {"turn": 1, "exit": "error"}),
        ("turn/start", {"turn": 2}), ("user", {"turn": 2, "content": "again"}),
        ("turn/end", {"turn": 2, "exit": "refusal"}),
        ("tool/result", {"call_id": "c2", "content": "lost"}), ("notice", {"text": "n"}),
    ])
    memo, events = ProjectionMemo(), list(log.events)
    for n in range(1, len(events) + 1):
        assert memo.surface(events[:n]) == surface_messages(events[:n])


def test_a_middle_line_of_the_wrong_shape_is_log_corrupt_at_its_line_and_the_open_changes_nothing(tmp_path):
    import pytest

    from agent_server.session import LogCorruptError, ProjectionMemo

    log = make(tmp_path, [
        ("turn/start", {"turn": 1}),
        ("user", {"turn": 1, "content": "fix it"}),
        ("assistant", {"text": "", "tool_calls": [CALL]}),
        ("tool/result", {"oops": 1}),  # seq 5: valid JSON, wrong shape
        ("turn/end", {"turn": 1, "exit": "end_turn"}),
    ])
    log.close()
    with pytest.raises(LogCorruptError) as raised:
        derive_messages(log.events)
    assert raised.value.line == 5 and str(raised.value) == "line 5: tool/result event: no call_id"
    with open(log.path, "ab") as f:
        f.write(b'{"type":"turn/st')  # a torn tail: a refused open must not repair it
    before = log.path.read_bytes()
    with pytest.raises(LogCorruptError) as raised:
        EventLog.open(log.path, ProjectionMemo().shared)
    assert (raised.value.path, raised.value.line) == (log.path, 5)
    assert log.path.read_bytes() == before
    EventLog.open(log.path).close()  # the lock was let go


def test_a_header_note_is_a_user_message_where_it_was_logged_and_its_inputs_are_never_messages(tmp_path):
    log = make(tmp_path, [
        ("mode/changed", {"from": None, "to": "workspace-write", "by": "default_mode"}),
        ("project/instructions", {"files": [{"path": "/w/AGENTS.md", "sha256": "ab", "text": "tabs"}]}),
        ("sandbox/status", {"level": "none"}),
        ("user", {"turn": 1, "content": "hi"}),
        ("assistant", {"text": "", "reasoning": "", "tool_calls": [CALL]}),
        ("mode/changed", {"from": "workspace-write", "to": "read-only", "by": "/mode"}),  # while it ran
        ("tool/result", {"call_id": "c1", "content": "x"}),
        ("header/note", {"changes": ["mode"], "text": "- Mode: read-only"}),
    ])
    assert [m["role"] for m in derive_messages(log.events)] == ["user", "assistant", "tool", "user"]
    assert derive_messages(log.events)[-1] == {"role": "user", "content": "[agent-server notice] - Mode: read-only"}
