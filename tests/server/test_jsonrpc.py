"""The NDJSON JSON-RPC engine in-process: error rules, concurrency, cancellation, both directions."""

import asyncio
import json

import pytest

from agent_server.server.rpc.jsonrpc import Connection, ConnectionClosed, JsonRpcError
from support.timeouts import HANG


class Captured:
    """A writer that keeps every line written and lets a test wait for the n-th one."""

    def __init__(self):
        self.lines = []
        self.changed = asyncio.Event()

    def write(self, data):
        assert data.endswith(b"\n") and data.count(b"\n") == 1
        self.lines.append(json.loads(data))
        self.changed.set()

    async def drain(self):
        pass

    async def wait_for(self, n, timeout=HANG):
        async def wait():
            while len(self.lines) < n:
                self.changed.clear()
                await self.changed.wait()
        await asyncio.wait_for(wait(), timeout)
        return self.lines


def make(requests=None, notifications=None):
    reader = asyncio.StreamReader()
    out = Captured()
    conn = Connection(reader, out, requests=requests or {}, notifications=notifications or {})
    task = asyncio.ensure_future(conn.serve())
    return reader, out, conn, task


def send(reader, obj):
    reader.feed_data((obj if isinstance(obj, str) else json.dumps(obj)).encode() + b"\n")


async def echo(params, ctx):
    return {"echo": params}


async def test_error_rules_for_bad_lines():
    reader, out, conn, task = make({"echo": echo})
    send(reader, "{not json")
    send(reader, [{"jsonrpc": "2.0", "id": 1, "method": "echo"}])
    send(reader, {"jsonrpc": "2.0", "id": 2, "method": "missing"})
    send(reader, {"jsonrpc": "2.0", "id": 3, "method": "echo"})
    send(reader, {"jsonrpc": "2.0", "method": "unknown/notification"})
    send(reader, {"jsonrpc": "2.0", "id": 4, "method": "echo", "params": [1]})
    send(reader, "42")
    lines = await out.wait_for(6)
    reader.feed_eof()
    await task
    null_id = [line["error"]["code"] for line in lines if line["id"] is None]
    by_id = {line["id"]: line for line in lines if line["id"] is not None}
    assert null_id == [-32700, -32600, -32600]  # parse error, batch, not an object
    assert by_id[2]["error"]["code"] == -32601
    assert by_id[3] == {"jsonrpc": "2.0", "id": 3, "result": {"echo": {}}}  # no params: still answered
    assert by_id[4]["error"]["code"] == -32602
    assert len(lines) == 6  # the unknown notification got no answer


async def test_requests_run_concurrently_and_answer_in_completion_order():
    release, started = asyncio.Event(), asyncio.Event()

    async def slow(params, ctx):
        started.set()
        await release.wait()
        return {"slow": True}

    async def fast(params, ctx):
        release.set()
        return {"fast": True}

    reader, out, conn, task = make({"slow": slow, "fast": fast})
    send(reader, {"jsonrpc": "2.0", "id": 1, "method": "slow"})
    send(reader, {"jsonrpc": "2.0", "id": 2, "method": "fast"})
    lines = await out.wait_for(2)
    assert [line["id"] for line in lines] == [2, 1]
    reader.feed_eof()
    await task


async def test_cancel_request_answers_32800_and_the_engine_keeps_serving():
    started = asyncio.Event()

    async def forever(params, ctx):
        started.set()
        await asyncio.sleep(3600)

    reader, out, conn, task = make({"forever": forever, "echo": echo})
    send(reader, {"jsonrpc": "2.0", "id": "a", "method": "forever"})
    await started.wait()
    send(reader, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": "a"}})
    send(reader, {"jsonrpc": "2.0", "id": "b", "method": "echo", "params": {"x": 1}})
    lines = await out.wait_for(2)
    by_id = {line["id"]: line for line in lines}
    assert by_id["a"]["error"]["code"] == -32800
    assert by_id["b"]["result"] == {"echo": {"x": 1}}
    reader.feed_eof()
    await task


async def test_handler_can_take_over_cancel_and_answer_normally():
    stop = asyncio.Event()

    async def prompt(params, ctx):
        ctx.on_cancel = stop.set
        await stop.wait()
        return {"stopReason": "cancelled"}

    reader, out, conn, task = make({"prompt": prompt})
    send(reader, {"jsonrpc": "2.0", "id": 7, "method": "prompt"})
    await asyncio.sleep(0.01)
    send(reader, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 7}})
    lines = await out.wait_for(1)
    assert lines[0] == {"jsonrpc": "2.0", "id": 7, "result": {"stopReason": "cancelled"}}
    reader.feed_eof()
    await task


