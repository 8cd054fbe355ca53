"""The HTTP transport of a model endpoint: httpx's, with its first connection opened ahead.

Role: ``endpoint_transport(base_url)`` gives the transport ``ChatClient`` hands to
``httpx.AsyncClient``: with no proxy for the endpoint in the environment, ``TLSTransport`` for
``https://`` (httpx's verified TLS context, made as httpx makes it), ``PlainHTTPTransport`` for
``http://`` (no TLS context: httpx's constructor loads the CA bundle even when no connection uses
TLS; its connections to an IP address are ``SocketBackend``'s own sockets); with one (httpx's own
reading of ``HTTP(S)_PROXY``/``ALL_PROXY``/``NO_PROXY``), ``ProxyTransport``: httpx's proxy pool with
the same keep-alive, TCP options and resend. The direct two open one connection ahead of the first request
(``ChatClient.preconnect``: name, connect, TLS handshake). ``HeldBody`` holds a body's last byte
until the caller's ``ready``. Importing the module keeps httpx from importing its command-line
client and marks a missing ``sniffio`` as missing. What each saves: bench/README.md.

Must never: weaken TLS — an ``https://`` endpoint always gets httpx's verified context, and a
connection opened ahead is handshaken with that context and the URL's host name —, open a TLS
connection on the plain-http path, open a connection ahead around a proxy, or send anything on a
connection opened ahead before a request takes it; send a request again after any byte of its
answer arrived, or with other bytes than the first time, or more than once.

Keep-alive (direct and through a proxy): a connection the pool keeps lives ``KEEPALIVE_EXPIRY`` (300 s; httpcore's default is
5 s, so nearly every prompt a person types after reading an answer opened a new connection and TLS
handshake) — under the 400 s Cloudflare (in front of most hosted providers) keeps an idle HTTP/1.1
client connection, so our side lets go first; a server that keeps it less (nginx 75 s, AWS ALB 60 s)
closes it, which the pool sees before reusing it. Every connection gets TCP keep-alive probes
(``_tune``: after 15 s idle as Go's dialer, then every 5 s, 3 lost → dead) that keep a NAT's or
firewall's state for it and find a dead one while it is idle, and ``TCP_USER_TIMEOUT`` (30 s) that
fails a request written into a connection a firewall silently black-holes instead of waiting for
the stream's idle timeout (the kernel's ``ETIMEDOUT`` is a ``TimeoutError`` in Python: ``_ours`` tells
it from our own timeouts, so it fails the try as a broken connection). ``EndpointPool`` (and
``EndpointHTTPProxy``): a request that fails on a reused connection (or one
opened ahead) before any byte of its answer arrived — the connection was dead before it was
used — is sent again, once, byte for byte, on a fresh connection (what browsers do for a stale
keep-alive connection); a failure after the first answer byte, or on a fresh connection, is the
caller's.

Details: ``httpx._main`` pulls in click, pygments and rich when they happen to be installed, for a
CLI this server never runs; httpx falls back to its own stub ``main``. httpcore runs ``import
sniffio`` on every lock and event it sets up, and a failed import searches every ``sys.path`` entry
again; a name marked ``None`` fails at once with the same ``ImportError`` (anyio ≥ 4.12 no longer
needs sniffio). ``SocketBackend`` is the socket layer only — httpcore and h11 still speak HTTP, httpx
is still the client; for an IP address on the plain-http path it skips anyio's per-request task
group, event, transport and cancel scopes, and sends what httpcore writes for one request (head,
then body) with one ``sendmsg``, so the endpoint gets the request in one segment as other clients
send it. A host name and every https connection keep anyio's backend (its name resolution, address
fallback and TLS).
"""

from __future__ import annotations

import asyncio
import contextvars
import ipaddress
import logging
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

try:  # h11's own header list and its validation (``ValidatingPool``); without them h11 validates per request
    import h11._headers as _h11_headers  # noqa: E402
    _H11Headers: Any = _h11_headers.Headers
