"""The model client's transport: a plain-http endpoint is reached without any TLS context (no CA
bundle load); https endpoints and proxied set-ups keep httpx's verified default; httpx's
command-line client never loads (issue 14)."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys

import pytest

from agent_server.llm import ChatClient
from agent_server.llm._transport import KEEPALIVE_EXPIRY, PlainHTTPTransport
from agent_server.offline import text_stream
from support.timeouts import HANG


@pytest.fixture
def tls_contexts(monkeypatch):
    """Every TLS context made from now on (httpx and httpcore both go through these two)."""
    made: list[str] = []
    new = ssl.SSLContext.__new__

    def recorded(cls, *args, **kwargs):
        made.append(cls.__name__)
        return new(cls, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "__new__", staticmethod(recorded))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return made


async def test_http_endpoint_request_makes_no_tls_context(tls_contexts, endpoint, body, monkeypatch):
    monkeypatch.setenv("NO_PROXY", "localhost")  # names no proxy: still no TLS context
    endpoint.push(text_stream("hi"))
    client = ChatClient(endpoint.base_url, "sk-test")
    try:
        events = [e async for e in client.stream(body)]
    finally:
        await client.aclose()
    assert events and len(endpoint.requests) == 1
    assert tls_contexts == []
    assert isinstance(client._client._transport, PlainHTTPTransport)


async def test_https_endpoint_keeps_httpx_verified_tls_context(tls_contexts):
    client = ChatClient("https://api.example.invalid/v1", "sk-test")
    try:
        pool = client._client._transport._pool
        assert tls_contexts and pool._ssl_context.verify_mode == ssl.CERT_REQUIRED
        assert pool._ssl_context.check_hostname
    finally:
        await client.aclose()


async def test_http_endpoint_behind_an_environment_proxy_keeps_httpx_proxy_handling(tls_contexts, monkeypatch):
    """The proxy httpx's client would pick from the environment (its own reading of ``HTTP_PROXY`` and
    ``NO_PROXY``), made as httpx makes it; a host ``NO_PROXY`` names goes direct."""
    from agent_server.llm._transport import ProxyTransport

    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("HTTP_PROXY", "http://user:pw@127.0.0.1:9")
    client = ChatClient("http://127.0.0.1:1/v1", "sk-test")
    try:
        transport = client._client._transport
        assert isinstance(transport, ProxyTransport) and not client._client._mounts
        pool = transport._pool
        assert (pool._proxy_url.host, pool._proxy_url.port) == (b"127.0.0.1", 9)
        assert any(name.lower() == b"proxy-authorization" for name, _ in pool._proxy_headers)
        assert pool._ssl_context.verify_mode == ssl.CERT_REQUIRED
    finally:
        await client.aclose()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    client = ChatClient("http://127.0.0.1:1/v1", "sk-test")
    try:
        assert isinstance(client._client._transport, PlainHTTPTransport)
    finally:
        await client.aclose()


def test_importing_the_model_client_does_not_load_httpx_command_line_client():
    probe = ("import sys, json; import agent_server.server.acp.server; from agent_server.llm import ChatClient;"
             "print(json.dumps({'cli': sys.modules.get('httpx._main', 'absent') is None,"
             " 'loaded': [m for m in ('click', 'pygments', 'rich') if m in sys.modules]}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == {"cli": True, "loaded": []}


def test_a_request_never_searches_the_path_for_sniffio_when_it_is_not_installed():
    """httpcore runs ``import sniffio`` for every lock and event it sets up (≈ 7 per request); with
    sniffio not installed each one searched every ``sys.path`` entry again (≈ 60 µs each). The
    transport marks it missing once, so the lookups fail at once with the same ImportError."""
    probe = r"""
import asyncio, importlib.util, json, sys
installed = importlib.util.find_spec("sniffio") is not None
import agent_server.llm
from agent_server.offline import OfflineEndpoint, text_stream
searched = []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name == "sniffio":
            searched.append(name)
        return None
async def main():
    endpoint = OfflineEndpoint([text_stream("hi")])
    await endpoint.start()
    client = agent_server.llm.ChatClient(endpoint.base_url, "sk-test")
    sys.meta_path.insert(0, Spy())  # from here on: the request's own imports
    body = agent_server.llm.encode_body({"model": "m", "messages": [], "stream": True})
    try:
        text = "".join([getattr(e, "text", "") async for e in client.stream(body)])
    finally:
        await client.aclose()
        await endpoint.stop()
    return text