async def test_after_response_callbacks_run_after_the_response_is_written():
    reader = None

    async def new(params, ctx):
        async def later():
            await conn.notify("session/update", {"n": 1})
        ctx.after_response(later)
        return {"sessionId": "s"}

    reader, out, conn, task = make({"new": new})
    send(reader, {"jsonrpc": "2.0", "id": 1, "method": "new"})
    lines = await out.wait_for(2)
    assert lines[0]["id"] == 1 and lines[1]["method"] == "session/update"
    reader.feed_eof()
    await task


async def test_outgoing_request_gets_result_error_and_connection_closed():
    reader, out, conn, task = make()
    ok = asyncio.ensure_future(conn.request("fs/read_text_file", {"path": "/a"}))
    bad = asyncio.ensure_future(conn.request("x/y", {}))
    lines = await out.wait_for(2)
    ids = {line["method"]: line["id"] for line in lines}
    send(reader, {"jsonrpc": "2.0", "id": ids["fs/read_text_file"], "result": {"content": "hi"}})
    send(reader, {"jsonrpc": "2.0", "id": ids["x/y"], "error": {"code": -32002, "message": "not found"}})
    assert await ok == {"content": "hi"}
    with pytest.raises(JsonRpcError) as info:
        await bad
    assert info.value.code == -32002
    pending = asyncio.ensure_future(conn.request("never", {}))
    await out.wait_for(3)
    reader.feed_eof()
    await task
    with pytest.raises(ConnectionClosed):
        await pending


