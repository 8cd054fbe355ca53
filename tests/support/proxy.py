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
