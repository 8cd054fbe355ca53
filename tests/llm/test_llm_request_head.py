"""The request's head is made once per client (issue 33 item 6): httpx merged the client's headers
with ours and h11 checked every header name and value against its grammar for each request, though
only ``Content-Length`` changes. The bytes on the wire stay those httpx and h11 sent before (httpx-sse's
``aconnect_sse`` on a plain ``httpx.AsyncClient``), and a head h11 refuses is refused as before."""

from __future__ import annotations

import asyncio
import re

import h11._events
import h11._headers
import httpx
import pytest
from httpx_sse import aconnect_sse

from agent_server.llm import ChatClient, LLMError, encode_body
from agent_server.offline import OfflineEndpoint, text_stream
from support.timeouts import HANG

BODY = encode_body({"model": "m", "messages": [{"role": "user", "content": "héllo"}], "stream": True})


async def _heads(answers: int, send) -> list[bytes]:
    """The head of each request ``send(url)`` makes to a raw server on 127.0.0.1 (``answers`` of them)."""
    heads: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < len(BODY):
            chunk = await reader.read(1 << 16)
            if not chunk:
                break
            data += chunk
        heads.append(data.partition(b"\r\n\r\n")[0])
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
                     b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
                     b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1"
    try:
        for _ in range(answers):
            await send(url)
    finally:
        server.close()
    return heads


async def test_every_request_had_its_unchanging_head_merged_by_httpx_and_validated_by_h11_again(monkeypatch):
    validated: list[int] = []
    real = h11._headers.normalize_and_validate

    def counting(headers, _parsed=False):
        if not _parsed:
            validated.append(len(headers))
        return real(headers, _parsed)

    monkeypatch.setattr(h11._headers, "normalize_and_validate", counting)
    monkeypatch.setattr(h11._events, "normalize_and_validate", counting)
    clients: list[ChatClient] = []

    async def ours(url: str) -> None:
        if not clients:
            clients.append(ChatClient(url, "sk-test", headers={"HTTP-Referer": "https://example.org"}))
        assert "".join([getattr(e, "text", "") async for e in clients[0].stream(BODY)]) == "hi"

    try:
        heads = await _heads(3, ours)
    finally:
        await clients[0].aclose()
    assert len(validated) == 1  # the first request's head, once

    async def before(url: str) -> None:  # what ChatClient.stream did: httpx-sse's call on httpx's client
        async with httpx.AsyncClient(timeout=HANG, follow_redirects=False) as client:
            headers = {"HTTP-Referer": "https://example.org", "Content-Type": "application/json",
                       "Accept": "text/event-stream", "Authorization": "Bearer sk-test"}
            async with aconnect_sse(client, "POST", url + "/chat/completions", content=BODY, headers=headers) as source:
                await source.response.aread()

    def same_host(head: bytes) -> bytes:
        return re.sub(rb"\r\nHost: 127\.0\.0\.1:\d+\r\n", b"\r\nHost: 127.0.0.1:PORT\r\n", head)

    assert [same_host(h) for h in heads] == [same_host(h) for h in await _heads(3, before)]


async def test_a_header_h11_refuses_is_refused_on_every_request_as_before():
    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test", headers={"X-Bad": "a\nb"})
        try:
            for _ in range(2):
                with pytest.raises(LLMError, match="Illegal header value") as raised:
                    [e async for e in client.stream(BODY)]
                assert raised.value.code == "NETWORK"
        finally:
            await client.aclose()
    assert endpoint.requests == []


async def test_a_content_length_is_never_taken_from_the_head_validated_once():
    """Two bodies of different sizes: each request carries its own length (and its own bytes)."""
    async with OfflineEndpoint([text_stream("a"), text_stream("b")]) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        other = encode_body({"model": "m", "messages": [{"role": "user", "content": "x" * 1000}], "stream": True})
        try:
            for body in (BODY, other):
                [e async for e in client.stream(body)]
        finally:
            await client.aclose()
    assert [(r.headers["content-length"], r.body) for r in endpoint.requests] == [
        (str(len(BODY)), BODY), (str(len(other)), other)]


async def test_the_first_request_after_a_load_merged_and_validated_its_head_on_its_way_to_the_model(monkeypatch):
    """``warm`` (before a load's answer, after ``session/new``) makes the head: the first request
    merges nothing with httpx's ``build_request`` and has h11 validate nothing."""
    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            client.warm()
            built: list[str] = []
            validated: list[int] = []
            real_build, real_validate = client._client.build_request, h11._headers.normalize_and_validate
            monkeypatch.setattr(client._client, "build_request", lambda *a, **k: built.append(a[0]) or real_build(*a, **k))

            def counting(headers, _parsed=False):
                if not _parsed:
                    validated.append(len(headers))
                return real_validate(headers, _parsed)
            monkeypatch.setattr(h11._headers, "normalize_and_validate", counting)
            monkeypatch.setattr(h11._events, "normalize_and_validate", counting)
            assert "".join([getattr(e, "text", "") async for e in client.stream(BODY)]) == "hi"
        finally:
            await client.aclose()
    assert (built, validated) == ([], [])
    assert endpoint.requests[0].body == BODY


async def test_a_cookie_goes_where_httpx_put_it_in_the_head():
    """A jar with a cookie: the ``Cookie`` header before ``Content-Length``, as ``build_request``
    puts it (the head merged once must not move it)."""
    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        client._client.cookies.set("__cf_bm", "abc")
        try:
            expected = client._client.build_request("POST", client.url, content=BODY, headers=client._headers)
            [e async for e in client.stream(BODY)]
        finally:
            await client.aclose()
    assert list(endpoint.requests[0].headers) == [k.lower() for k in expected.headers.keys()]
    assert endpoint.requests[0].headers["cookie"] == "__cf_bm=abc"
