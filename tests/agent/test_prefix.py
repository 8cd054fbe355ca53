"""``agent.prefix.prefix_report``: each request against the previous one, every break named."""

from agent_server.agent.prefix import prefix_report
from agent_server.session import EventLog

TOOLS = [{"type": "function", "function": {"name": "read"}}]


def header(log, *, system="S", model="a", tools=TOOLS, reasoning="drop", params=None):
    log.append("request/header", {"system": system, "model": model, "params": params or {}, "tools": tools,
                                  "reasoning_content": reasoning})


def turn(log, n, text="q"):
    log.append("turn/start", {"turn": n})
    log.append("user", {"turn": n, "content": f"{text} {n}"})
    log.append("step/start", {"turn": n, "step": 1})
    log.append("assistant", {"turn": n, "step": 1, "text": f"answer {n}", "reasoning": "r", "tool_calls": [],
                             "finish_reason": "stop", "usage": None})
    log.append("turn/end", {"turn": n, "exit": "end_turn"})


def new_log(tmp_path):
    return EventLog.create(tmp_path / "events.jsonl", {"cwd": "/w", "additional_directories": []})


def test_requests_that_extend_have_no_break_and_a_model_of_the_same_shape_is_none(tmp_path):
    log = new_log(tmp_path)
    header(log)
    turn(log, 1)
    turn(log, 2)
    header(log, model="b")  # another model of the same request shape: tools and messages byte-equal
    turn(log, 3)
    report = prefix_report(log.events)
    assert report.breaks == {} and [r["extends"] for r in report.requests] == [True, True]


def test_each_break_is_named_by_what_the_log_says_happened(tmp_path):
    log = new_log(tmp_path)
    header(log)
    turn(log, 1)
    turn(log, 2)
    header(log, model="c", reasoning="echo")  # its reasoning goes back to the provider: other messages
    turn(log, 3)
    more = TOOLS + [{"type": "function", "function": {"name": "mcp"}}]
    header(log, model="c", reasoning="echo", tools=more)
    turn(log, 4)
    log.append("mode/changed", {"from": "workspace-write", "to": "read-only", "by": "/mode"})
    header(log, system="S2", model="c", reasoning="echo", tools=more)  # the old code: the system text rewritten
    turn(log, 5)
    header(log, system="S3", model="c", reasoning="echo", tools=more)  # other roots, nothing else changed
    turn(log, 6)
    log.append("compaction/end", {"first_seq": 3, "last_seq": 20, "message": "[checkpoint]"})
    turn(log, 7)
    report = prefix_report(log.events)
    assert [r["break"] for r in report.requests] == [None, "model", "tools", "unplanned", "system", "compaction"]
    assert report.unplanned == 1 and 0 < report.share < 1


def test_a_params_change_is_named_only_when_the_log_says_the_configuration_changed(tmp_path):
    log = new_log(tmp_path)
    header(log, params={"temperature": 0.2})
    turn(log, 1)
    header(log, params={"temperature": 0.7})  # [agent] params edited, nothing logged: unexplained
    turn(log, 2)
    log.append("params/changed", {"from": {"temperature": 0.7}, "to": {"temperature": 0.9}})
    header(log, params={"temperature": 0.9})
    turn(log, 3)
    assert [r["break"] for r in prefix_report(log.events).requests] == ["unplanned", "params"]