async def test_outgoing_request_timeout_sends_cancel_request():
    reader, out, conn, task = make()
    with pytest.raises(asyncio.TimeoutError):
        await conn.request("session/request_permission", {}, timeout=0.05)
    lines = await out.wait_for(2)
    assert lines[1] == {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": lines[0]["id"]}}
    reader.feed_eof()
    await task


async def test_handler_exception_is_internal_error_and_serving_goes_on():
    async def boom(params, ctx):
        raise RuntimeError("kaput")

    async def known(params, ctx):
        raise JsonRpcError(-32002, "unknown session", {"sessionId": "x"})

    reader, out, conn, task = make({"boom": boom, "known": known, "echo": echo})
    send(reader, {"jsonrpc": "2.0", "id": 1, "method": "boom"})
    send(reader, {"jsonrpc": "2.0", "id": 2, "method": "known"})
    send(reader, {"jsonrpc": "2.0", "id": 3, "method": "echo"})
    lines = {line["id"]: line for line in await out.wait_for(3)}
    assert lines[1]["error"]["code"] == -32603 and "kaput" in lines[1]["error"]["message"]
    assert lines[2]["error"] == {"code": -32002, "message": "unknown session",
                                 "data": {"sessionId": "x", "details": "unknown session"}}
    assert lines[3]["result"] == {"echo": {}}
    reader.feed_eof()
    await task


async def test_cancel_request_in_the_same_read_as_its_request_is_still_answered():
    async def slow(params, ctx):
        await asyncio.sleep(3600)

    reader, out, conn, task = make({"slow": slow, "echo": echo})
    both = (json.dumps({"jsonrpc": "2.0", "id": 100, "method": "slow"}) + "\n" +
            json.dumps({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": 100}}) + "\n")
    reader.feed_data(both.encode())
    lines = await out.wait_for(1)
    assert lines[0] == {"jsonrpc": "2.0", "id": 100, "error": {"code": -32800, "message": "request cancelled",
                                                               "data": {"details": "request cancelled"}}}
    send(reader, {"jsonrpc": "2.0", "id": 100, "method": "echo"})  # the id is free again
    assert (await out.wait_for(2))[1]["result"] == {"echo": {}}
    reader.feed_eof()
    await task


async def test_cancel_request_with_an_unhashable_request_id_does_not_end_serve():
    reader, out, conn, task = make({"echo": echo})
    for request_id in ({"a": 1}, [1], None, 1.5, True):
        send(reader, {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": request_id}})
    send(reader, {"jsonrpc": "2.0", "id": {"a": 1}, "result": {}})  # a response with an unhashable id
    send(reader, {"jsonrpc": "2.0", "id": 1, "method": "echo"})
    lines = await out.wait_for(1)
    assert lines == [{"jsonrpc": "2.0", "id": 1, "result": {"echo": {}}}]
    assert not task.done()
    reader.feed_eof()
    await task


async def test_a_bug_while_dispatching_one_message_is_answered_and_serve_goes_on():
    class Exploding(dict):
        def get(self, key, default=None):
            if key == "boom":
                raise RuntimeError("dispatch bug")
            return super().get(key, default)

    reader, out, conn, task = make({"echo": echo})
    conn._requests = Exploding(conn._requests)
    send(reader, {"jsonrpc": "2.0", "id": 1, "method": "boom"})
    send(reader, {"jsonrpc": "2.0", "id": 2, "method": "echo"})
    lines = {line["id"]: line for line in await out.wait_for(2)}
    assert lines[1]["error"]["code"] == -32603 and "dispatch bug" in lines[1]["error"]["message"]
    assert lines[2]["result"] == {"echo": {}}
    reader.feed_eof()
    await task


async def test_notify_many_writes_what_notify_writes_per_item_in_one_write():
    """A replay's batch (issue 14: one write per replayed update) is the same lines, in order,
    text UTF-8 cannot carry included; an empty batch writes nothing."""
    writes = []

    class Writer:
        def write(self, data):
            writes.append(data)

        async def drain(self):
            pass

    conn = Connection(asyncio.StreamReader(), Writer(), requests={})
    items = [{"n": 1, "text": "é"}, {"n": 2, "text": "\ud800 lone"}, {"n": 3}]
    for item in items:
        await conn.notify("session/update", item)
    one_by_one, writes[:] = b"".join(writes), []
    await conn.notify_many("session/update", items)
    await conn.notify_many("session/update", [])
    assert writes == [one_by_one] and one_by_one.count(b"\n") == 3


async def test_answer_that_is_not_utf8_fails_its_request_at_once_instead_of_waiting_for_the_timeout():
    reader, out, conn, task = make()
    pending = asyncio.ensure_future(conn.request("fs/read_text_file", {"path": "/w/latin1.txt"}))
    (sent,) = await out.wait_for(1)
    reader.feed_data(b'{"jsonrpc":"2.0","id":%d,"result":{"content":"caf\xe9 na\xefve\\n"}}\n' % sent["id"])
    with pytest.raises(JsonRpcError) as err:
        await asyncio.wait_for(pending, HANG)
    assert err.value.data == {"agentServer": {"notUtf8": True}}
    reader.feed_data(b'{"jsonrpc":"2.0","id":99,"method":"x","params":{"t":"\xe9"}}\n')  # not an answer: -32700 as before
    lines = await out.wait_for(2)
    assert lines[1]["id"] is None and lines[1]["error"]["code"] == -32700
    reader.feed_eof()
    await task


def test_a_batch_is_encoded_as_each_message_would_be():
    """``encode_notifications`` (one encoder call per item, one UTF-8 encode per batch) equals
    ``encode_message`` per message, byte for byte: nesting, escapes, numbers, a lone surrogate."""
    from agent_server.server.rpc.wire import encode_message, encode_notifications

    items = [{"sessionId": "s", "update": {"sessionUpdate": "tool_call", "content": [{"text": 'a "q" \\ \n\t\u2028 ✓'}],
                                          "n": 1.5, "big": 10 ** 20, "none": None, "ok": True, "list": []}},
             {"sessionId": "s", "update": {"text": "\x00\x1f é 😀"}}]
    for batch in (items, items + [{"bad": "\udfff"}], []):
        assert encode_notifications("session/update", batch) == b"".join(
            encode_message({"jsonrpc": "2.0", "method": "session/update", "params": p}) for p in batch)


async def test_finding_10_an_answer_to_an_editor_that_went_away_logged_task_exception_never_retrieved():
    # Restart Server while a proposal waited: the prompt's answer was written to a closed pipe, and the
    # request's task died with ConnectionResetError ("Task exception was never retrieved" in the log)
    class Gone(Captured):
        async def drain(self):
            raise ConnectionResetError("Connection lost")

    release, started = asyncio.Event(), asyncio.Event()

    async def slow(params, ctx):
        started.set()
        await release.wait()
        return {"stopReason": "cancelled"}

    reader = asyncio.StreamReader()
    out = Gone()
    conn = Connection(reader, out, requests={"session/prompt": slow})
    serving = asyncio.ensure_future(conn.serve())
    send(reader, {"jsonrpc": "2.0", "id": 7, "method": "session/prompt"})
    await asyncio.wait_for(started.wait(), HANG)
    [(task, _)] = conn._inflight.values()
    release.set()
    await asyncio.wait_for(asyncio.wait([task]), HANG)
    assert task.exception() is None  # the answer had no one to go to: nothing left unretrieved
    reader.feed_eof()
    await asyncio.wait_for(serving, HANG)
