"""Issue 11 §2c/§2d/§2f on the real server with a scripted model: a provider that breaks its
tool-call indexes, one that trickles forever, one that under-reports ``prompt_tokens``.

Through the official ACP SDK; every endpoint is strict about history (HTTP 400 for a call without
its result) and every request it received must replay byte for byte (tests/e2e/conftest.py).
"""

from __future__ import annotations

import json

import pytest
from acp import RequestError
from support.sessions import assert_valid_history, config_env, events, one_result_per_call

from agent_server.agent.compaction import SUMMARY_SYSTEM
from agent_server.offline import text_stream, tool_call_stream


async def start(factory, endpoint, workspace, env=None):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})})
    await h.initialize()
    return h, (await h.new_session(str(workspace))).session_id


def _frame(delta=None, finish=None, **top):
    choices = [] if delta is None and finish is None else [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    return {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": "m", "choices": choices, **top}


def _tool(index=None, call_id=None, name=None, arguments=None):
    d = {}
    if index is not None:
        d["index"] = index
    if call_id is not None:
        d["id"], d["type"] = call_id, "function"
    fn = {k: v for k, v in (("name", name), ("arguments", arguments)) if v is not None}
    if fn:
        d["function"] = fn
    return _frame({"tool_calls": [d]})


async def test_stream_index_collision_gives_two_valid_calls_not_three(acp_harness_factory, endpoint, workspace,
                                                                      agent_state_dir):
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push({"kind": "sse", "frames": [
        _frame({"role": "assistant", "content": None}),
        _tool(0, "call_A", "read", ""), _tool(0, arguments='{"path": "a.txt"}'),
        _tool(0, "call_B", "grep", '{"pattern'),  # B's first delta at A's index, with a new id
        _tool(1, arguments='": "alpha"}'),  # B's tail at index 1, no id
        _frame({}, "tool_calls"),
    ]})
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    assert (await h.prompt(sid, "look")).stop_reason == "end_turn"
    follow_up = endpoint.requests[-1]
    assert_valid_history(follow_up.body)
    messages = follow_up.json()["messages"]
    (assistant,) = [m for m in messages if m["role"] == "assistant" and m.get("tool_calls")]
    got = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in assistant["tool_calls"]]
    assert got == [("call_A", "read", {"path": "a.txt"}), ("call_B", "grep", {"pattern": "alpha"})]
    results = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    assert set(results) == {"call_A", "call_B"}
    assert "alpha" in results["call_A"] and "a.txt" in results["call_B"]
    one_result_per_call(events(agent_state_dir, sid))


async def test_provider_reporting_tiny_prompt_tokens_does_not_stop_compaction(acp_harness_factory, endpoint,
                                                                             workspace, agent_state_dir):
    tiny = {"prompt_tokens": 1, "completion_tokens": 5, "total_tokens": 6}
    for name in "abc":
        (workspace / f"{name}.txt").write_text(f"{name} line with the helper\n" * 60)
    for i, name in enumerate("abc"):
        endpoint.push(tool_call_stream([(f"r{i}", "read", json.dumps({"path": f"{name}.txt"}))], usage=tiny))
    endpoint.push(text_stream("Task: rename. Files: a-c read.", usage=tiny))
    endpoint.push(text_stream("Renamed.", usage=tiny))
    h, sid = await start(acp_harness_factory, endpoint, workspace, {"AGENT_SERVER_CONTEXT_WINDOW": "4000"})
    assert (await h.prompt(sid, "Rename the helper in the three files.")).stop_reason == "end_turn"
    log = events(agent_state_dir, sid)
    (start_event,) = [e for e in log if e.type == "compaction/start"]
    assert start_event.data["reason"] == "threshold" and start_event.data["estimate"] > 0.8 * 4000
    # every request the model got fits the window by the character estimate
    for request in endpoint.requests:
        assert len(request.body) / 4 <= 4000, len(request.body)
    assert [r.json()["messages"][0]["content"] for r in endpoint.requests][3] == SUMMARY_SYSTEM


def _trickle(text, every=0.2, count=150):
    """One SSE frame (``text``) every ``every`` s, ``count`` times (30 s: "forever" here)."""
    return {"kind": "raw", "writes": [{"text": "data: " + json.dumps(_frame({"role": "assistant", "content": ""})) + "\n\n"}]
            + [{"text": text, "delay": every} for _ in range(count)]}


TRICKLE_LIMITS = """[agent]
no_progress_timeout = 1.0
attempt_timeout = 2.0
max_attempts = 2
retry_base_delay = 0.0
"""


@pytest.mark.parametrize("what", ["keepalive", "empty_delta", "one_token"])
async def test_trickling_provider_times_out_as_network_and_the_session_goes_on(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path, what):
    text = {"keepalive": ": keep-alive\n\n",
            "empty_delta": "data: " + json.dumps(_frame({"content": ""})) + "\n\n",
            "one_token": "data: " + json.dumps(_frame({"content": "x"})) + "\n\n"}[what]
    endpoint.push(_trickle(text))
    endpoint.push(_trickle(text))
    endpoint.push(text_stream("back"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, config_env(tmp_path, TRICKLE_LIMITS))
    with pytest.raises(RequestError) as failed:
        await h.prompt(sid, "hello")
    data = failed.value.data
    assert (data["code"], data["retryable"]) == ("NETWORK", True)
    assert "gave up after 2 attempts" in data["message"]
    assert ("attempt_timeout" if what == "one_token" else "no_progress_timeout") in data["message"]
    log = events(agent_state_dir, sid)
    attempts = [e.data["error"]["code"] for e in log if e.type == "assistant/attempt"]
    assert attempts == ["NETWORK", "NETWORK"]
    assert log[-1].type == "turn/end" and log[-1].data["exit"] == "error"
    assert (await h.prompt(sid, "again")).stop_reason == "end_turn"
    assert_valid_history(endpoint.requests[-1].body)
