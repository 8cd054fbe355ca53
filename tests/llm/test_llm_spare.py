"""A connection opened ahead for https endpoints and host names (issue 33 item 6): name resolution,
connect and the TLS handshake done before the first request, nothing sent; used only if young and
still open, with the client's own TLS settings; nothing ahead when a proxy is named.

A real TLS endpoint on 127.0.0.1 (``support.tls``: a CA made for the test, trusted through
``SSL_CERT_FILE`` as httpx reads it)."""

from __future__ import annotations

import asyncio

import pytest

from agent_server.llm import ChatClient, LLMError, encode_body
from agent_server.llm._transport import KEEPALIVE_EXPIRY, EndpointTransport, TLSTransport
from agent_server.offline import OfflineEndpoint, text_stream
from support.timeouts import HANG
from support.tls import TLSEndpoint, one_request

BODY = encode_body({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture
def trusted(tmp_path, monkeypatch):
    """A ``TLSEndpoint`` whose CA the clients made from now on trust (``SSL_CERT_FILE``), no proxy."""
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    endpoint = TLSEndpoint(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(endpoint.ca_file))
    return endpoint


def _text(events: list) -> str:
    return "".join(getattr(e, "text", "") for e in events)


async def _opened(client: ChatClient) -> list[bool]:
    return await asyncio.wait_for(asyncio.gather(*client._tails), HANG)


async def _tickets_read(client: ChatClient) -> None:
    """Until the spare's TLS 1.3 session tickets (sent by the server after the handshake, which
    make its socket readable) have been read by its watch: its session is then known."""
    (spare, _), = client._transport.backend._spares.values()
    ssl_object = spare.get_extra_info("ssl_object")
    for _ in range(1000):
        if ssl_object.session is not None:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("no session ticket arrived")


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1"])
async def test_the_first_request_to_an_https_endpoint_did_its_tls_handshake_after_the_user_pressed_enter(trusted, host):
    """``preconnect`` resolves the name, connects and does the TLS handshake (nothing sent); the
    first request goes out on that connection, even after the server's session tickets came."""
    async with trusted as endpoint:
        client = ChatClient(endpoint.url(host), "sk-test")
        try:
            assert isinstance(client._transport, TLSTransport)
            assert client.preconnect()
            assert await _opened(client) == [True]
            await endpoint.wait_connections(1)  # the server finished its handshake
            await _tickets_read(client)
            assert endpoint.connections[0]["received"] == b""  # nothing sent ahead
            assert _text([e async for e in client.stream(BODY)]) == "hi"
        finally:
            await client.aclose()
    assert len(endpoint.connections) == 1 and one_request(endpoint.connections[0]["received"], BODY)


async def test_an_https_connection_opened_ahead_that_the_server_closed_is_not_used(tmp_path, monkeypatch):
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    endpoint = TLSEndpoint(tmp_path, close_first=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(endpoint.ca_file))
    async with endpoint:
        client = ChatClient(endpoint.url(), "sk-test")
        try:
            client.preconnect()
            assert await _opened(client) == [True]
            watch, = client._transport.backend._watches.values()
            await asyncio.wait_for(watch, HANG)  # it read the server's close: the spare is dropped
            assert client._transport.backend._spares == {}
            assert _text([e async for e in client.stream(BODY)]) == "hi"
        finally:
            await client.aclose()
    assert len(endpoint.connections) == 2 and endpoint.connections[0]["received"] == b""
    assert one_request(endpoint.connections[1]["received"], BODY)


async def test_an_https_connection_opened_ahead_longer_ago_than_the_keep_alive_expiry_is_closed_not_used(trusted):
    async with trusted as endpoint:
        client = ChatClient(endpoint.url(), "sk-test")
        backend = client._transport.backend
        try:
            client.preconnect()
            assert await _opened(client) == [True]
            now = backend.clock()
            backend.clock = lambda: now + KEEPALIVE_EXPIRY + 0.5  # older than the pool keeps an idle connection
            assert _text([e async for e in client.stream(BODY)]) == "hi"
            await asyncio.wait_for(endpoint.connections[0]["done"].wait(), HANG)  # closed by the client
        finally:
            await client.aclose()
    assert len(endpoint.connections) == 2 and endpoint.connections[0]["received"] == b""
    assert one_request(endpoint.connections[1]["received"], BODY)


async def test_a_connection_opened_ahead_to_a_server_the_client_does_not_trust_fails_silently(tmp_path, monkeypatch):
    """The spare's handshake verifies the certificate as the request would (the client's context):
    an untrusted one keeps nothing, and the request then fails on its own, as without a spare."""
    for name in PROXIES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    async with TLSEndpoint(tmp_path) as endpoint:
        client = ChatClient(endpoint.url(), "sk-test")
        try:
            assert client.preconnect()
            assert await _opened(client) == [False]
            assert client._transport.backend._spares == {}
            with pytest.raises(LLMError, match="CERTIFICATE_VERIFY_FAILED|certificate verify failed") as raised:
                [e async for e in client.stream(BODY)]
            assert raised.value.code == "NETWORK"
        finally:
            await client.aclose()
    assert all(c["received"] == b"" for c in endpoint.connections)


@pytest.mark.parametrize("scheme", ["https", "http"])
async def test_nothing_is_opened_ahead_through_a_proxy(trusted, monkeypatch, scheme):
    """A proxy named in the environment keeps httpx's own transport and proxy handling: no
    connection is opened ahead (it would bypass the proxy)."""
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    async with trusted as endpoint:
        url = endpoint.url() if scheme == "https" else endpoint.url().replace("https:", "http:")
        client = ChatClient(url, "sk-test")
        try:
            assert not isinstance(client._transport, EndpointTransport)
            assert client.preconnect() is False and not client._tails
        finally:
            await client.aclose()
    assert endpoint.connections == []


async def test_an_https_connection_opened_ahead_and_never_used_is_closed_with_the_client(trusted):
    async with trusted as endpoint:
        client = ChatClient(endpoint.url(), "sk-test")
        try:
            client.preconnect()
            assert await _opened(client) == [True]
        finally:
            await client.aclose()
        await endpoint.wait_connections(1)
        await asyncio.wait_for(endpoint.connections[0]["done"].wait(), HANG)
    assert [c["received"] for c in endpoint.connections] == [b""]


async def test_a_plain_http_endpoint_named_by_host_name_gets_its_connection_ahead_too():
    async with OfflineEndpoint([text_stream("hi")]) as endpoint:
        client = ChatClient(endpoint.base_url.replace("127.0.0.1", "localhost"), "sk-test")
        names = client._transport.backend._names
        connects: list[str] = []
        real = names.connect_tcp

        async def counted(host, *args, **kwargs):
            connects.append(host)
            return await real(host, *args, **kwargs)
        names.connect_tcp = counted
        try:
            assert client.preconnect()
            assert await _opened(client) == [True]
            assert _text([e async for e in client.stream(BODY)]) == "hi"
        finally:
            await client.aclose()
    assert connects == ["localhost"] and len(endpoint.requests) == 1  # the request went out on the spare