except (ImportError, AttributeError):  # pragma: no cover — another h11
    _H11Headers = None


log = logging.getLogger(__name__)

_HOLDING: contextvars.ContextVar["SocketStream | None"] = contextvars.ContextVar("_HOLDING", default=None)
"""The ``SocketStream`` that last kept bytes unsent in this task (``HeldBody`` sends them before it waits)."""

KEEPALIVE_EXPIRY = 300.0
"""Seconds an idle connection (or one opened ahead) is kept for the next request (module docstring)."""
TCP_KEEPALIVE = (15, 5, 3)
"""TCP keep-alive on every connection: probes after 15 s idle, then every 5 s; 3 unanswered → dead."""
TCP_USER_TIMEOUT_MS = 30_000
"""How long written bytes may stay unacknowledged before the kernel gives the connection up."""


def _tune(sock: socket.socket | None) -> None:
    """TCP keep-alive and ``TCP_USER_TIMEOUT`` on ``sock`` (where the platform has them; an
    option it refuses is left as it was)."""
    if sock is None:
        return
    idle, interval, count = TCP_KEEPALIVE
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPALIVE", idle), ("TCP_KEEPINTVL", interval),
                        ("TCP_KEEPCNT", count), ("TCP_USER_TIMEOUT", TCP_USER_TIMEOUT_MS)):
        if hasattr(socket, name):  # (TCP_KEEPALIVE: macOS's name for the idle time)
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, name, value in options:
        try:
            sock.setsockopt(level, name, value)
        except OSError:
            pass


def _ours(exc: TimeoutError) -> bool:
    """Whether ``exc`` is a timeout of ours (``asyncio.timeout``: no ``errno``) rather than the
    kernel's ``ETIMEDOUT`` — a connection it gave up (``TCP_USER_TIMEOUT``, keep-alive probes
    unanswered), which Python raises as ``TimeoutError`` too: that one is a broken connection (a
    ``ReadError``, sent again when it was a kept one), not a slow server."""
    return exc.errno is None


class _Attempt:
    """One try of a request on one connection, as the network stream it went out on saw it:
    ``reused`` (the connection had carried a request before, or was opened ahead of it) and
    ``answered`` (a byte came back); ``fresh``: this try must not take a kept connection."""

    __slots__ = ("stream", "reused", "answered", "fresh")

    def __init__(self, fresh: bool = False) -> None:
        self.stream: Any = None
        self.reused = False
        self.answered = False
        self.fresh = fresh

    def stale(self) -> bool:
        """Whether the try failed on a connection that was dead before it was used: a reused
        one that gave no byte of an answer."""
        return self.stream is not None and self.reused and not self.answered


_ATTEMPT: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar("_ATTEMPT", default=None)
"""The try ``EndpointPool`` is making in this task (read by the streams its request goes out on)."""


class _Tracks:
    """What a network stream tells the try using it (``_Attempt``): whether it carried a request
    before, whether the current one got a byte back."""

    _reused = False
    _attempt: _Attempt | None = None

    def _begin(self) -> None:
        """A write: the first of a request marks the try as made on this stream."""
        attempt = _ATTEMPT.get()
        if attempt is not None and attempt.stream is None:
            attempt.stream, attempt.reused = self, self._reused
            self._reused = True
            self._attempt = attempt

    def _answered(self) -> None:
        attempt = self._attempt
        if attempt is not None:
            attempt.answered = True
            self._attempt = None


