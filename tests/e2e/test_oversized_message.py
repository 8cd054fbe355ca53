"""One huge line on stdin neither stalls nor kills the real server: a message past the limit
(``MAX_LINE_BYTES``) is answered ``-32600`` naming the limit — with the id its first bytes name, so the
client's request fails at once instead of waiting — and the next line is served — as the
very first line too, which the CLI's start-up fast path reads (it used to take time quadratic in
the line's size there: 30 MB ~30 s, 200 MB no answer after a minute)."""

import json
import os
import subprocess
import sys

from agent_server.server.rpc.jsonrpc import MAX_LINE_BYTES

AGENT = [sys.executable, "-m", "agent_server"]


def line(message):
    return (json.dumps(message) + "\n").encode()


def test_oversized_first_message_is_refused_with_the_limit_and_the_next_requests_are_answered(agent_env):
    big = b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"x":"' + b"a" * (MAX_LINE_BYTES + 1024) + b'"}}\n'
    data = (big + line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}})
            + line({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}))
    done = subprocess.run(AGENT, input=data, env={**os.environ, **agent_env}, capture_output=True,
                          timeout=150)  # a hang guard, not a timing check
    answers = [json.loads(out) for out in done.stdout.splitlines()]
    assert answers[0]["id"] == 7 and answers[0]["error"]["code"] == -32600
    assert f"at most {MAX_LINE_BYTES} bytes" in answers[0]["error"]["message"]
    assert [a["id"] for a in answers[1:]] == [1, 2] and all("result" in a for a in answers[1:])


def test_oversized_message_after_initialize_is_refused_and_the_next_request_is_answered(agent_env):
    big = b'{"jsonrpc":"2.0","id":7,"method":"session/list","params":{"x":"' + b"a" * (MAX_LINE_BYTES + 1024) + b'"}}\n'
    data = (line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}) + big
            + line({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}))
    done = subprocess.run(AGENT, input=data, env={**os.environ, **agent_env}, capture_output=True, timeout=150)
    answers = [json.loads(out) for out in done.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [1, 7, 2]
    assert answers[1]["error"]["code"] == -32600 and f"at most {MAX_LINE_BYTES} bytes" in answers[1]["error"]["message"]
    assert "result" in answers[2]


def test_oversized_line_whose_id_cannot_be_read_is_answered_with_id_null(agent_env):
    big = b'{"method":"session/list","id":7,"params":{"x":"' + b"a" * (MAX_LINE_BYTES + 1024) + b'"}}\n'
    data = (line({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}}) + big
            + line({"jsonrpc": "2.0", "id": 2, "method": "session/list", "params": {}}))
    done = subprocess.run(AGENT, input=data, env={**os.environ, **agent_env}, capture_output=True, timeout=150)
    answers = [json.loads(out) for out in done.stdout.splitlines()]
    assert [a.get("id") for a in answers] == [1, None, 2]
