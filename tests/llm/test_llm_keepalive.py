"""Keep-alive to the model endpoint: a connection lives long enough for the next prompt a person
types, and a request written into a connection that died while it waited is sent again, once, with
the same bytes, on a new connection — never after its answer began.

A real endpoint on 127.0.0.1 that keeps its connections as a provider's server does (the offline
endpoint's ``keep_alive``; ``drop_idle`` makes the connections waiting for their next request fail
it unanswered, as a firewall that forgot them or a server's idle timeout does). The pool's clock
(httpcore's ``time.monotonic``) is moved forward instead of sleeping."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time

import httpcore._async.http11 as http11
import pytest

from agent_server.llm import ChatClient, LLMError, encode_body
from agent_server.llm._transport import KEEPALIVE_EXPIRY, TCP_USER_TIMEOUT_MS
from agent_server.offline import OfflineEndpoint, text_stream
from support.timeouts import HANG


def _body(text: str) -> bytes:
    return encode_body({"model": "m", "messages": [{"role": "user", "content": text}], "stream": True})


def _text(events: list) -> str:
    return "".join(getattr(e, "text", "") for e in events)


class _Clock:
    """httpcore's ``time`` module as its HTTP/1.1 connections read it, ``ahead`` seconds later."""

    def __init__(self) -> None:
        self.ahead = 0.0
        self.read = 0

    def monotonic(self) -> float:
        self.read += 1
        return time.monotonic() + self.ahead


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(http11, "time", fake)
    return fake


async def _answer(client: ChatClient, body: bytes) -> str:
    text = _text([e async for e in client.stream(body)])
    await asyncio.wait_for(asyncio.gather(*client._tails), HANG)  # the body's end read: the connection is pooled
    return text


async def _until(predicate) -> None:
    async with asyncio.timeout(HANG):
        while not predicate():
            await asyncio.sleep(0.005)


@contextlib.asynccontextmanager
async def _first_answered(answers: list, proxy=None):
    """An endpoint that keeps its connections (reached through ``proxy``, a ``ForwardProxy``, when
    given), and a client whose first request was answered ``one``: its connection waits in the pool."""
    async with contextlib.AsyncExitStack() as stack:
        endpoint = await stack.enter_async_context(OfflineEndpoint(answers, keep_alive=True))
        if proxy is not None:
            await stack.enter_async_context(proxy)
            proxy.named()
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            assert await _answer(client, _body("first")) == "one"
            await _until(lambda: endpoint.idle_connections == 1)
            yield endpoint, client
        finally:
            await client.aclose()


async def _second_after_a_pause(clock: _Clock, proxy=None) -> OfflineEndpoint:
    """The next prompt six seconds after the first answer (a person read it and typed): answered."""
    async with _first_answered([text_stream("one"), text_stream("two")], proxy) as (endpoint, client):
        clock.ahead = 6.0  # a person read the answer and typed the next prompt
        read = clock.read
        assert await _answer(client, _body("second")) == "two"
        assert clock.read > read  # the pool judged its connection's age by this clock
    assert [r.connection for r in endpoint.requests] == [1, 1]
    return endpoint


async def _second_after_its_idle_connection_was_dropped(how: str, proxy=None) -> OfflineEndpoint:
    """The kept connection dropped (``reset`` or ``close``) while idle: the second request goes out
    again, once, on a new connection with the same head and body, and only that one is answered."""
    async with _first_answered([text_stream("one"), text_stream("two")], proxy) as (endpoint, client):
        assert endpoint.drop_idle(how) == 1
        assert await _answer(client, _body("second")) == "two"
        assert client._transport._pool.resent == 1
    (dropped,) = endpoint.dropped
    assert dropped.body == _body("second")
    assert dropped.headers == endpoint.requests[1].headers  # the same head, byte for byte as parsed
    assert [(r.connection, r.body) for r in endpoint.requests] == [(1, _body("first")), (2, _body("second"))]
    return endpoint