class HeldBody(httpx.AsyncByteStream):
    """A request body (httpx ``content``) whose last byte waits for ``ready``: everything before it
    — the connection taken, the head and ``body[:-1]`` written (``SocketStream``'s kept bytes sent
    first) — is done, then ``ready`` is awaited (once), then the last byte is written. When ``ready``
    has a ``done_now()`` that says it is done by then (it may raise ``ready``'s error), nothing is
    held back or awaited: the request leaves whole, in one send, as without ``ready``. If ``ready``
    raises, its exception leaves as it is: httpcore closes a connection whose request was not
    written whole (never back to the pool), so the endpoint never has a complete request. Sent with
    the request's own head (its ``Content-Length``): the head a request without ``ready`` gets.
    Iterated again (the request sent again on a fresh connection), the same bytes, ``ready`` not
    awaited twice."""

    def __init__(self, body: bytes, ready: Awaitable[Any], write_timeout: float | None) -> None:
        self._body = body
        self._ready = ready
        self._write_timeout = write_timeout
        self._settled = False
        self.failed: BaseException | None = None  # what ``ready`` raised (never mapped to a network error)

    async def __aiter__(self) -> Any:
        body = self._body
        if len(body) > 1:
            yield body[:-1]
        if not self._settled:  # (sent again by ``EndpointPool``: ``ready`` finished the first time)
            done_now = getattr(self._ready, "done_now", None)
            try:
                if done_now is not None and done_now():
                    self._settled = True  # done while the request was made: nothing is held back
                else:
                    stream = _HOLDING.get()
                    if stream is not None and stream._unsent:
                        await stream.send_kept(self._write_timeout)
                    await self._ready
                    self._settled = True
            except BaseException as exc:
                self.failed = exc
                raise
        yield body[-1:]


class SocketStream(_Tracks, httpcore.AsyncNetworkStream):
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

    def __init__(self, sock: socket.socket, *, reused: bool = False) -> None:
        self._sock = sock
        self._loop = asyncio.get_running_loop()
        self._unsent: list[bytes] = []
        self._reused = reused  # opened ahead: it waited, as a kept connection does

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._begin()
            if not self._unsent:
                _HOLDING.set(self)
            self._unsent.append(bytes(buffer))

    async def send_kept(self, timeout: float | None) -> None:
        """Send what ``write`` kept, now (a ``HeldBody`` about to wait), as ``read`` would: a
        timeout raises ``WriteTimeout``, another error is left for the first read to meet."""
        try:
            await self._send_unsent(timeout)
        except TimeoutError as exc:
            if _ours(exc):
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
            except TimeoutError as exc:
                if _ours(exc):
                    raise httpcore.WriteTimeout("timed out sending the request") from None
            except OSError:
                pass  # as httpcore's own write error: read what the server answered before it closed
        try:
            data = self._sock.recv(max_bytes)
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc
        else:
            if data:
                self._answered()
            return data
        try:
            async with asyncio.timeout(timeout):
                data = await self._loop.sock_recv(self._sock, max_bytes)
            if data:
                self._answered()
            return data
        except TimeoutError as exc:
            if _ours(exc):
                raise httpcore.ReadTimeout("timed out reading the response") from None
            raise httpcore.ReadError(str(exc)) from exc  # the kernel gave the connection up (TCP_USER_TIMEOUT)
        except OSError as exc:
            raise httpcore.ReadError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self._unsent = []
        self._sock.close()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        """Refused: this backend serves the plain-http transport only, whose client never asks an
        ``https://`` URL (redirects are not followed); TLS is ``TLSTransport``'s (anyio's streams)."""
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


