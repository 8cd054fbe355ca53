"""No line the engine writes is over its bound (``bounds.MAX_SEND_BYTES``, docs/protocol.md "Size
limit"): a text chunk is split (nothing lost), a tool call's display is cut and marked, a result
becomes an error answer, a request that cannot be shrunk is refused before anything is written;
and a line too long to read keeps the id its first bytes name."""

import asyncio
import json

import pytest

from agent_server.server.rpc.bounds import fit_line
from agent_server.server.rpc.jsonrpc import Connection, MessageTooLarge
from agent_server.server.rpc.wire import encode_message
from support.timeouts import HANG

LIMIT = 4096


class Lines:
    def __init__(self):
        self.data = b""

    def write(self, data):
        self.data += data

    async def drain(self):
        pass

    def messages(self):
        lines = self.data.splitlines(keepends=True)
        assert all(len(line) <= LIMIT for line in lines), [len(line) for line in lines]
        return [json.loads(line) for line in lines]


def connection(**kw):
    out = Lines()
    return Connection(asyncio.StreamReader(), out, requests={}, max_send_bytes=LIMIT, **kw), out


def chunk(text, kind="agent_message_chunk"):
    return {"sessionId": "s", "update": {"sessionUpdate": kind, "content": {"type": "text", "text": text}}}


@pytest.mark.parametrize("text", ["a" * 20_000, "é€😀\x01" * 3000, "x" * (LIMIT - 200)])
async def test_a_text_chunk_over_the_bound_is_split_into_chunks_that_join_to_it(text):
    conn, out = connection()
    await conn.notify("session/update", chunk(text))
    messages = out.messages()
    assert "".join(m["params"]["update"]["content"]["text"] for m in messages) == text
    assert all(m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" for m in messages)


async def test_a_replay_batch_with_a_line_over_the_bound_sends_each_within_it_in_order():
    conn, out = connection()
    await conn.notify_many("session/update", [chunk("one"), chunk("b" * 10_000, "user_message_chunk"), chunk("two")])
    texts = [m["params"]["update"]["content"]["text"] for m in out.messages()]
    assert texts[0] == "one" and texts[-1] == "two" and "".join(texts[1:-1]) == "b" * 10_000


async def test_a_tool_call_update_over_the_bound_is_cut_and_marked_truncated():
    conn, out = connection()
    update = {"sessionUpdate": "tool_call_update", "toolCallId": "tc-1", "status": "completed",
              "content": [{"type": "content", "content": {"type": "text", "text": "done"}},
                          {"type": "diff", "path": "/w/big.txt", "oldText": "o" * 9000, "newText": "n" * 9000}]}
    await conn.notify("session/update", {"sessionId": "s", "update": update})
    (sent,) = out.messages()
    got = sent["params"]["update"]
    assert got["_meta"]["agentServer"]["truncated"]["limit"] == LIMIT
    assert got["content"][0]["content"]["text"] == "done" and got["status"] == "completed"
    assert "more characters not shown" in got["content"][1]["newText"]


async def test_a_result_over_the_bound_is_answered_with_an_error_naming_the_bound():
    conn, out = connection()
    await conn.send({"jsonrpc": "2.0", "id": 5, "result": {"x": "y" * 10_000}})
    (sent,) = out.messages()
    assert sent["id"] == 5 and sent["error"]["code"] == -32603
    assert sent["error"]["data"]["agentServer"]["tooLarge"]["limit"] == LIMIT


async def test_a_request_over_the_bound_is_refused_before_anything_is_written():
    conn, out = connection()
    with pytest.raises(MessageTooLarge) as caught:
        await conn.request("fs/write_text_file", {"sessionId": "s", "path": "/w/a", "content": "z" * 10_000})
    assert caught.value.limit == LIMIT and out.data == b"" and not conn._pending  # noqa: SLF001


def test_a_line_within_the_bound_is_untouched():
    message = {"jsonrpc": "2.0", "method": "session/update", "params": chunk("hi")}
    data = encode_message(message)
    assert fit_line(message, data, len(data) + 1) is not None  # (only ever called for lines over it)


async def test_a_too_long_answer_fails_its_request_at_once_and_a_too_long_request_is_answered_with_its_id(monkeypatch):
    import agent_server.server.rpc.jsonrpc as jsonrpc

    monkeypatch.setattr(jsonrpc, "MAX_LINE_BYTES", 1024)
    reader = asyncio.StreamReader(limit=1024)
    out = Lines()
    conn = Connection(reader, out, requests={})
    task = asyncio.ensure_future(conn.serve())
    request_id, future = await conn.begin_request("fs/read_text_file", {"path": "/w/a"})
    sent = json.loads(out.data)
    assert sent["id"] == request_id
    out.data = b""
    reader.feed_data(b'{"jsonrpc":"2.0","id":%d,"result":{"content":"' % request_id + b"a" * 5000 + b'"}}\n')
    with pytest.raises(MessageTooLarge):
        await asyncio.wait_for(future, HANG)
    reader.feed_data(b'{"jsonrpc":"2.0","id":"r9","method":"x","params":{"p":"' + b"a" * 5000 + b'"}}\n')
    reader.feed_eof()
    await asyncio.wait_for(task, HANG)
    (answer,) = [json.loads(line) for line in out.data.splitlines()]
    assert answer["id"] == "r9" and answer["error"]["code"] == -32600