async def _second_broken_after_its_answer_began(codes: tuple[str, ...], proxy=None) -> None:
    """The kept connection breaks after a byte of the second answer: that request fails (one of
    ``codes``) and is never sent again."""
    broken = {"kind": "raw", "writes": [{"text": 'data: {"choices":[{"index":0,"delta":{"content":"par"}}]}\n\n'}],
              "close": True, "abort": True}
    async with _first_answered([text_stream("one"), broken], proxy) as (endpoint, client):
        with pytest.raises(LLMError) as caught:
            await _answer(client, _body("second"))
        assert caught.value.code in codes
        assert client._transport._pool.resent == 0
    assert [(r.connection, r.body) for r in endpoint.requests] == [(1, _body("first")), (1, _body("second"))]


def _probing(sock: socket.socket) -> None:
    """TCP keep-alive and ``TCP_USER_TIMEOUT`` on ``sock``."""
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == TCP_USER_TIMEOUT_MS


async def test_a_prompt_sent_after_a_six_second_pause_opened_a_new_connection(clock):
    await _second_after_a_pause(clock)


async def test_a_connection_idle_longer_than_the_keep_alive_expiry_is_not_reused(clock):
    """The other side of the expiry: past it the pool lets the connection go (a new one is opened)."""
    async with OfflineEndpoint([text_stream("one"), text_stream("two")], keep_alive=True) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            assert await _answer(client, _body("first")) == "one"
            clock.ahead = KEEPALIVE_EXPIRY + 1
            assert await _answer(client, _body("second")) == "two"
        finally:
            await client.aclose()
    assert [r.connection for r in endpoint.requests] == [1, 2] and endpoint.dropped == []


@pytest.mark.parametrize("how", ["reset", "close"])
async def test_a_request_written_into_a_connection_dropped_while_idle_failed_instead_of_going_out_again(how):
    """``reset``: the connection was forgotten (a firewall, a NAT): the request gets a TCP RST;
    ``close``: the server closed it as the request came. Either way no byte of an answer came:
    the same bytes go out once more on a new connection, and only that one is answered."""
    endpoint = await _second_after_its_idle_connection_was_dropped(how)
    assert endpoint.dropped[0].connection == 1


async def test_a_connection_that_broke_after_its_answer_began_was_not_sent_again():
    await _second_broken_after_its_answer_began(("STREAM_CLOSED",))


async def test_a_request_that_failed_again_on_its_new_connection_was_not_sent_a_third_time():
    """Once: the new connection is dropped too (every idle one is doomed as the retry opens it)."""
    async with OfflineEndpoint([text_stream("one"), text_stream("two")], keep_alive=True) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        pool = client._transport._pool
        try:
            assert await _answer(client, _body("first")) == "one"
            await _until(lambda: endpoint.idle_connections == 1)
            endpoint.drop_idle("reset")
            original = endpoint._dispatch

            async def refuse_fresh(request, reader, writer):  # the new connection dies before answering too
                endpoint.dropped.append(request)
                writer.transport.abort()
                return False

            endpoint._dispatch = refuse_fresh
            with pytest.raises(LLMError) as caught:
                await _answer(client, _body("second"))
            endpoint._dispatch = original
            assert caught.value.code == "NETWORK" and pool.resent == 1
        finally:
            await client.aclose()
    assert [r.connection for r in endpoint.dropped] == [1, 2] and len(endpoint.requests) == 1


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux's TCP options")
async def test_every_connection_to_the_endpoint_probes_its_peer_while_idle():
    """TCP keep-alive (a NAT's state kept, a dead peer found while idle) and ``TCP_USER_TIMEOUT``
    (a black-holed request fails in seconds, not at the stream's idle timeout) on the socket."""
    async with _first_answered([text_stream("one")]) as (_, client):
        (connection,) = client._transport._pool.connections
        sock = connection._connection._network_stream.get_extra_info("socket")
        _probing(sock)
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 15


async def test_a_connection_opened_ahead_that_was_dropped_while_it_waited_did_not_fail_the_first_prompt():
    """The connection ``preconnect`` opened waits as long as a kept one (a person types the first
    prompt): dropped meanwhile, the first request goes out again on a new connection."""
    async with OfflineEndpoint([text_stream("one")], keep_alive=True) as endpoint:
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            assert client.preconnect()
            assert await asyncio.wait_for(asyncio.gather(*client._tails), HANG) == [True]
            await _until(lambda: endpoint.idle_connections == 1)
            assert endpoint.drop_idle("reset") == 1
            assert await _answer(client, _body("first")) == "one"
        finally:
            await client.aclose()
    assert [r.connection for r in endpoint.dropped] == [1]
    assert [(r.connection, r.body) for r in endpoint.requests] == [(2, _body("first"))]