class _Tracked(_Tracks, httpcore.AsyncNetworkStream):
    """Another backend's stream (anyio's: a host name, TLS) as it is, telling the try using it
    what ``SocketStream`` tells (``_Tracks``); its TLS stream is tracked the same way."""

    def __init__(self, stream: httpcore.AsyncNetworkStream, *, reused: bool = False) -> None:
        self._stream = stream
        self._reused = reused

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self._stream.read(max_bytes, timeout)
        if data:
            self._answered()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if buffer:
            self._begin()
        await self._stream.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        return _Tracked(await self._stream.start_tls(ssl_context, server_hostname, timeout), reused=self._reused)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _Handshaken(httpcore.AsyncNetworkStream):
    """A spare connection whose TLS handshake is done, as ``connect_tcp`` hands it to the pool:
    httpcore's ``start_tls`` (its next call) gets the TLS stream when it asks for the context and
    server name the handshake used, else the spare is closed and a new connection made for it."""

    def __init__(self, tls: httpcore.AsyncNetworkStream, context: Any, name: str,
                 reconnect: Any) -> None:
        self._tls, self._context, self._name, self._reconnect = tls, context, name, reconnect

    async def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                        timeout: float | None = None) -> httpcore.AsyncNetworkStream:
        if ssl_context is self._context and server_hostname == self._name:
            return _Tracked(self._tls, reused=True)  # opened ahead: it waited, as a kept connection does
        await self._tls.aclose()
        plain = await self._reconnect(timeout)
        return _Tracked(await plain.start_tls(ssl_context, server_hostname, timeout))

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._tls.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._tls.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._tls.aclose()

    def get_extra_info(self, info: str) -> Any:
        return self._tls.get_extra_info(info)


class SocketBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend for the model endpoint's transport. On the plain-http transport
    (``sockets``) a host that is an IP address gets a ``SocketStream`` (``loop.sock_connect``,
    ``TCP_NODELAY`` as asyncio sets it); a host name, a unix socket and every connection of the
    https transport go to anyio's backend as before (its name resolution, address fallback, TLS).

    ``open_spare`` opens one connection ahead of the first request (after ``session/new`` or a
    load: its set-up — name resolution, connect and, for https, the TLS handshake — is then not on
    the way to the model); ``connect_tcp`` takes it for the first connection the pool opens to that
    address when it is younger than ``spare_expiry`` (the pool's keep-alive expiry: an idle
    connection is not kept longer than one the pool kept) and the server has not closed it; else it
    is closed and a connection is opened as before. Nothing is ever sent on it before a request. A
    raw socket is checked as the pool checks its idle connections (``is_socket_readable``); an
    anyio stream is watched by a task reading it (a TLS 1.3 server sends its session tickets after
    the handshake, which makes the socket readable: the watch reads them; a close, or any byte an
    HTTP/1.1 server sends before a request, drops the spare)."""

    def __init__(self, spare_expiry: float | None = KEEPALIVE_EXPIRY, *, sockets: bool = True) -> None:
        self._names = httpcore.AnyIOBackend()
        self._sockets = sockets
        self._spare_expiry = spare_expiry
        self._spares: dict[tuple[str, int], tuple[Any, float]] = {}
        self._watches: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._closing: set[asyncio.Task[None]] = set()
        self.clock = time.monotonic

    def _socket(self, host: str) -> socket.socket | None:
        """A non-blocking ``TCP_NODELAY`` socket for an IP address ``host``; ``None`` for a host
        name, or when this backend leaves every connection to anyio's (``sockets=False``)."""
        if not self._sockets:
            return None
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
        _tune(sock)
        return sock

    def keeps_spare(self, host: str, port: int) -> bool:
        """Whether a connection opened ahead to ``host`` and ``port`` is kept (``open_spare``)."""
        return (host, port) in self._spares

    async def open_spare(self, host: str, port: int, timeout: float | None = None,
                         tls: tuple[Any, str] | None = None) -> bool:
        """Open one connection to ``host`` and ``port`` and keep it for ``connect_tcp``; ``tls``:
        the SSL context and server name to do its TLS handshake with (the pool's own). ``False``
        (nothing kept) when one is kept already or the connection fails (the request meets that
        error itself)."""
        key = (host, port)
        if key in self._spares:
            return False
        sock = None if tls is not None else self._socket(host)
        spare: Any
        try:
            if sock is not None:
                async with asyncio.timeout(timeout):
                    await asyncio.get_running_loop().sock_connect(sock, (host, port))
                spare = sock
            else:
                spare = await self._names.connect_tcp(host, port, timeout)
                _tune(spare.get_extra_info("socket"))
                if tls is not None:
                    plain = spare
                    try:
                        spare = await plain.start_tls(tls[0], tls[1], timeout)
                    except BaseException:
                        await plain.aclose()  # (httpcore closes it on an error, not on a cancellation)
                        raise
        except (OSError, TimeoutError, httpcore.ConnectError, httpcore.ConnectTimeout):
            if sock is not None:
                sock.close()
            return False
        except BaseException:
            if sock is not None:
                sock.close()
            raise
        if key in self._spares:  # another one came first
            await self._close(spare)
            return False
        if not isinstance(spare, socket.socket):
            self._watches[key] = asyncio.get_running_loop().create_task(self._watch(key, spare))
            if tls is not None:
                spare = _Handshaken(spare, tls[0], tls[1], lambda t: self._names.connect_tcp(host, port, t))
        self._spares[key] = (spare, self.clock())
        if self._spare_expiry is not None:
            asyncio.get_running_loop().call_later(self._spare_expiry, self._expire, key, spare)
        return True

    async def _watch(self, key: tuple[str, int], stream: httpcore.AsyncNetworkStream) -> None:
        """Read the kept ``stream`` until it is taken (this task is then cancelled): whatever
        comes (bytes, the end, an error) means the server closed it or it is of no use."""
        try:
            await stream.read(1)
        except asyncio.CancelledError:
            raise  # taken, or expired: no longer ours to close
        except Exception:  # noqa: BLE001 — a broken connection: dropped as a closed one
            pass
        kept = self._spares.get(key)
        if kept is not None and self._watches.get(key) is asyncio.current_task():
            del self._spares[key]
            del self._watches[key]
            await self._close(kept[0])

    @staticmethod
    async def _close(spare: Any) -> None:
        if isinstance(spare, socket.socket):
            spare.close()
        else:
            await spare.aclose()

    def _expire(self, key: tuple[str, int], spare: Any) -> None:
        kept = self._spares.get(key)
        if kept is None or kept[0] is not spare:
            return
        if isinstance(spare, socket.socket):
            del self._spares[key]
            spare.close()
        else:
            task = asyncio.get_running_loop().create_task(self._close_spare(key))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _close_spare(self, key: tuple[str, int]) -> None:
        spare = await self._take_spare(*key)
        if spare is not None:
            await self._close(spare)

    async def _take_spare(self, host: str, port: int) -> Any:
        kept = self._spares.pop((host, port), None)
        watch = self._watches.pop((host, port), None)
        if watch is not None:
            watch.cancel()
            await asyncio.wait([watch])
            if not watch.cancelled():  # it ended by itself: the spare is closed
                return None
        if kept is None:
            return None
        spare, opened = kept
        expired = self._spare_expiry is not None and self.clock() - opened > self._spare_expiry
        if expired or (isinstance(spare, socket.socket) and is_socket_readable(spare)):
            await self._close(spare)  # too old, or the server closed it (or sent something unasked): not used
            return None
        return spare

    async def close_spares(self) -> None:
        """Close the connections ``open_spare`` kept and no request took."""
        for key in list(self._spares):
            await self._close_spare(key)
        await asyncio.gather(*self._closing, return_exceptions=True)

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: Iterable[Any] | None = None) -> httpcore.AsyncNetworkStream:
        attempt = _ATTEMPT.get()
        if (not local_address and not socket_options and (host, port) in self._spares
                and not (attempt is not None and attempt.fresh)):
            spare = await self._take_spare(host, port)
            if isinstance(spare, socket.socket):
                return SocketStream(spare, reused=True)
            if spare is not None:
                return spare if isinstance(spare, _Handshaken) else _Tracked(spare, reused=True)
        sock = self._socket(host)
        if sock is None:
            stream = await self._names.connect_tcp(host, port, timeout, local_address, socket_options)
            _tune(stream.get_extra_info("socket"))
            return _Tracked(stream)
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


