"""``ChatClient.stream(body, ready=…)`` (issue 33 item 6): the request goes out while the prompt's
``user`` event is made durable — the connection, the head and all of the body but its last byte —
and the endpoint can hold the whole request only once ``ready`` is done. A ``ready`` that raises
leaves the endpoint with no request, the connection closed (never pooled), its error unchanged.
Real HTTP on 127.0.0.1: the offline endpoint, and a raw server that shows the bytes as they came."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agent_server.llm import ChatClient, encode_body
from agent_server.offline import OfflineEndpoint, text_stream
from support.timeouts import HANG


class Held:
    """An awaitable ``ready``: ``awaited`` is set when the transport waits on it, ``release`` (or
    ``fail``) ends the wait; it counts how often it was awaited."""

    def __init__(self) -> None:
        self.awaited = asyncio.Event()
        self.future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.count = 0

    def __await__(self) -> Any:
        self.count += 1
        self.awaited.set()
        return self.future.__await__()

    def release(self) -> None:
        self.future.set_result(None)

    def fail(self, exc: BaseException) -> None:
        self.future.set_exception(exc)


class DiskFull(Exception):
    """What the prompt's ``fsync`` raised (not an ``LLMError``: it must not be retried)."""


def _text(events: list) -> str:
    return "".join(getattr(e, "text", "") for e in events)


async def _drain(client: ChatClient, body: bytes, **kwargs: Any) -> list:
    return [e async for e in client.stream(body, **kwargs)]


BODY = encode_body({"model": "m", "messages": [{"role": "user", "content": "héllo " + "x" * 3000}], "stream": True})


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])  # our socket backend; anyio's (a host name)
async def test_the_endpoint_had_a_whole_request_before_the_prompt_was_durable(host):
    """Held ``ready``: the endpoint has accepted the connection but holds no complete request until
    it is released; then it gets the request byte-exact, with the head a request without ``ready``
    gets, and answers."""
    async with OfflineEndpoint([text_stream("hi"), text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url.replace("127.0.0.1", host), "sk-test")
        try:
            held = Held()
            task = asyncio.create_task(_drain(client, BODY, ready=held))
            await asyncio.wait_for(held.awaited.wait(), HANG)
            assert endpoint.requests == [] and endpoint.open_connections == 1
            held.release()
            assert _text(await asyncio.wait_for(task, HANG)) == "hi"
            assert _text(await _drain(client, BODY)) == "hi"  # the same request, without ready
        finally:
            await client.aclose()
    held_request, plain = endpoint.requests
    assert held.count == 1
    assert held_request.body == plain.body == BODY
    assert list(held_request.headers.items()) == list(plain.headers.items())


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
@pytest.mark.parametrize("error", [DiskFull("no space left on device"), TimeoutError("the fsync took too long")],
                         ids=["DiskFull", "TimeoutError"])
async def test_a_request_whose_prompt_failed_to_be_durable_reached_the_endpoint_whole(host, error):
    """``ready`` raises: that same exception leaves ``stream`` (not an ``LLMError``: it is not a
    network failure to retry), the endpoint records no request, the connection is closed at once
    and the pool keeps nothing."""
    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url.replace("127.0.0.1", host), "sk-test")
        try:
            held = Held()
            task = asyncio.create_task(_drain(client, BODY, ready=held))
            await asyncio.wait_for(held.awaited.wait(), HANG)
            served = set(endpoint._tasks)  # the endpoint's side of the connection
            held.fail(error)
            with pytest.raises(type(error)) as raised:
                await asyncio.wait_for(task, HANG)
            assert raised.value is error
            await asyncio.wait_for(asyncio.gather(*served), HANG)  # the endpoint saw the connection close
            assert client._client._transport._pool.connections == []
        finally:
            await client.aclose()
    assert endpoint.requests == []


async def test_a_turn_cancelled_while_its_prompt_was_made_durable_left_a_whole_request_behind():
    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            held = Held()
            task = asyncio.create_task(_drain(client, BODY, ready=held))
            await asyncio.wait_for(held.awaited.wait(), HANG)
            served = set(endpoint._tasks)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.wait_for(asyncio.gather(*served), HANG)
            assert client._client._transport._pool.connections == []
        finally:
            await client.aclose()
    assert endpoint.requests == []


async def _byte_server(received: list[bytes], arrived: asyncio.Event, answer: bytes):
    """A raw server on 127.0.0.1: every byte of its one connection in ``received`` (``arrived`` set
    at each read), answering ``answer`` once the request is whole."""
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        try:
            while True:
                chunk = await reader.read(1 << 20)
                if not chunk:
                    return
                data += chunk
                received.append(chunk)
                arrived.set()
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])[b"Content-Length"])
                if len(rest) == length:
                    writer.write(answer)
                    await writer.drain()
                    return
        finally:
            writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


SSE_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
              b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
              b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_the_request_waited_for_the_prompt_s_fsync_before_its_first_byte_left(host):
    """The overlap itself: while ``ready`` is held, the endpoint already has the head and all of the
    body but its last byte (the socket backend sends what it kept before waiting); the last byte
    follows the release."""
    received: list[bytes] = []
    arrived = asyncio.Event()
    server = await _byte_server(received, arrived, SSE_ANSWER)
    port = server.sockets[0].getsockname()[1]
    client = ChatClient(f"http://{host}:{port}/v1", "sk-test")
    try:
        held = Held()
        task = asyncio.create_task(_drain(client, BODY, ready=held))
        await asyncio.wait_for(held.awaited.wait(), HANG)
        while b"".join(received).partition(b"\r\n\r\n")[2] != BODY[:-1]:
            arrived.clear()
            await asyncio.wait_for(arrived.wait(), HANG)
        head = b"".join(received).partition(b"\r\n\r\n")[0]
        held.release()
        assert _text(await asyncio.wait_for(task, HANG)) == "hi"
    finally:
        await client.aclose()
        server.close()
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"".join(received) == head + b"\r\n\r\n" + BODY


