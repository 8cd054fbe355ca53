"""Regressions found by breaking the real server from the outside; each test names the failure."""

import json
import signal

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.session import EventLog, read_events


def init(agent):
    assert agent.request("initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1


def new_session(agent, workspace):
    return agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]


def prompt_params(sid, text="hi"):
    return {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}


def test_deeply_nested_json_is_a_parse_error_not_a_crash(raw_agent_factory):
    deep = "[" * 200_000 + "]" * 200_000
    first = raw_agent_factory()
    first.send_line(deep)  # as the very first line: the start-up fast path must survive it too
    assert first.recv()["error"]["code"] == -32700
    init(first)
    later = raw_agent_factory()
    init(later)
    later.send_line(deep)
    assert later.recv()["error"]["code"] == -32700
    init(later)


def test_lone_surrogate_in_request_id_is_answered_not_a_crash(raw_agent_factory):
    agent = raw_agent_factory()
    agent.send_line('{"jsonrpc":"2.0","id":"\\ud800","method":"initialize","params":{}}')
    assert agent.recv()["result"]["protocolVersion"] == 1
    agent.send_line('{"jsonrpc":"2.0","id":"\\udc80x","method":"nope"}')
    assert agent.recv()["error"]["code"] == -32601
    init(agent)


def test_nan_is_not_accepted_as_json(raw_agent_factory):
    agent = raw_agent_factory()
    init(agent)
    agent.send_line('{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"x":NaN}}')
    assert agent.recv()["error"]["code"] == -32700


def test_unknown_log_level_falls_back_instead_of_dying_after_initialize(raw_agent_factory, workspace):
    agent = raw_agent_factory(env={"AGENT_SERVER_LOG_LEVEL": "LOUD"})
    init(agent)
    assert new_session(agent, workspace).startswith("sess_")  # may be answered before logging is set up
    assert "sessions" in agent.request("session/list", {})["result"]  # the full server's, after it
    assert "unknown AGENT_SERVER_LOG_LEVEL" in agent.stderr_text()


def test_empty_prompt_is_invalid_params(raw_agent_factory, workspace):
    agent = raw_agent_factory()
    init(agent)
    sid = new_session(agent, workspace)
    error = agent.request("session/prompt", {"sessionId": sid, "prompt": []})["error"]
    assert error["code"] == -32602


def test_lone_surrogate_in_prompt_text_still_closes_the_turn(raw_agent_factory, workspace, agent_state_dir):
    with OfflineEndpoint.start_in_thread([text_stream("ok")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        agent.send_line(json.dumps({"jsonrpc": "2.0", "id": 77, "method": "session/prompt",
                                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "bad \udc80"}]}}))
        assert agent.response(77)["result"]["stopReason"] == "end_turn"
        body = ep.requests[0].json()
    assert body["messages"][-1]["content"] == "bad \ufffd"
    agent.close()
    events = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl").events
    assert [e.type for e in events if e.type.startswith("turn/")] == ["turn/start", "turn/end"]


def streaming(message):
    """The agent is streaming an answer (not just announcing commands after session/new)."""
    return message.get("method") == "session/update" and \
        message["params"]["update"]["sessionUpdate"] == "agent_message_chunk"


def slow(text="slow ", delay=0.02):
    return text_stream(text * 300, chunk_size=5, delay=delay)


