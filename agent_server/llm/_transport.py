"""The HTTP transport of a model endpoint: httpx's, without what a plain-http endpoint never uses.

Role: ``endpoint_transport(base_url)`` gives the transport ``ChatClient`` hands to
``httpx.AsyncClient``: httpx's default (its verified TLS context, the environment's proxies) for
``https://`` endpoints and whenever the environment names a proxy; for a plain ``http://`` endpoint
with no proxy, ``PlainHTTPTransport``, built without a TLS context (httpx's constructor loads the CA
bundle even when no connection will use TLS), whose connections to an IP address go through
``SocketBackend`` (the event loop's own socket calls instead of anyio's), which can open the first
connection ahead of the first request (``ChatClient.preconnect``). Importing the module keeps
httpx from importing its command-line client and marks a missing ``sniffio`` as missing. What each
saves: bench/README.md, "Measurements moved out of the code".

Must never: weaken TLS — an ``https://`` endpoint always gets httpx's verified default — open a
TLS connection on the plain-http path (its client never asks an ``https://`` URL: redirects are
not followed), or send anything on a connection opened ahead before a request takes it.

Details: ``httpx._main`` pulls in click, pygments and rich when they happen to be installed, for a
CLI this server never runs; httpx falls back to its own stub ``main``. httpcore runs ``import
sniffio`` on every lock and event it sets up, and a failed import searches every ``sys.path`` entry
again; a name marked ``None`` fails at once with the same ``ImportError`` (anyio ≥ 4.12 no longer
needs sniffio). ``SocketBackend`` is the socket layer only — httpcore and h11 still speak HTTP, httpx
is still the client; it skips anyio's per-request task group, event, transport and cancel scopes,
and sends what httpcore writes for one request (head, then body) with one ``sendmsg``, so the
endpoint gets the request in one segment as other clients send it. A host name keeps anyio's
backend (its name resolution and address fallback).
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import socket
import sys
import time
from importlib.util import find_spec
from typing import Any, Awaitable, Iterable
from urllib.parse import urlsplit

sys.modules.setdefault("httpx._main", None)  # before the first ``import httpx`` of the process
if "sniffio" not in sys.modules and find_spec("sniffio") is None:
    sys.modules["sniffio"] = None  # not installed: httpcore's per-call ``import sniffio`` fails at once

import httpcore  # noqa: E402
import httpx  # noqa: E402
from httpcore._utils import is_socket_readable  # noqa: E402


_HOLDING: contextvars.ContextVar["SocketStream | None"] = contextvars.ContextVar("_HOLDING", default=None)
"""The ``SocketStream`` that last kept bytes unsent in this task (``HeldBody`` sends them before it waits)."""


class HeldBody(httpx.AsyncByteStream):
    """A request body (httpx ``content``) whose last byte waits for ``ready``: everything before it
    — the connection taken, the head and ``body[:-1]`` written (``SocketStream``'s kept bytes sent
    first) — is done, then ``ready`` is awaited (once), then the last byte is written. If ``ready``
    raises, its exception leaves as it is: httpcore closes a connection whose request was not
    written whole (never back to the pool), so the endpoint never has a complete request. Sent with
    the request's own head (its ``Content-Length``): the head a request without ``ready`` gets."""

    def __init__(self, body: bytes, ready: Awaitable[Any], write_timeout: float | None) -> None:
        self._body = body
        self._ready = ready
        self._write_timeout = write_timeout

    async def __aiter__(self) -> Any:
        body = self._body
        if len(body) > 1:
            yield body[:-1]
        stream = _HOLDING.get()
        if stream is not None and stream._unsent:
            await stream.send_kept(self._write_timeout)
        await self._ready
        yield body[-1:]