async def test_a_one_byte_body_waits_for_ready_whole():
    received: list[bytes] = []
    arrived = asyncio.Event()
    server = await _byte_server(received, arrived, SSE_ANSWER)
    port = server.sockets[0].getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        held = Held()
        task = asyncio.create_task(_drain(client, b"{", ready=held))
        await asyncio.wait_for(held.awaited.wait(), HANG)
        await asyncio.wait_for(arrived.wait(), HANG)
        assert b"".join(received).endswith(b"\r\n\r\n")  # the head only
        held.release()
        assert _text(await asyncio.wait_for(task, HANG)) == "hi"
    finally:
        await client.aclose()
        server.close()
    assert b"".join(received).endswith(b"\r\n\r\n{")


async def test_a_request_that_cannot_connect_never_awaits_ready():
    """The connection fails before the body: the usual ``NETWORK`` error, ``ready`` left to its owner."""
    from agent_server.llm import LLMError

    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        held = Held()
        with pytest.raises(LLMError) as raised:
            await _drain(client, BODY, ready=held)
        assert raised.value.code == "NETWORK" and held.count == 0
    finally:
        await client.aclose()


async def test_over_tls_the_request_waited_for_the_prompt_s_fsync_before_its_first_byte_left(tmp_path, monkeypatch):
    """The same over an https endpoint (a real TLS endpoint on 127.0.0.1): while ``ready`` is held
    the server has decrypted the head and all of the body but its last byte; a ``ready`` that
    raises leaves it no whole request."""
    from support.tls import TLSEndpoint

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    endpoint = TLSEndpoint(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(endpoint.ca_file))
    async with endpoint:
        client = ChatClient(endpoint.url(), "sk-test")
        try:
            for outcome in ("released", "failed"):
                held = Held()
                task = asyncio.create_task(_drain(client, BODY, ready=held))
                await asyncio.wait_for(held.awaited.wait(), HANG)
                record = endpoint.connections[-1] if endpoint.connections else None
                while record is None or record["received"].partition(b"\r\n\r\n")[2] != BODY[:-1]:
                    endpoint.arrived.clear()
                    await asyncio.wait_for(endpoint.arrived.wait(), HANG)
                    record = endpoint.connections[-1]
                if outcome == "released":
                    held.release()
                    assert _text(await asyncio.wait_for(task, HANG)) == "hi"
                    assert record["received"].partition(b"\r\n\r\n")[2] == BODY
                else:
                    held.fail(DiskFull("no space left on device"))
                    with pytest.raises(DiskFull):
                        await asyncio.wait_for(task, HANG)
                    await asyncio.wait_for(record["done"].wait(), HANG)  # closed by the client
                    assert record["received"].partition(b"\r\n\r\n")[2] == BODY[:-1]
        finally:
            await client.aclose()


class DoneMeanwhile:
    """A ``ready`` that finished while the request was being made (the ``fsync``'s worker returned,
    the loop has not yet run its callback): ``done_now()`` says so; awaiting it returns at once."""

    def __init__(self) -> None:
        self.count = 0

    def done_now(self) -> bool:
        return True

    def __await__(self) -> Any:
        self.count += 1
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future.__await__()


async def test_a_request_whose_fsync_was_done_before_its_bytes_left_still_went_out_in_two_sends(monkeypatch):
    """Issue 33 item 6 (the traced step after a load): when the prompt's ``fsync`` ended while httpx
    made the request — after the turn chose to hold its last byte, before a byte was sent — the
    head and body went in one ``sendmsg``, the loop turned until it heard the worker was done, and
    the last byte went in a second ``sendmsg``: 0.13–0.5 ms of the loop's CPU and the endpoint woken
    twice. Now the transport asks ``ready.done_now()`` before it holds anything back."""
    from agent_server.llm import _transport

    sends = []
    real = _transport.SocketStream._send_unsent

    async def counted(self, timeout):
        sends.append(sum(map(len, self._unsent)))
        await real(self, timeout)
    monkeypatch.setattr(_transport.SocketStream, "_send_unsent", counted)
    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            ready = DoneMeanwhile()
            assert _text(await asyncio.wait_for(_drain(client, BODY, ready=ready), HANG)) == "hi"
        finally:
            await client.aclose()
    assert len(sends) == 1 and ready.count == 0, (sends, ready.count)
    assert endpoint.requests[0].body == BODY


async def test_a_ready_that_says_it_failed_when_asked_sends_no_whole_request():
    """``done_now()`` raising (the ``fsync`` failed: ``DurableSync.settled_now`` raises its error)
    fails the request as an awaited ``ready`` does: that error, unchanged, and no whole request."""
    class Failed(DoneMeanwhile):
        def done_now(self) -> bool:
            raise DiskFull("no space left on device")

    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            with pytest.raises(DiskFull):
                await asyncio.wait_for(_drain(client, BODY, ready=Failed()), HANG)
        finally:
            await client.aclose()
    assert endpoint.requests == []