text = asyncio.run(main())
print(json.dumps({"installed": installed, "searched": len(searched), "text": text}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    # installed or not, the request's lookups never reach the path: a module found once stays in
    # sys.modules, and a missing one is marked missing once by the transport
    assert (out["searched"], out["text"]) == (0, "hi"), out


def test_a_warmed_client_first_requests_import_no_module_and_compile_no_pattern():
    """What a warm session's first turn paid on its way to the model and back, found by a profile
    of that turn: modules imported lazily (httpcore's ``import sniffio`` per lock) and the
    regular expressions ``urllib.parse`` compiles on first use (httpx's cookie jar, each response).
    ``ChatClient.warm`` (run after ``session/new``) leaves none of it to the requests."""
    probe = r"""
import asyncio, json, sys
import re._compiler as rc
import agent_server.llm
from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
imported, compiled = [], []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name not in sys.modules:
            imported.append(name)
        return None
real = rc.compile
def counting(p, flags=0):
    compiled.append(str(p))
    return real(p, flags)
async def main():
    endpoint = OfflineEndpoint([tool_call_stream([("c1", "read", '{"path": "a"}')]), text_stream("hi")])
    await endpoint.start()
    client = agent_server.llm.ChatClient(endpoint.base_url, "sk-test")
    client.warm()
    body = agent_server.llm.encode_body({"model": "m", "messages": [], "stream": True})
    sys.meta_path.insert(0, Spy())
    rc.compile = counting
    try:
        for _ in range(2):
            [e async for e in client.stream(body)]
    finally:
        rc.compile = real
        sys.meta_path.pop(0)
        await client.aclose()
        await endpoint.stop()
asyncio.run(main())
print(json.dumps({"imported": imported, "compiled": compiled}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert out == {"imported": [], "compiled": []}



def test_a_client_preloaded_in_a_thread_leaves_its_warm_up_and_first_requests_nothing_to_import():
    """``ChatClient.preload`` (a ``session/load``'s worker thread runs it, with no loop) does what
    the warm-up on the loop would import and compile: the warm-up and two requests then import no
    module and compile no pattern."""
    probe = r"""
import asyncio, json, sys, threading
import re._compiler as rc
import agent_server.llm
thread = threading.Thread(target=lambda: agent_server.llm.ChatClient.preload())
thread.start()
thread.join()
from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
imported, compiled = [], []
class Spy:
    def find_spec(self, name, path=None, target=None):
        if name not in sys.modules:
            imported.append(name)
        return None
real = rc.compile
def counting(p, flags=0):
    compiled.append(str(p))
    return real(p, flags)
async def main():
    endpoint = OfflineEndpoint([tool_call_stream([("c1", "read", '{"path": "a"}')]), text_stream("hi")])
    await endpoint.start()
    body = agent_server.llm.encode_body({"model": "m", "messages": [], "stream": True})  # (the server has it)
    sys.meta_path.insert(0, Spy())
    rc.compile = counting
    try:
        client = agent_server.llm.ChatClient(endpoint.base_url, "sk-test")
        client.warm()
        for _ in range(2):
            [e async for e in client.stream(body)]
    finally:
        rc.compile = real
        sys.meta_path.pop(0)
        await client.aclose()
        await endpoint.stop()
asyncio.run(main())
print(json.dumps({"imported": imported, "compiled": compiled}))
"""
    out = json.loads(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert out == {"imported": [], "compiled": []}

async def _one_shot_server(answer: bytes, seen: list[bytes]):
    """A raw HTTP server on 127.0.0.1 that keeps each connection's first read and answers
    ``answer`` (then closes)."""
    import asyncio

    async def serve(reader, writer):
        first = await reader.read(1 << 20)
        seen.append(first)
        head, _, rest = first.partition(b"\r\n\r\n")
        length = int(dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:]).get(b"Content-Length", b"0"))
        while len(rest) < length:
            more = await reader.read(1 << 20)
            if not more:
                break
            rest += more
        writer.write(answer)
        await writer.drain()
        writer.close()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


SSE_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
              b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
              b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


async def test_a_request_to_an_ip_address_leaves_in_one_write_head_and_body_together(tls_contexts):
    """The plain-http transport's own socket backend (``SocketBackend``) sends a request's head and
    body with one system call: the server's first read holds the whole request, byte for byte as
    httpx built it."""
    from agent_server.llm import encode_body
    from agent_server.llm._transport import SocketBackend

    seen: list[bytes] = []
    server = await _one_shot_server(SSE_ANSWER, seen)
    port = server.sockets[0].getsockname()[1]
    body = encode_body({"model": "m", "messages": [{"role": "user", "content": "x" * 5000}], "stream": True})
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        pool = client._client._transport._pool
        assert isinstance(pool._network_backend, SocketBackend)
        events = [e async for e in client.stream(body)]
    finally:
        await client.aclose()
        server.close()
    assert "".join(getattr(e, "text", "") for e in events) == "hi"
    head, _, rest = seen[0].partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and rest == body
    assert f"Content-Length: {len(body)}".encode() in head.split(b"\r\n")


async def test_a_host_name_endpoint_keeps_anyio_backend(endpoint, body, monkeypatch):
    """``localhost`` (a name: resolution and address fallback are anyio's) is connected by httpcore's
    anyio backend, as before."""
    from agent_server.llm._transport import SocketBackend

    named: list[str] = []
    real = SocketBackend.__init__

    def spying(self, *args, **kwargs):
        real(self, *args, **kwargs)
        connect = self._names.connect_tcp

        async def recorded(host, *args, **kwargs):
            named.append(host)
            return await connect(host, *args, **kwargs)
        self._names.connect_tcp = recorded

    monkeypatch.setattr(SocketBackend, "__init__", spying)
    endpoint.push(text_stream("hi"))
    client = ChatClient(endpoint.base_url.replace("127.0.0.1", "localhost"), "sk-test")
    try:
        events = [e async for e in client.stream(body)]
    finally:
        await client.aclose()
    assert "".join(getattr(e, "text", "") for e in events) == "hi"
    assert named == ["localhost"]


async def test_the_socket_backend_opens_no_tls_connection():
    import socket

    import httpcore

    from agent_server.llm._transport import SocketStream

    a, b = socket.socketpair()
    try:
        a.setblocking(False)
        with pytest.raises(httpcore.ConnectError, match="no TLS"):
            await SocketStream(a).start_tls(ssl.create_default_context(), "example.invalid")
    finally:
        a.close()
        b.close()



def _sse_raw(headers: dict[str, str]) -> dict:
    text = ('data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
            'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
    return {"kind": "raw", "status": 200, "headers": {"Content-Type": "text/event-stream", **headers},
            "writes": [{"text": text}]}


async def test_a_cookie_the_endpoint_sets_is_sent_back_and_none_is_made_up(endpoint, body):
    """The client's jar reads a response's cookies only when it has a ``Set-Cookie`` (httpx's
    extraction costs a request and a message object per response): one that sets a cookie gets it
    back on the next request, as before; with none set, no ``Cookie`` header is sent."""
    endpoint.push(_sse_raw({}))
    endpoint.push(_sse_raw({"Set-Cookie": "__cf_bm=abc; Path=/; HttpOnly"}))
    endpoint.push(_sse_raw({}))
    client = ChatClient(endpoint.base_url, "sk-test")
    try:
        for _ in range(3):
            assert "".join(getattr(e, "text", "") for e in [e async for e in client.stream(body)]) == "hi"
    finally:
        await client.aclose()
    assert [r.headers.get("cookie") for r in endpoint.requests] == [None, None, "__cf_bm=abc"]


async def test_a_base_url_httpx_cannot_parse_fails_each_request_as_before():
    """The request URL is parsed once, when the client is made; one httpx refuses still makes the
    client (as before) and fails each request with httpx's own ``InvalidURL``, as before."""
    import httpx

    client = ChatClient("http://h:abc/v1", "sk-test")
    try:
        for _ in range(2):
            with pytest.raises(httpx.InvalidURL, match="Invalid port"):
                [e async for e in client.stream(b"{}")]
    finally:
        await client.aclose()


async def _recording_server(answer: bytes, connections: list[dict], close_first: bool = False):
    """A raw HTTP server on 127.0.0.1 recording, per accepted connection, every byte received
    (``received``) and an event set when the client closed it or it was answered (``done``);
    ``close_first``: the first connection is closed at once, unanswered."""
    import asyncio

    async def serve(reader, writer):
        record = {"received": b"", "done": asyncio.Event()}
        connections.append(record)
        try:
            if close_first and len(connections) == 1:
                return
            while True:
                chunk = await reader.read(1 << 20)
                if not chunk:
                    return  # closed unused
                record["received"] += chunk
                head, _, rest = record["received"].partition(b"\r\n\r\n")
                length = int(dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:]).get(b"Content-Length", b"-1"))
                if 0 <= length <= len(rest):
                    writer.write(answer)
                    await writer.drain()
                    return
        finally:
            writer.close()
            record["done"].set()

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def _one_request(received: bytes, body: bytes) -> bool:
    head, _, rest = received.partition(b"\r\n\r\n")
    return head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and rest == body


async def test_the_connection_opened_ahead_of_a_load_s_first_request_carries_it_and_nothing_before_it(tls_contexts):
    """Issue 33 item 6: the first request after a load opened its connection on its way to the model
    (a cold pool). ``ChatClient.preconnect`` opens it ahead; the first request goes out on it, and
    the first bytes it carries are that request's."""
    import asyncio

    from agent_server.llm import encode_body

    connections: list[dict] = []
    server = await _recording_server(SSE_ANSWER, connections)
    port = server.sockets[0].getsockname()[1]
    body = encode_body({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        assert client.preconnect()
        assert await asyncio.gather(*client._tails) == [True]  # connected
        assert not client.preconnect() or await asyncio.gather(*client._tails) == [False]  # one is kept, not two
        events = [e async for e in client.stream(body)]
    finally:
        await client.aclose()
        server.close()
    assert "".join(getattr(e, "text", "") for e in events) == "hi"
    assert len(connections) == 1 and _one_request(connections[0]["received"], body)
    assert tls_contexts == []


async def test_a_connection_opened_ahead_that_the_server_closed_is_not_used(tls_contexts):
    """A server may close an idle connection (its keep-alive timeout): the request then opens
    another, as the pool does for its own idle connections, and is answered."""
    import asyncio

    from agent_server.llm import encode_body

    connections: list[dict] = []
    server = await _recording_server(SSE_ANSWER, connections, close_first=True)
    port = server.sockets[0].getsockname()[1]
    body = encode_body({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        client.preconnect()
        await asyncio.gather(*client._tails)
        await asyncio.wait_for(_first_connection_done(connections), HANG)
        (spare, _), = client._transport.backend._spares.values()
        await asyncio.wait_for(_readable(spare), HANG)  # the server's close arrived
        events = [e async for e in client.stream(body)]
    finally:
        await client.aclose()
        server.close()
    assert "".join(getattr(e, "text", "") for e in events) == "hi"
    assert [c["received"] for c in connections[:1]] == [b""] and len(connections) == 2
    assert _one_request(connections[1]["received"], body) and spare.fileno() == -1  # closed, not leaked


async def test_a_connection_opened_ahead_longer_ago_than_the_keep_alive_expiry_is_closed_not_used(tls_contexts):
    import asyncio

    from agent_server.llm import encode_body

    connections: list[dict] = []
    server = await _recording_server(SSE_ANSWER, connections)
    port = server.sockets[0].getsockname()[1]
    body = encode_body({"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    backend = client._transport.backend
    try:
        client.preconnect()
        await asyncio.gather(*client._tails)
        now = backend.clock()
        backend.clock = lambda: now + KEEPALIVE_EXPIRY + 0.5  # older than the pool keeps an idle connection
        events = [e async for e in client.stream(body)]
        await connections[0]["done"].wait()  # the old one was closed by the client
    finally:
        await client.aclose()
        server.close()
    assert "".join(getattr(e, "text", "") for e in events) == "hi"
    assert connections[0]["received"] == b"" and _one_request(connections[1]["received"], body)


async def test_a_connection_opened_ahead_and_never_used_is_closed_with_the_client(tls_contexts):
    import asyncio

    connections: list[dict] = []
    server = await _recording_server(SSE_ANSWER, connections)
    port = server.sockets[0].getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test")
    try:
        client.preconnect()
        await asyncio.gather(*client._tails)
    finally:
        await client.aclose()
    try:
        await asyncio.wait_for(_first_connection_done(connections), HANG)
    finally:
        server.close()
    assert [c["received"] for c in connections] == [b""]


async def _first_connection_done(connections: list[dict]) -> None:
    import asyncio

    while not connections:  # accepted after the client closed it: the server's accept runs later
        await asyncio.sleep(0)
    await connections[0]["done"].wait()


async def _readable(sock) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    ready = loop.create_future()
    loop.add_reader(sock.fileno(), lambda: ready.done() or ready.set_result(None))
    try:
        await ready
    finally:
        loop.remove_reader(sock.fileno())


# -- SOCKS proxies (the last stop's open security item 4: socksio was not installed, SOCKS untested) ------


@pytest.mark.parametrize("scheme, host, kind", [("socks5", "127.0.0.1", "ipv4"), ("socks5h", "localhost", "domain")])
async def test_a_socks5_proxy_in_all_proxy_carried_the_request_to_the_endpoint(tls_contexts, endpoint, body, monkeypatch,
                                                                                scheme, host, kind):
    """``ALL_PROXY=socks5://user:pw@127.0.0.1:PORT``: the request reaches the endpoint through a real
    SOCKS5 proxy (its login checked); ``socks5h`` hands the proxy the host name to resolve."""
    from agent_server.llm._transport import ProxyTransport
    from support.proxy import Socks5Proxy

    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    endpoint.push(text_stream("through socks"))
    port = int(endpoint.base_url.rsplit(":", 1)[1].split("/")[0])
    async with Socks5Proxy(credentials=("user", "pw")) as proxy:
        monkeypatch.setenv("ALL_PROXY", proxy.url(scheme))
        client = ChatClient(f"http://{host}:{port}/v1", "sk-test")
        try:
            assert isinstance(client._client._transport, ProxyTransport)
            text = "".join([getattr(e, "text", "") async for e in client.stream(body)])
        finally:
            await client.aclose()
    assert text == "through socks" and len(endpoint.requests) == 1
    assert proxy.logins == [("user", "pw")]
    assert proxy.connects == [(kind, host, port)]


def test_a_socks_proxy_without_socksio_fails_the_client_with_a_clear_error(monkeypatch):
    """Where ``socksio`` is missing (an install without ``httpx[socks]``), a SOCKS proxy in the
    environment is an error naming the variable, the proxy and the fix — not a bare ImportError."""
    import sys

    from agent_server.llm._transport import ProxySetupError

    monkeypatch.setitem(sys.modules, "socksio", None)  # import socksio → ImportError
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    with pytest.raises(ProxySetupError) as raised:
        ChatClient("http://127.0.0.1:1/v1", "sk-test")
    message = str(raised.value)
    assert "socks5://127.0.0.1:1080" in message and "socksio" in message and "httpx[socks]" in message


async def test_a_prompt_through_a_socks_proxy_without_socksio_ends_saying_so_with_the_password_hidden(
        tmp_path, monkeypatch):
    """The host's side of the clear error: the prompt fails (``BAD_REQUEST``, not retryable) with the
    sentence, in the answer and the log's ``turn/end``, and the proxy's password never in either."""
    import os
    import sys

    from agent_server.config.load import load_config
    from agent_server.server.acp.server import AcpServer
    from agent_server.server.rpc.jsonrpc import JsonRpcError
    from agent_server.session import SessionStore
    from support.probe import answered

    monkeypatch.setitem(sys.modules, "socksio", None)
    for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ALL_PROXY", "socks5://me:hunter2pw@127.0.0.1:1080")
    config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1", "AGENT_SERVER_MODEL": "m",
                                               "AGENT_SERVER_API_KEY": "k", "AGENT_SERVER_SANDBOX": "off"})
    server = AcpServer(config, SessionStore(tmp_path / "state"))
    try:
        sid = (await answered(server, "session/new", {"cwd": str(tmp_path), "mcpServers": []}, 1))["sessionId"]
        with pytest.raises(JsonRpcError) as raised:
            await answered(server, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}, 2)
        (end,) = [e.data for e in server.host.sessions[sid].log.events if e.type == "turn/end"]
    finally:
        await server.aclose()
    said = str(raised.value)
    assert "socks5://me:***@127.0.0.1:1080" in said and "socksio" in said and "hunter2pw" not in said
    assert end["error"]["code"] == "BAD_REQUEST" and "hunter2pw" not in json.dumps(end)