class SocketStream(httpcore.AsyncNetworkStream):
    """One connected, non-blocking TCP socket as httpcore's network stream.

    ``write`` keeps what it is given; the first ``read`` after writes sends it all
    with one ``sendmsg`` (the rest, if the socket takes less, with ``loop.sock_sendall`` under the
    write timeout). httpcore writes a request whole before it reads the answer, so the bytes and
    their order on the wire are the same; what changes is that the head and the body leave in one
    system call. A write that fails is dealt with as httpcore deals with a failed request write
    (``WriteError`` suppressed, the answer read: a server may answer and close early); a write that
    times out raises ``WriteTimeout``. Errors are httpcore's (``ReadError``, ``ReadTimeout`` …),
    which httpx maps to its own as for any backend.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._unsent: list[bytes] = []

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            if not self._unsent:
                _HOLDING.set(self)
            self._unsent.append(bytes(buffer))

    async def send_kept(self, timeout: float | None) -> None:
        """Send what ``write`` kept, now (a ``HeldBody`` about to wait), as ``read`` would: a
        timeout raises ``WriteTimeout``, another error is left for the first read to meet."""
        try:
            await self._send_unsent(timeout)
        except TimeoutError:
            raise httpcore.WriteTimeout("timed out sending the request") from None
        except OSError:
            pass

    async def _send_unsent(self, timeout: float | None) -> None:
        unsent, self._unsent = self._unsent, []
        try:
            sent = self._sock.sendmsg(unsent)
        except (BlockingIOError, InterruptedError):
            sent = 0
        if sent < sum(map(len, unsent)):
            async with asyncio.timeout(timeout):
                await self._loop.sock_sendall(self._sock, b"".join(unsent)[sent:])

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        if self._unsent:
            try:
                await self._send_unsent(timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out sending the request") from None
            except OSError:
                pass  # as httpcore's own write error: read what the server answered before it closed
        try:
            return self._sock.recv(max_bytes)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc
        try:
            async with asyncio.timeout(timeout):
                return await self._loop.sock_recv(self._sock, max_bytes)
        except TimeoutError:
            raise httpcore.ReadTimeout("timed out reading the response") from None
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._unsent = []
        self._sock.close()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        """Refused: this backend serves the plain-http transport only, whose client never asks an
        ``https://`` URL (redirects are not followed); TLS is httpx's default transport's."""
        raise httpcore.ConnectError("the plain-http transport opens no TLS connection")

    def get_extra_info(self, info: str) -> Any:
        if info == "socket":
            return self._sock
        if info == "is_readable":
            return is_socket_readable(self._sock)
        if info == "client_addr":
            return self._sock.getsockname()
        if info == "server_addr":
            return self._sock.getpeername()
        return None


class SocketBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend for the plain-http transport: a host that is an IP address gets
    a ``SocketStream`` (``loop.sock_connect``, ``TCP_NODELAY`` as asyncio sets it); a host name,
    and a unix socket, go to anyio's backend as before.

    ``open_spare`` connects one socket ahead of the first request (a load's first prompt: its
    connection set-up is then not on the way to the model); ``connect_tcp`` takes it for the first
    connection the pool opens to that address when it is younger than ``spare_expiry`` (the pool's
    keep-alive expiry: an idle connection is not kept longer than one the pool kept) and the server
    has not closed it (``is_socket_readable``, as the pool checks its idle connections); else it is
    closed and a connection is opened as before. Nothing is ever sent on it before a request."""

    def __init__(self, spare_expiry: float | None = 5.0) -> None:
        self._names = httpcore.AnyIOBackend()
        self._spare_expiry = spare_expiry
        self._spares: dict[tuple[str, int], tuple[socket.socket, float]] = {}
        self.clock = time.monotonic

    @staticmethod
    def _socket(host: str) -> socket.socket | None:
        """A non-blocking ``TCP_NODELAY`` socket for an IP address ``host``; ``None`` for a host name."""
        try:
            version = ipaddress.ip_address(host).version if "%" not in host else None
        except ValueError:
            version = None
        if version is None:
            return None
        sock = socket.socket(socket.AF_INET6 if version == 6 else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except BaseException:
            sock.close()
            raise
        return sock

    async def open_spare(self, host: str, port: int, timeout: float | None = None) -> bool:
        """Connect one socket to ``host`` (an IP address) and ``port`` and keep it for
        ``connect_tcp``; ``False`` (nothing kept) for a host name, when one is kept already, or
        when the connection fails (the request meets that error itself)."""
        if (host, port) in self._spares:
            return False
        sock = self._socket(host)
        if sock is None:
            return False
        try:
            async with asyncio.timeout(timeout):
                await asyncio.get_running_loop().sock_connect(sock, (host, port))
        except (OSError, TimeoutError):
            sock.close()
            return False
        except BaseException:
            sock.close()
            raise
        if (host, port) in self._spares:  # another one came first
            sock.close()
            return False
        self._spares[(host, port)] = (sock, self.clock())
        if self._spare_expiry is not None:
            asyncio.get_running_loop().call_later(self._spare_expiry, self._expire, host, port, sock)
        return True

    def _expire(self, host: str, port: int, sock: socket.socket) -> None:
        kept = self._spares.get((host, port))
        if kept is not None and kept[0] is sock:
            del self._spares[(host, port)]
            sock.close()

    def _take_spare(self, host: str, port: int) -> socket.socket | None:
        kept = self._spares.pop((host, port), None)
        if kept is None:
            return None
        sock, opened = kept
        if (self._spare_expiry is not None and self.clock() - opened > self._spare_expiry) or is_socket_readable(sock):
            sock.close()  # too old, or the server closed it (or sent something unasked): not used
            return None
        return sock

    def close_spares(self) -> None:
        """Close the sockets ``open_spare`` kept and no request took."""
        spares, self._spares = self._spares, {}
        for sock, _ in spares.values():
            sock.close()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        if not local_address and not socket_options:
            spare = self._take_spare(host, port)
            if spare is not None:
                return SocketStream(spare)
        sock = self._socket(host)
        if sock is None:
            return await self._names.connect_tcp(host, port, timeout, local_address, socket_options)
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
            if local_address:
                sock.bind((local_address, 0))
            async with asyncio.timeout(timeout):
                await asyncio.get_running_loop().sock_connect(sock, (host, port))
        except TimeoutError:
            sock.close()
            raise httpcore.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc) or type(exc).__name__) from exc
        except BaseException:
            sock.close()
            raise
        return SocketStream(sock)

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        return await self._names.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class PlainHTTPTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` for ``http://`` URLs, made without a TLS context, its
    connections made by ``SocketBackend`` (which opens no TLS connection: ``https://`` endpoints get
    httpx's default transport, see ``endpoint_transport``)."""

    def __init__(self, limits: httpx.Limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)) -> None:
        # not super().__init__(): that is what loads the CA bundle
        import httpcore

        self.backend = SocketBackend(limits.keepalive_expiry)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=None, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, http1=True, http2=False,
            network_backend=self.backend)

    async def aclose(self) -> None:
        self.backend.close_spares()
        await super().aclose()

    def open_spare(self, url: httpx.URL, timeout: float | None) -> "asyncio.Task[bool] | None":
        """Start opening, on the running loop, the connection the first request to ``url`` will use
        (``SocketBackend.open_spare``); ``None`` when the pool has a connection already."""
        if self._pool.connections or not url.host:
            return None
        return asyncio.get_running_loop().create_task(
            self.backend.open_spare(url.host, url.port or 80, timeout))


def endpoint_transport(base_url: str) -> httpx.AsyncBaseTransport | None:
    """The transport for requests to ``base_url``: a ``PlainHTTPTransport`` for an ``http://`` URL
    when the environment names no proxy, else ``None`` (httpx's default transport and proxies)."""
    if urlsplit(base_url).scheme.lower() != "http":
        return None
    from urllib.request import getproxies

    if any(scheme != "no" for scheme in getproxies()):  # a proxy (NO_PROXY alone names none):
        return None  # keep httpx's own proxy handling, which a custom transport would turn off
    return PlainHTTPTransport()
