"""The offline endpoint's strict mode: it refuses, with HTTP 400 as providers do, a request whose
history has a tool call without its result, a stray tool message or an empty assistant message."""

import json

import httpx
import pytest

from agent_server.offline import OfflineEndpoint, text_stream
from agent_server.offline._validate import history_problem
from support.timeouts import HANG

CALL = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}


def body(*messages):
    return json.dumps({"model": "m", "messages": [{"role": "system", "content": "S"}, *messages]}).encode()


@pytest.mark.parametrize("messages, words", [
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": None, "tool_calls": [CALL]},
      {"role": "user", "content": "b"}], "did not have response messages: c1"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": None, "tool_calls": [CALL]}],
     "did not have response messages: c1"),
    ([{"role": "user", "content": "a"}, {"role": "tool", "tool_call_id": "zz", "content": "x"}], "role 'tool'"),
    ([{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}], "empty assistant message"),
])
def test_invalid_histories_are_named(messages, words):
    assert words in history_problem(body(*messages))


def test_valid_history_with_results_in_order_passes():
    second = {**CALL, "id": "c2"}
    assert history_problem(body(
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "x", "tool_calls": [CALL, second]},
        {"role": "tool", "tool_call_id": "c1", "content": "1"}, {"role": "tool", "tool_call_id": "c2", "content": "2"},
        {"role": "user", "content": "[agent-server notice] interrupted"}, {"role": "user", "content": "b"})) is None


async def test_strict_endpoint_answers_400_and_keeps_its_scripted_answer_for_a_valid_request():
    async with OfflineEndpoint([text_stream("hi")], reject_invalid_history=True) as ep:
        async with httpx.AsyncClient(timeout=HANG) as client:
            bad = await client.post(ep.base_url + "/chat/completions", content=body(
                {"role": "assistant", "content": None, "tool_calls": [CALL]}))
            good = await client.post(ep.base_url + "/chat/completions", content=body({"role": "user", "content": "a"}))
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert good.status_code == 200 and b"hi" in good.content
    assert len(ep.requests) == 2


async def test_lenient_by_default():
    async with OfflineEndpoint([text_stream("hi")]) as ep:
        async with httpx.AsyncClient(timeout=HANG) as client:
            response = await client.post(ep.base_url + "/chat/completions", content=body(
                {"role": "assistant", "content": None, "tool_calls": [CALL]}))
    assert response.status_code == 200
