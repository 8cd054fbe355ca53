"""After ``data: [DONE]`` the rest of the body — the closing chunk, the server's close — is read to
its end in the background (``ChatClient._read_tail``): ``Finish`` is not held for it, a keep-alive
connection goes back to the pool for the next request, and a body that never ends is let go."""

from __future__ import annotations

import asyncio

import pytest
from support.asyncgen import finalised_async_generators
from support.timeouts import HANG

from agent_server.llm import ChatClient, Finish, encode_body

BODY = encode_body({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
SSE = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
       b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


async def _keep_alive_server(end_after: float | None):
    """An HTTP/1.1 server that keeps its connections open: each answer is one chunk of ``SSE``,
    then the closing chunk ``end_after`` s later (``None``: never). ``connections`` counts them."""
    state = {"connections": 0}

    async def serve(reader, writer):
        state["connections"] += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length:"))
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                             + b"%x\r\n%s\r\n" % (len(SSE), SSE))
                await writer.drain()
                if end_after is None:
                    await asyncio.sleep(3600)
                await asyncio.sleep(end_after)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    return server, state


async def _events(client: ChatClient) -> list:
    return [e async for e in client.stream(BODY)]


async def _text(client: ChatClient) -> str:
    return "".join([getattr(e, "text", "") async for e in client.stream(BODY)])


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_keep_alive_connection_serves_the_next_request(host):
    """Two requests a tool call apart share one connection (a response closed before its body
    ended closed its connection: every request paid a new TCP — and TLS — handshake)."""
    server, state = await _keep_alive_server(end_after=0.0)
    port = server.sockets[0].getsockname()[1]
    client = ChatClient(f"http://{host}:{port}/v1", "sk-test")
    try:
        for _ in range(3):
            assert await _text(client) == "hi"
            await asyncio.sleep(0.05)  # the tool call between two requests of a turn
    finally:
        await client.aclose()
        server.close()
    assert state["connections"] == 1


async def test_finish_is_not_held_for_a_body_that_ends_late_or_never():
    """The answer is whole at ``[DONE]``: ``Finish`` comes at once whatever the body does after it,
    and closing the client stops a tail still being read (no task left pending)."""
    server, state = await _keep_alive_server(end_after=None)
    port = server.sockets[0].getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        events = await asyncio.wait_for(_events(client), HANG)  # a hang guard: the body never ends
        assert isinstance(events[-1], Finish)
        # Finish came while the body's end was still being read (a Finish held for it would come
        # only once that read ended: the server's close, or the tail's own time limit)
        (tail,) = client._tails
        assert not tail.done()
    finally:
        await client.aclose()
        server.close()
    assert not client._tails


async def test_a_whole_stream_leaves_no_httpx_generator_to_the_loops_finaliser(monkeypatch):
    """Read to the body's end, httpx's nested generators (``aiter_text`` → ``aiter_bytes`` → … →
    httpcore's body) end by themselves: none is left to the event loop's finaliser (a thread-safe
    wake-up of the loop and a task of its own for each of them, several per request)."""
    server, state = await _keep_alive_server(end_after=0.0)
    port = server.sockets[0].getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        with finalised_async_generators() as finalised:
            for _ in range(2):
                stream = client.stream(BODY)
                try:
                    assert "".join([getattr(e, "text", "") async for e in stream]) == "hi"
                finally:
                    await stream.aclose()
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()
        server.close()
    assert finalised == []