class ValidatingPool(httpcore.AsyncConnectionPool):
    """httpcore's connection pool, handing h11 a request head it has validated once: h11 checks
    every header name and value against its grammar for each request it sends, and a model
    request's head is the same each time but for its ``Content-Length`` (last, as httpx puts it).
    The head before it is validated by h11's own ``normalize_and_validate`` when it differs from the
    last one; the ``Content-Length`` is taken when it is digits only (what h11 accepts), and h11
    gets both as its own ``Headers``, which it takes as validated. Anything else (no
    ``Content-Length`` last, a head h11 refuses) goes to h11 as it came: it refuses it as before."""

    _head: tuple[list[tuple[bytes, bytes]], list[tuple[bytes, bytes, bytes]]] | None = None

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        request.headers = self._validated(request.headers)
        return await super().handle_async_request(request)

    def prepare(self, headers: list[tuple[bytes, bytes]]) -> None:
        """Validate now the head ``headers`` (with its ``Content-Length``) starts with."""
        self._validated(headers)

    def _validated(self, headers: Any) -> Any:
        if _H11Headers is None or not headers or isinstance(headers, _H11Headers):  # (validated: sent again)
            return headers
        name, value = headers[-1]
        if name.lower() != b"content-length" or not value.isdigit() or len(value) > 20:
            return headers
        fixed = headers[:-1]
        if self._head is None or self._head[0] != fixed:
            try:
                items = _h11_headers.normalize_and_validate(fixed)._full_items
            except Exception:  # noqa: BLE001 — h11 says so again, in its place, as before
                return headers
            if any(lower in (b"content-length", b"transfer-encoding") for _, lower, _ in items):
                return headers
            self._head = (fixed, items)
        return _H11Headers([*self._head[1], (name, b"content-length", value)])


_STALE_ERRORS = (httpcore.ReadError, httpcore.WriteError, httpcore.RemoteProtocolError)
"""How a request written into a dead connection fails (reset, broken pipe, closed unanswered,
``TCP_USER_TIMEOUT``); a timeout is not one of them (the server may be slow, not gone)."""


class _Resends:
    """What ``EndpointPool`` adds to an httpcore pool (``httpcore.AsyncConnectionPool`` or one of its
    proxy pools, whose connections ``SocketBackend`` makes): a request whose try failed on a
    connection that was dead before it was used is sent again, once (``EndpointPool``)."""

    resent = 0
    _connections: list[Any]
    _optional_thread_lock: Any

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        attempt = _Attempt()
        token = _ATTEMPT.set(attempt)
        try:
            try:
                return await super().handle_async_request(request)
            except _STALE_ERRORS:
                if not attempt.stale() or getattr(request.stream, "failed", None) is not None:
                    raise
            log.info("the connection to %s was dead before it was used: the request is sent again on a new one",
                     request.url.host.decode("ascii", "replace"))
            self.resent += 1
            _ATTEMPT.set(_Attempt(fresh=True))
            await self._close_idle(request.url.origin)
            return await super().handle_async_request(request)
        finally:
            _ATTEMPT.reset(token)

    async def _close_idle(self, origin: httpcore.URL | Any) -> None:
        with self._optional_thread_lock:
            idle = [c for c in self._connections if c.is_idle() and c.can_handle_request(origin)]
            for connection in idle:
                self._connections.remove(connection)
        await self._close_connections(idle)  # type: ignore[attr-defined]


class EndpointPool(_Resends, ValidatingPool):
    """``ValidatingPool`` that sends a request again, once, when its try failed on a connection
    that was dead before it was used: a reused connection (or one opened ahead) that failed it
    (``_STALE_ERRORS``) before any byte of an answer came back. The same ``httpcore.Request`` is
    sent — its head and body, the same bytes (a ``HeldBody``'s ``ready`` is not awaited again; a
    ``ready`` that failed is never sent again) — on a new connection: the other idle connections
    to that origin are closed first (they waited as long as the dead one) and none opened ahead is
    taken. ``resent`` counts these. A try that got a byte of its answer, failed another way, or was
    made on a fresh connection fails as it did."""