@pytest.fixture
def trusted_kept(tmp_path, monkeypatch):
    """A keep-alive ``TLSEndpoint`` whose CA the clients made from now on trust, no proxy."""
    from support.tls import TLSEndpoint

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    endpoint = TLSEndpoint(tmp_path, keep_alive=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(endpoint.ca_file))
    return endpoint


async def _https_second_after_its_idle_connection_was_dropped(kept, proxy=None, *, ahead: bool = False):
    """``kept`` (a keep-alive ``TLSEndpoint``): its connection, opened by a first request answered
    ``hi`` (or ahead, by ``preconnect``), dropped while idle; the second request goes out again,
    once, on a new connection (through ``proxy`` when given), and only that one is answered."""
    from support.tls import one_request

    async with contextlib.AsyncExitStack() as stack:
        endpoint = await stack.enter_async_context(kept)
        if proxy is not None:
            await stack.enter_async_context(proxy)
            proxy.named()
        client = ChatClient(endpoint.url(), "sk-test")
        try:
            if ahead:
                assert client.preconnect()
                assert await asyncio.wait_for(asyncio.gather(*client._tails), HANG) == [True]
            else:
                assert await _answer(client, _body("first")) == "hi"
            await endpoint.wait_connections(1)
            await _until(lambda: endpoint._waiting == {1})
            assert endpoint.drop_idle() == 1
            assert await _answer(client, _body("second")) == "hi"
            assert client._transport._pool.resent == 1
        finally:
            await client.aclose()
    assert len(endpoint.dropped) == 1 and one_request(endpoint.dropped[0], _body("second"))
    assert one_request(endpoint.connections[1]["received"], _body("second"))
    return endpoint


@pytest.mark.parametrize("ahead", [False, True], ids=["kept", "opened-ahead"])
async def test_an_https_request_written_into_a_connection_dropped_while_idle_went_out_again_on_a_new_one(
        trusted_kept, ahead):
    endpoint = await _https_second_after_its_idle_connection_was_dropped(trusted_kept, ahead=ahead)
    assert len(endpoint.connections) == 2
    assert endpoint.connections[1]["requests"] == 1


@pytest.fixture
def proxied(monkeypatch):
    """A real forward/``CONNECT`` proxy on 127.0.0.1 (``support.proxy``), named by ``HTTP_PROXY`` and
    ``HTTPS_PROXY`` as a user's environment names one; nothing bypasses it."""
    from support.proxy import ForwardProxy

    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    proxy = ForwardProxy()

    def named() -> ForwardProxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("HTTPS_PROXY", proxy.url)
        return proxy

    proxy.named = named
    return proxy


async def test_a_prompt_sent_after_a_six_second_pause_through_a_proxy_opened_a_new_connection(clock, proxied):
    """With a proxy configured the client kept httpx's own transport, whose connections expire after
    5 s idle: every prompt a person typed after reading an answer opened a new connection to the
    proxy (and, for ``https://``, a new tunnel and TLS handshake). The proxy path keeps them as the
    direct one does."""
    await _second_after_a_pause(clock, proxied)
    assert proxied.connections == 1 and len(proxied.requests) == 2  # both went through the proxy, on one connection


@pytest.mark.parametrize("how", ["reset", "close"])
async def test_a_request_through_a_proxy_written_into_a_connection_dropped_while_idle_failed_instead_of_going_out_again(
        proxied, how):
    """Through a proxy a request written into a kept connection that had died failed the turn: httpx's
    own transport does not send it again. Now, as on the direct path, the same bytes go out once more
    on a new connection (through the proxy), and only that one is answered."""
    await _second_after_its_idle_connection_was_dropped(how, proxied)
    assert proxied.connections == 2


async def test_a_connection_through_a_proxy_that_broke_after_its_answer_began_was_not_sent_again(proxied):
    await _second_broken_after_its_answer_began(("STREAM_CLOSED", "NETWORK"), proxied)


