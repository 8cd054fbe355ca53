"""A small real HTTP proxy on 127.0.0.1 for the model client's proxy path (tests only).

``ForwardProxy`` serves each client connection with one upstream connection of its own: a ``CONNECT``
is answered ``200`` and becomes a byte pipe (a tunnel, for an ``https://`` endpoint); any other
request is forwarded with its target rewritten to origin form (``POST http://h:p/v1/x`` → ``POST
/v1/x``), one request after another on the same connection, its body by ``Content-Length``, the
answer piped back as it comes. When either side closes or breaks, the other is aborted (the client
sees what a dead upstream looks like through a proxy). ``connections`` counts client connections,
``requests`` the forwarded request lines.
"""

from __future__ import annotations

import asyncio
import contextlib


class ForwardProxy:
    def __init__(self) -> None:
        self.connections = 0
        self.requests: list[bytes] = []
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> ForwardProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        pipe: asyncio.Task[None] | None = None
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                line, _, rest = head.partition(b"\r\n")
                method, target, version = line.split(b" ", 2)
                self.requests.append(line)
                if method == b"CONNECT":
                    host, port = target.rsplit(b":", 1)
                    up_reader, up_writer = await asyncio.open_connection(host.decode(), int(port))
                    writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    await writer.drain()
                    await asyncio.gather(_pipe(reader, up_writer, writer), _pipe(up_reader, writer, up_writer))
                    return
                authority, _, path = target.partition(b"://")[2].partition(b"/")
                if upstream is None:
                    host, port = authority.rsplit(b":", 1)
                    upstream = await asyncio.open_connection(host.decode(), int(port))
                    pipe = asyncio.get_running_loop().create_task(_pipe(upstream[0], writer, upstream[1]))
                length = next((int(h.split(b":", 1)[1]) for h in rest.split(b"\r\n")
                               if h.lower().startswith(b"content-length:")), 0)
                body = await reader.readexactly(length) if length else b""
                upstream[1].write(b" ".join([method, b"/" + path, version]) + b"\r\n" + rest + body)
                await upstream[1].drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            writer.transport.abort()
        finally:
            if upstream is not None:
                upstream[1].transport.abort()
            if pipe is not None:
                with contextlib.suppress(BaseException):
                    await pipe
            writer.transport.abort()
            self._tasks.discard(task)


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter, other: asyncio.StreamWriter) -> None:
    """Copy ``source`` to ``sink`` until it ends or breaks; then abort both sides (``sink``, and
    ``other``: the writer of ``source``'s own connection)."""
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        sink.transport.abort()
        other.transport.abort()


class Socks5Proxy:
    """A small real SOCKS5 proxy on 127.0.0.1 (RFC 1928, ``CONNECT`` only; RFC 1929 username and
    password when ``credentials`` is given, else no authentication). ``connects`` lists each
    ``(address type, host, port)`` a client asked for (``"ipv4"``/``"domain"``/``"ipv6"``),
    ``logins`` each ``(username, password)`` offered; bytes are piped both ways after the reply."""

    def __init__(self, credentials: tuple[str, str] | None = None) -> None:
        self.credentials = credentials
        self.connects: list[tuple[str, str, int]] = []
        self.logins: list[tuple[str, str]] = []
        self.port = 0
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def url(self, scheme: str = "socks5") -> str:
        auth = f"{self.credentials[0]}:{self.credentials[1]}@" if self.credentials else ""
        return f"{scheme}://{auth}127.0.0.1:{self.port}"

    async def __aenter__(self) -> Socks5Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            version, count = await reader.readexactly(2)
            methods = await reader.readexactly(count)
            wanted = 0x02 if self.credentials else 0x00
            if version != 5 or wanted not in methods:
                writer.write(b"\x05\xff")
                return
            writer.write(bytes([5, wanted]))
            if self.credentials:
                _, ulen = await reader.readexactly(2)
                user = (await reader.readexactly(ulen)).decode()
                (plen,) = await reader.readexactly(1)
                password = (await reader.readexactly(plen)).decode()
                self.logins.append((user, password))
                ok = (user, password) == self.credentials
                writer.write(b"\x01\x00" if ok else b"\x01\x01")
                if not ok:
                    return
            _, command, _, kind = await reader.readexactly(4)
            if kind == 1:
                host, kind_name = ".".join(str(b) for b in await reader.readexactly(4)), "ipv4"
            elif kind == 3:
                (length,) = await reader.readexactly(1)
                host, kind_name = (await reader.readexactly(length)).decode(), "domain"
            else:
                import ipaddress

                host, kind_name = str(ipaddress.IPv6Address(await reader.readexactly(16))), "ipv6"
            port = int.from_bytes(await reader.readexactly(2), "big")
            self.connects.append((kind_name, host, port))
            if command != 1:
                writer.write(b"\x05\x07\x00\x01\x00\x00\x00\x00\x00\x00")
                return
            try:
                upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
            except OSError:
                writer.write(b"\x05\x05\x00\x01\x00\x00\x00\x00\x00\x00")
                return
            writer.write(b"\x05\x00\x00\x01\x00\x00\x00\x00\x00\x00")
            await writer.drain()

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                with contextlib.suppress(ConnectionError):
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                with contextlib.suppress(OSError):
                    dst.close()

            await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            for w in (writer, upstream_writer):
                if w is not None:
                    with contextlib.suppress(OSError):
                        w.close()
            self._tasks.discard(task)