class EndpointHTTPProxy(_Resends, httpcore.AsyncHTTPProxy):
    """httpcore's pool through an HTTP(S) proxy (a forwarded request for an ``http://`` endpoint, a
    ``CONNECT`` tunnel for an ``https://`` one) that resends as ``EndpointPool`` does. A tunnel's
    ``CONNECT`` answer counts as the first try's answer: a try on a new tunnel is never sent again."""


_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20,  # httpx's defaults
                       keepalive_expiry=KEEPALIVE_EXPIRY)


class EndpointTransport(httpx.AsyncHTTPTransport):
    """``httpx.AsyncHTTPTransport`` as httpx's client makes it when no proxy is named (its pool,
    limits, HTTP/1.1), its connections made by ``SocketBackend``, which can open the first one
    ahead (``open_spare``)."""

    def __init__(self, ssl_context: Any, limits: httpx.Limits = _LIMITS) -> None:
        # not super().__init__(): the context is given (none for plain http: that is what loads the CA bundle)
        self._ssl_context = ssl_context
        self.backend = SocketBackend(limits.keepalive_expiry, sockets=ssl_context is None)
        self._pool = EndpointPool(
            ssl_context=ssl_context, max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, http1=True, http2=False,
            network_backend=self.backend)

    async def aclose(self) -> None:
        await self.backend.close_spares()
        await super().aclose()

    def open_spare(self, url: httpx.URL, timeout: float | None) -> "asyncio.Task[bool] | None":
        """Start opening, on the running loop, the connection the first request to ``url`` will use
        (``SocketBackend.open_spare``; for an ``https://`` URL with the TLS handshake the pool's
        connection would do: its context, ``http/1.1`` offered by ALPN as httpcore offers it, the
        URL's host as the server name); ``None`` when the pool has a connection already, or a spare
        for it is kept."""
        if self._pool.connections or not url.host:
            return None
        tls = None
        if url.scheme == "https":
            if self._ssl_context is None:
                return None
            tls = (self._ssl_context, url.host)
        port = url.port or (443 if tls else 80)
        if self.backend.keeps_spare(url.host, port):
            return None
        if tls is not None:
            self._ssl_context.set_alpn_protocols(["http/1.1"])  # type: ignore[union-attr]  # as httpcore sets it before each handshake
        return asyncio.get_running_loop().create_task(self.backend.open_spare(url.host, port, timeout, tls))


class PlainHTTPTransport(EndpointTransport):
    """The transport for ``http://`` URLs, made without a TLS context, its connections to an IP
    address made by ``SocketBackend`` itself (which opens no TLS connection: ``https://``
    endpoints get ``TLSTransport``, see ``endpoint_transport``)."""

    def __init__(self, limits: httpx.Limits = _LIMITS) -> None:
        super().__init__(None, limits)


class TLSTransport(EndpointTransport):
    """The transport for ``https://`` URLs: httpx's verified TLS context, made as httpx's client
    makes it (``create_ssl_context``: certifi's CA bundle, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``
    from the environment), every connection through anyio's backend."""

    def __init__(self, limits: httpx.Limits = _LIMITS) -> None:
        super().__init__(httpx.create_ssl_context(verify=True, trust_env=True), limits)