async def test_a_request_through_a_proxy_whose_fsync_failed_was_not_sent_again(proxied):
    """The body's last byte waits for the log's fsync (``HeldBody``): when it fails, the request is
    never completed, on the kept connection or on a new one."""
    from agent_server.llm._transport import HeldBody

    async with OfflineEndpoint([text_stream("one"), text_stream("two")], keep_alive=True) as endpoint, proxied:
        proxied.named()
        client = ChatClient(endpoint.base_url, "sk-test")
        try:
            assert await _answer(client, _body("first")) == "one"
            await _until(lambda: endpoint.idle_connections == 1)
            endpoint.drop_idle("reset")

            async def failed_fsync():
                raise OSError(5, "Input/output error")

            held = HeldBody(_body("second"), failed_fsync(), None)
            with pytest.raises(OSError):
                await client._client.post(client.url, content=held,
                                          headers={"Content-Length": str(len(_body("second")))})
            assert client._transport._pool.resent == 0 and isinstance(held.failed, OSError)
        finally:
            await client.aclose()
    assert [r.body for r in endpoint.requests] == [_body("first")]


@pytest.mark.skipif(not hasattr(socket, "TCP_USER_TIMEOUT"), reason="Linux's TCP options")
async def test_a_connection_through_a_proxy_did_not_probe_its_peer_while_idle(proxied):
    async with _first_answered([text_stream("one")], proxied) as (_, client):
        (connection,) = client._transport._pool.connections
        sock = connection._connection._connection._network_stream.get_extra_info("socket")
        assert sock.getpeername()[1] == proxied.port
        _probing(sock)


async def test_an_https_request_through_a_proxy_tunnel_written_into_a_dropped_connection_went_out_again(
        trusted_kept, proxied):
    """The ``CONNECT`` tunnel's kept connection died while idle: the request goes out again, once, on
    a new tunnel; the first tunnel's ``CONNECT`` answer never counted as this request's answer."""
    await _https_second_after_its_idle_connection_was_dropped(trusted_kept, proxied)
    assert [line.split(b" ")[0] for line in proxied.requests] == [b"CONNECT", b"CONNECT"]


def _own_network(timeout_ms: int, mode: str, host: str) -> dict:
    """``blackhole_run.py`` in a user and network namespace of its own (``unshare -rn``: its loopback
    link can go down without touching this machine's)."""
    import json
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    if shutil.which("unshare") is None or shutil.which("ip") is None or \
            subprocess.run(["unshare", "-rn", "true"], capture_output=True).returncode != 0:
        pytest.skip("no user and network namespaces here (unshare -rn)")
    script = Path(__file__).with_name("blackhole_run.py")
    done = subprocess.run(["unshare", "-rn", sys.executable, str(script), str(timeout_ms), mode, host],
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"], ids=["own-sockets", "anyio"])
def test_a_kept_connection_whose_peer_vanished_mid_request_waited_for_the_stream_idle_timeout(host):
    """The peer of a kept connection vanished after the request was written (its link went down:
    nothing answers, nothing resets). ``TCP_USER_TIMEOUT`` gave the connection up — but the kernel's
    ``ETIMEDOUT`` is a ``TimeoutError`` in Python, which the transport's own sockets took for their
    read timeout: the request was not sent again and failed as "no data for 60 s" (``STREAM_IDLE``)
    although it waited under a second. Now it is a broken kept connection: given up after the user
    timeout (shortened to 500 ms here) and sent again, once, on a new connection."""
    out = _own_network(500, "restore", host)
    assert out["first"] == "one" and out["user_timeout_ms"] == 500
    assert out.get("second") == "two" and out["resent"] == 1, out
    assert out["requests"] == [[1, False], [2, True]]  # the lost try never reached the endpoint


def test_a_request_whose_peer_stayed_gone_failed_clearly_after_one_resend():
    out = _own_network(500, "keep", "127.0.0.1")
    assert out["error"] == "NETWORK" and "timed out connecting" in out["message"] and out["resent"] == 1, out
    assert out["requests"] == [[1, False]]


def test_a_kept_connection_whose_peer_vanished_while_it_waited_was_found_dead_by_its_keep_alive_probes():
    """The other half of the black hole: the peer vanished while the connection waited in the pool.
    Its TCP keep-alive probes (shortened to 1 s here) go unanswered and the kernel gives it up, so
    the next request goes out on a new connection at once — no try lost on the dead one."""
    out = _own_network(500, "idle", "127.0.0.1")
    assert out["idle_dead"] and out.get("second") == "two" and out["resent"] == 0, out
    assert out["requests"] == [[1, False], [2, True]]