def test_cancel_request_on_a_queued_prompt_cancels_only_that_prompt(raw_agent_factory, workspace):
    with OfflineEndpoint.start_in_thread([slow(), text_stream("third")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        running = agent.send_request("session/prompt", prompt_params(sid, "one"))
        queued = agent.send_request("session/prompt", prompt_params(sid, "two"))
        agent.recv_until(streaming)
        agent.notify("$/cancel_request", {"requestId": queued})
        assert agent.response(queued)["result"]["stopReason"] == "cancelled"
        assert agent.response(running)["result"]["stopReason"] == "end_turn"
        assert len(ep.requests) == 1  # the cancelled prompt never reached the model


def test_session_cancel_also_cancels_queued_prompts(raw_agent_factory, workspace):
    with OfflineEndpoint.start_in_thread([slow(), text_stream("later")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        first = agent.send_request("session/prompt", prompt_params(sid, "one"))
        second = agent.send_request("session/prompt", prompt_params(sid, "two"))
        agent.recv_until(streaming)
        agent.notify("session/cancel", {"sessionId": sid})
        assert agent.response(first)["result"]["stopReason"] == "cancelled"
        assert agent.response(second)["result"]["stopReason"] == "cancelled"
        assert len(ep.requests) == 1
        after = agent.request("session/prompt", prompt_params(sid, "three"))
        assert after["result"]["stopReason"] == "end_turn"


def test_closing_stdin_cancels_queued_prompts_and_exits(raw_agent_factory, workspace, agent_state_dir):
    # 300 chunks 0.4 s apart: the turn cannot end by itself before the process does (how fast it
    # exits is bench/cancel_latency.py's `stdin` figure)
    with OfflineEndpoint.start_in_thread([slow(delay=0.4), slow(delay=0.4)]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        agent.send_request("session/prompt", prompt_params(sid, "one"))
        agent.send_request("session/prompt", prompt_params(sid, "two"))
        agent.recv_until(streaming)
        agent.close_stdin()
        assert agent.wait_exit() == 0
        assert len(ep.requests) == 1
    events = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl").events
    assert [e.data["exit"] for e in events if e.type == "turn/end"] == ["cancelled"]


def test_sigterm_mid_prompt_closes_the_turn_in_the_log_and_answers_the_prompt(raw_agent_factory, workspace, agent_state_dir):
    with OfflineEndpoint.start_in_thread([slow()]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        rid = agent.send_request("session/prompt", prompt_params(sid))
        agent.recv_until(streaming)
        agent.process.send_signal(signal.SIGTERM)
        assert agent.response(rid)["result"]["stopReason"] == "cancelled"
        assert agent.wait_exit() == 0
    events = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl").events
    assert events[-1].type == "turn/end" and events[-1].data["exit"] == "cancelled"
    streamed = [e for e in events if e.type == "assistant"]
    assert streamed and streamed[0].data["interrupted"] and streamed[0].data["text"].startswith("slow")


def test_prompt_and_its_cancel_request_in_one_write_is_answered_cancelled(raw_agent_factory, workspace):
    with OfflineEndpoint.start_in_thread([text_stream("late")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        both = (json.dumps({"jsonrpc": "2.0", "id": 100, "method": "session/prompt", "params": prompt_params(sid)}) + "\n"
                + json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 100}}))
        agent.send_line(both)
        assert agent.response(100)["result"]["stopReason"] == "cancelled"
        after = agent.request("session/prompt", prompt_params(sid, "again"))
        assert after["result"]["stopReason"] == "end_turn"


def test_shell_commands_cannot_see_the_api_key(raw_agent_factory, workspace, agent_state_dir):
    command = tool_call_stream([("c1", "bash", json.dumps({"command": "env; echo done"}))])
    with OfflineEndpoint.start_in_thread([command, text_stream("ok")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_API_KEY": "sk-SECRETKEY123",
                                       "OTHER_VAR_WITH_KEY": "Bearer sk-SECRETKEY123"})
        init(agent)
        sid = new_session(agent, workspace)
        assert agent.request("session/prompt", prompt_params(sid))["result"]["stopReason"] == "end_turn"
        shown = [m for m in ep.requests[1].json()["messages"] if m["role"] == "tool"][0]["content"]
    assert "done" in shown and "PATH=" in shown
    assert "sk-SECRETKEY123" not in shown
    assert "sk-SECRETKEY123" not in (agent_state_dir / "sessions" / sid / "events.jsonl").read_text()


def test_folder_wide_grep_leaves_secret_files_out(raw_agent_factory, workspace):
    (workspace / ".env").write_text("TOKEN=abc123\n")
    (workspace / "app.py").write_text("TOKEN = read_token()\n")
    command = tool_call_stream([("c1", "grep", json.dumps({"pattern": "TOKEN"}))])
    with OfflineEndpoint.start_in_thread([command, text_stream("ok")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        assert agent.request("session/prompt", prompt_params(sid))["result"]["stopReason"] == "end_turn"
        shown = [m for m in ep.requests[1].json()["messages"] if m["role"] == "tool"][0]["content"]
    assert "app.py:1:" in shown and "abc123" not in shown
    assert "not searched: 1 file(s) that may hold secrets (.env)" in shown


def test_a_queued_prompts_answer_reached_the_client_before_the_response_to_the_turn_it_waited_for(
        raw_agent_factory, workspace):
    """Regression (CI, the Neovim transcript test): when a turn ended, the prompt queued behind it
    started while the ended turn still did its end-of-turn work (the git-hook summary, a thread
    running git; the title), so the queued turn's first chunks reached the client before the first
    prompt's response, and a client drew them inside the first answer. A turn's response is now on
    the wire before the next queued turn sends anything."""
    import subprocess

    from support.transcript import AGENT_TO_CLIENT

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run(["git", "-C", str(workspace), "config", "core.hooksPath", ".husky"], check=True)
    (workspace / ".husky").mkdir()
    (workspace / ".husky" / "pre-commit").write_text("#!/bin/sh\n./check.sh\n")
    (workspace / "check.sh").write_text("#!/bin/sh\ntrue\n")
    bash = ("sh", "bash", json.dumps({"command": "echo 'true # changed' > check.sh"}))
    with OfflineEndpoint.start_in_thread([tool_call_stream([bash]), text_stream("A done"),
                                          text_stream("B answer")]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        first = agent.send_request("session/prompt", prompt_params(sid, "one"))
        second = agent.send_request("session/prompt", prompt_params(sid, "two"))
        assert agent.response(second)["result"]["stopReason"] == "end_turn"
        assert agent.response(first)["result"]["stopReason"] == "end_turn"
    sent = [r.message for r in agent.transcript.snapshot() if r.direction == AGENT_TO_CLIENT]
    answered = next(i for i, m in enumerate(sent) if m.get("id") == first and "result" in m)
    texts = [(i, m["params"]["update"]["content"]["text"]) for i, m in enumerate(sent)
             if m.get("method") == "session/update" and m["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert any("changed files that your git hooks run" in t for i, t in texts if i < answered)  # A's own summary
    b_first = min(i for i, t in texts if "B answer" in t)
    assert answered < b_first, [m.get("id") or m["params"]["update"]["sessionUpdate"] for m in sent[answered - 5:]]


def chunk_text(message, kind="agent_message_chunk"):
    """The text of a ``session/update`` of ``kind``, else ``None``."""
    if message.get("method") != "session/update" or message["params"]["update"]["sessionUpdate"] != kind:
        return None
    return message["params"]["update"]["content"]["text"]


def test_sigkill_mid_answer_then_load_replays_the_streamed_text_and_the_next_request_holds_it(
        raw_agent_factory, workspace, agent_state_dir):
    """Regression (newcomer finding F3): the answer was streaming ("slow word 0…39" in the panel),
    the server got SIGKILL; after a reload the turn showed only "[agent-server] The turn was
    interrupted…" — the text the user had read was gone and the log held none of it (a SIGTERM logs
    it as an interrupted ``assistant`` event; a kill left nothing). The stream journal keeps it:
    the load replays it as the turn's answer and the next request holds it as a SIGTERM leaves it."""
    answer = "".join(f"slow word {i}. " for i in range(40))
    stream = text_stream(answer, chunk_size=6, reasoning="Thinking it over first.", delay=0.05)
    with OfflineEndpoint.start_in_thread([stream]) as ep:
        agent = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep.base_url})
        init(agent)
        sid = new_session(agent, workspace)
        agent.send_request("session/prompt", prompt_params(sid))
        received = ""
        while "slow word 5." not in received:  # synchronised on what the client has, not on time
            received += chunk_text(agent.recv()) or ""
        agent.process.send_signal(signal.SIGKILL)
        assert agent.wait_exit() == -signal.SIGKILL
    with OfflineEndpoint.start_in_thread([text_stream("continuing")]) as ep2:
        again = raw_agent_factory(env={"AGENT_SERVER_BASE_URL": ep2.base_url})
        init(again)
        rid = again.send_request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
        replayed: dict[str, str] = {}
        thought = ""
        while True:
            message = again.recv()
            if message.get("id") == rid:
                assert "result" in message, message
                break
            text = chunk_text(message)
            if text is not None:
                key = message["params"]["update"].get("messageId") or "notice"
                replayed[key] = replayed.get(key, "") + text
            thought += chunk_text(message, "agent_thought_chunk") or ""
        assert again.request("session/prompt", prompt_params(sid, "continue"))["result"]["stopReason"] \
            == "end_turn"
        sent = ep2.requests[0].json()["messages"]
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    kept = [e for e in events if e.type == "assistant" and e.data.get("interrupted")]
    assert len(kept) == 1
    text = kept[0].data["text"]
    assert text.startswith(received) and answer.startswith(text)  # all the user saw; nothing invented
    assert kept[0].data["reasoning"] == "Thinking it over first."
    step = next(e for e in events if e.type == "step/start")
    assert replayed[f"msg-{step.seq}"] == text and thought == "Thinking it over first."
    assert "interrupted" in replayed.get("notice", "")
    # the next request: the prompt, the streamed text as the assistant's message (as a SIGTERM leaves
    # it: ``_commit_interrupted``'s event, projected), the crash notice, the new prompt
    assert [m["role"] for m in sent[1:]] == ["user", "assistant", "user", "user"]
    assert sent[2]["content"] == text
    assert "Your last reply was cut off where it ends above." in sent[3]["content"]
    assert "was lost" not in sent[3]["content"]
    assert not (agent_state_dir / "sessions" / sid / "stream.journal").exists()