class ProxyTransport(httpx.AsyncHTTPTransport):
    """The transport for an endpoint reached through a proxy: httpx's own proxy pool, made as httpx's
    client makes it for that proxy (``httpx.AsyncHTTPTransport(proxy=…)``: HTTP(S) proxies forward an
    ``http://`` request and tunnel an ``https://`` one with ``CONNECT``; SOCKS with ``socksio``; the
    proxy URL's credentials; httpx's verified TLS context), with what the direct transports have:
    ``KEEPALIVE_EXPIRY``, ``_tune``'s TCP options on the connection to the proxy (``SocketBackend``
    with anyio's streams) and the resend of a request whose kept connection was dead
    (``EndpointHTTPProxy``). Nothing is opened ahead (``ChatClient.preconnect`` is for
    ``EndpointTransport`` only)."""

    def __init__(self, proxy: str, limits: httpx.Limits = _LIMITS) -> None:
        # not super().__init__(): httpx's would make the pool without our backend and resend
        settings = httpx.Proxy(url=proxy)
        url = settings.url
        self.backend = SocketBackend(limits.keepalive_expiry, sockets=False)
        common: dict[str, Any] = dict(
            proxy_url=httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path),
            proxy_auth=settings.raw_auth, ssl_context=httpx.create_ssl_context(verify=True, trust_env=True),
            max_connections=limits.max_connections, max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry, http1=True, http2=False, network_backend=self.backend)
        if url.scheme in ("http", "https"):
            self._pool = EndpointHTTPProxy(proxy_headers=settings.headers.raw, proxy_ssl_context=settings.ssl_context,
                                           **common)
        elif url.scheme in ("socks5", "socks5h"):
            try:
                import socksio  # noqa: F401 — as httpx: its absence is said at once, not at the first request
            except ImportError:
                raise ProxySetupError(
                    f"the proxy {_shown_proxy(proxy)} (from HTTP_PROXY/HTTPS_PROXY/ALL_PROXY) is a SOCKS proxy, which "
                    "needs the socksio package: install agent-server with its dependencies again (`pip install "
                    "'httpx[socks]'` in its environment), or unset the variable") from None

            class EndpointSOCKSProxy(_Resends, httpcore.AsyncSOCKSProxy):
                """httpcore's SOCKS pool that resends as ``EndpointPool`` does."""

            self._pool = EndpointSOCKSProxy(**common)
        else:
            raise ProxySetupError(f"the proxy {_shown_proxy(proxy)} (from HTTP_PROXY/HTTPS_PROXY/ALL_PROXY) has the "
                                  f"scheme {url.scheme!r}; agent-server reaches the model through http, https, socks5 "
                                  "or socks5h proxies")


class ProxySetupError(ValueError):
    """The proxy the environment names for the endpoint cannot be used (a SOCKS proxy without
    ``socksio``, an unknown scheme): a sentence for the user."""


def _shown_proxy(proxy: str) -> str:
    """``proxy`` without its password (``socks5://user:***@host:port``)."""
    parts = urlsplit(proxy)
    if parts.password is None:
        return proxy
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


def proxy_for(base_url: str) -> str | None:
    """The proxy httpx's client would send requests for ``base_url`` through — ``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``ALL_PROXY`` and ``NO_PROXY`` read by httpx's own code, the most specific
    pattern first, as its client picks a mount — or ``None`` (none applies)."""
    from httpx._utils import URLPattern, get_environment_proxies

    proxies = get_environment_proxies()
    if not proxies:
        return None
    url = httpx.URL(base_url)
    for pattern in sorted(URLPattern(key) for key in proxies):
        if pattern.matches(url):
            return proxies[pattern.pattern]
    return None


def endpoint_transport(base_url: str) -> httpx.AsyncBaseTransport | None:
    """The transport for requests to ``base_url``: with no proxy for it in the environment, a
    ``PlainHTTPTransport`` for an ``http://`` URL, a ``TLSTransport`` for an ``https://`` one; with
    one, a ``ProxyTransport`` through it; ``None`` (httpx's default) for another scheme, or when
    httpx's proxy reading is not where this httpx keeps it."""
    scheme = urlsplit(base_url).scheme.lower()
    if scheme not in ("http", "https"):
        return None
    from urllib.request import getproxies

    if any(name != "no" for name in getproxies()):  # a proxy is named (NO_PROXY alone names none)
        try:
            proxy = proxy_for(base_url)
        except (ImportError, AttributeError):  # pragma: no cover — another httpx: its own handling
            return None
        if proxy is not None:
            return ProxyTransport(proxy)
    return PlainHTTPTransport() if scheme == "http" else TLSTransport()
