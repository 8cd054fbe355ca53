"""Issue 11 §2a/§2e: no message, however wrong, ends the serve loop.

Raw NDJSON against the real ``agent-server``: every field of every method (and of the JSON-RPC
envelope, and of ``$/cancel_request``) is sent with each JSON type it must not have; each request
is answered with an error that is not an internal failure, and afterwards a valid request is still
answered. Then a 100 MB line, and paths with a NUL byte in ``session/new``.
"""

from __future__ import annotations

import copy
import json

import pytest
from support.timeouts import HANG

WRONG = [None, True, 7, 1.5, "text", [], [1, "x"], {}, {"k": {"deep": [1]}}]


def _kind(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def _fields(obj, path=()):
    """Paths of every field (and list item) inside ``obj``."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield path + (key,)
            yield from _fields(value, path + (key,))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            yield path + (i,)
            yield from _fields(value, path + (i,))


def _with(obj, path, value):
    out = copy.deepcopy(obj)
    target = out
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return out


def _variants(params):
    for path in _fields(params):
        current = params
        for key in path:
            current = current[key]
        for value in WRONG:
            if _kind(value) != _kind(current):
                yield path, _with(params, path, value)


def _templates(workspace, sid):
    ws = str(workspace)
    return {
        "initialize": {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": False},
                                                                    "terminal": False},
                       "clientInfo": {"name": "fuzz", "version": "1"}},
        "session/new": {"cwd": ws, "additionalDirectories": [ws], "mcpServers": [{"name": "x", "command": "y"}]},
        "session/load": {"sessionId": sid, "cwd": ws, "additionalDirectories": [ws], "mcpServers": []},
        "session/list": {"cwd": ws, "cursor": "abc"},
        "session/delete": {"sessionId": "sess_does_not_exist"},
        "session/set_mode": {"sessionId": sid, "modeId": "read-only"},
        "session/set_config_option": {"sessionId": sid, "configId": "mode", "value": "read-only"},
        "session/prompt": {"sessionId": sid, "prompt": [
            {"type": "text", "text": "/usage"},
            {"type": "resource_link", "uri": "file:///x", "name": "x"},
            {"type": "resource", "resource": {"uri": "file:///y", "text": "y"}}]},
    }


@pytest.fixture
def agent(raw_agent_factory):
    a = raw_agent_factory(timeout=60)
    assert a.request("initialize", {"protocolVersion": 1})["result"]["protocolVersion"] == 1
    return a


def _still_serving(agent, workspace):
    answer = agent.request("session/new", {"cwd": str(workspace)}, timeout=HANG)
    assert "sessionId" in answer.get("result", {}), answer
    assert agent.returncode is None


def test_cancel_request_with_an_object_or_list_request_id_does_not_end_the_server(agent, workspace):
    for request_id in ({"a": 1}, [1, 2], None, 1.5, True, "nope", [], {}):
        agent.notify("$/cancel_request", {"requestId": request_id})
    for params in ([], "x", 3, None, {"requestId": {"nested": [1]}, "extra": {}}):
        agent.notify("$/cancel_request", params)
    _still_serving(agent, workspace)


def test_wrong_types_in_every_field_of_every_method_are_answered_and_serving_goes_on(agent, workspace):
    sid = agent.request("session/new", {"cwd": str(workspace)})["result"]["sessionId"]
    answers = []
    for method, params in _templates(workspace, sid).items():
        for value in WRONG:  # params itself of the wrong type
            rid = agent.send_request(method, value)
            answers.append((method, "params", value, agent.response(rid, timeout=HANG)))
        for path, bad in _variants(params):
            rid = agent.send_request(method, bad)
            answers.append((method, path, bad, agent.response(rid, timeout=HANG)))
    for method, path, bad, answer in answers:
        error = answer.get("error")
        if error is not None:  # answered; a wrong type is the client's fault, never an internal failure
            assert error["code"] != -32603 or "data" in error and error["data"].get("code") not in (None, "INTERNAL"), \
                (method, path, bad, error)
    # notifications with wrong types: ignored, never fatal
    for value in WRONG:
        agent.notify("session/cancel", {"sessionId": value})
        agent.notify("session/cancel", value)
        agent.notify("$/cancel_request", {"requestId": value})
    agent.drain(0.5)
    _still_serving(agent, workspace)


def test_wrong_types_in_the_envelope_are_answered_and_serving_goes_on(raw_agent_factory, workspace):
    # not schema-checked: the checker cannot know that an ill-formed message was meant as a request,
    # so it flags the (correct) -32600 answers that carry that message's id
    agent = raw_agent_factory(validate=False)
    for value in WRONG:
        agent.send({"jsonrpc": value, "id": 999_001, "method": "initialize", "params": {}})
        agent.send({"jsonrpc": "2.0", "id": 999_002, "method": value, "params": {}})
        agent.send({"jsonrpc": "2.0", "id": value, "method": "initialize", "params": {}})
        agent.send({"jsonrpc": "2.0", "id": value, "result": value})
        agent.send({"jsonrpc": "2.0", "id": value, "error": value})
        agent.send({"jsonrpc": "2.0", "id": 5, "error": {"code": value, "message": value, "data": value}})
        agent.send({"jsonrpc": "2.0", "id": value})
    answers = agent.drain(1.0)
    for answer in answers:
        if "result" in answer:  # the ids 7 and "text" are valid: those initialize requests are fine
            assert answer["id"] in (7, "text"), answer
            continue
        assert answer["error"]["code"] in (-32600, -32601), answer
        assert answer["id"] is None or isinstance(answer["id"], (int, str)), answer
    assert agent.transcript.non_json_lines() == []
    _still_serving(agent, workspace)


def test_100_mb_input_line_is_an_error_response_and_serving_goes_on(agent, workspace):
    line = json.dumps({"jsonrpc": "2.0", "id": 77, "method": "initialize",
                       "params": {"protocolVersion": 1, "pad": "x" * (100 * 1024 * 1024)}})
    agent.send_line(line)
    error = agent.recv_until(lambda m: "error" in m, timeout=120)
    assert error["error"]["code"] == -32600 and error["id"] == 77  # the id its first bytes name
    assert "message too large" in error["error"]["message"] and "64 MiB" in error["error"]["message"]
    _still_serving(agent, workspace)


@pytest.mark.parametrize("field", ["cwd", "additionalDirectories"])
def test_nul_byte_in_a_session_path_is_invalid_params_not_an_internal_error(agent, workspace, field):
    bad = f"{workspace}/a\u0000b"
    params = {"cwd": bad} if field == "cwd" else {"cwd": str(workspace), "additionalDirectories": [bad]}
    error = agent.request("session/new", params)["error"]
    assert error["code"] == -32602, error
    assert "NUL" in json.dumps(error), error
    sid = agent.request("session/new", {"cwd": str(workspace)})["result"]["sessionId"]
    error = agent.request("session/load", {"sessionId": sid, "cwd": bad} if field == "cwd" else
                          {"sessionId": sid, "cwd": str(workspace), "additionalDirectories": [bad]})["error"]
    assert error["code"] == -32602 and "NUL" in json.dumps(error), error
    _still_serving(agent, workspace)
