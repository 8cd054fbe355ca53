"""A real TLS endpoint on 127.0.0.1 for the model client's https path.

``TLSEndpoint`` serves a certificate for ``localhost`` and ``127.0.0.1`` signed by a CA made for
the test (``trustme``); ``ca_file`` is that CA's PEM, which a client trusts the way httpx reads the
environment (``SSL_CERT_FILE``). Each accepted connection (its TLS handshake done) is recorded:
the bytes received and an event set when it ended; a complete request (``Content-Length``) is
answered with a short SSE stream (``Connection: close``). ``close_first``: the first connection is
closed at once after its handshake, unanswered (a server's idle timeout). ``keep_alive``: the
answer has a ``Content-Length`` and the connection waits for the next request; ``drop_idle()``
dooms the connections waiting for a request now: the next one they carry is recorded in
``dropped`` and answered with a TCP RST (a firewall that forgot the connection).

``local_ca``, ``SSE_ANSWER`` and ``whole_request`` also serve ``bench/first_request_tls.py``'s
endpoint (a process of its own).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
from pathlib import Path
from typing import Any

try:
    import trustme
except ImportError as exc:  # a venv made before pyproject's test extras named it
    raise ImportError("trustme is not installed in this venv: re-run `bash scripts/setup.sh` "
                      "(pyproject's test extras name it)") from exc

from .timeouts import HANG

SSE_BODY = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
            b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')
SSE_ANSWER = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + SSE_BODY
KEPT_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n" % len(SSE_BODY)
               + SSE_BODY)


def local_ca(directory: Path) -> tuple[Any, Path]:
    """A CA made for the run (``trustme.CA``) and its PEM, written to ``directory / "ca.pem"`` (what a
    client trusts through ``SSL_CERT_FILE``); the endpoint's certificate is its
    ``issue_cert("localhost", "127.0.0.1")``."""
    ca = trustme.CA()
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    return ca, ca_file


def whole_request(received: bytes) -> tuple[int, bytes] | None:
    """The body's length and what follows the head when ``received`` starts with a whole request
    (its ``Content-Length`` of body there), else ``None``."""
    head, _, rest = received.partition(b"\r\n\r\n")
    fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line)
    length = int(fields.get(b"Content-Length", b"-1"))
    return (length, rest) if 0 <= length <= len(rest) else None


class TLSEndpoint:
    def __init__(self, directory: Path, *, close_first: bool = False, keep_alive: bool = False) -> None:
        ca, self.ca_file = local_ca(directory)
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(self._context)
        self.close_first = close_first
        self.keep_alive = keep_alive
        self.dropped: list[bytes] = []
        self._waiting: set[int] = set()  # connections (their index) waiting for a request
        self._doomed: set[int] = set()
        self.connections: list[dict[str, Any]] = []
        self.accepted = asyncio.Event()
        self.arrived = asyncio.Event()  # set at each chunk received, on any connection
        self._server: asyncio.base_events.Server | None = None
        self.port = 0

    def url(self, host: str = "localhost") -> str:
        return f"https://{host}:{self.port}/v1"

    async def __aenter__(self) -> TLSEndpoint:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self._context)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def wait_connections(self, n: int) -> None:
        while len(self.connections) < n:
            self.accepted.clear()
            await asyncio.wait_for(self.accepted.wait(), HANG)

    def drop_idle(self) -> int:
        """Doom the connections waiting for a request now (``keep_alive``); how many."""
        self._doomed |= self._waiting
        return len(self._waiting)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        record: dict[str, Any] = {"received": b"", "done": asyncio.Event(), "requests": 0}
        self.connections.append(record)
        number = len(self.connections)
        self.accepted.set()
        self._waiting.add(number)
        start = 0  # where the request being read starts in ``received``
        try:
            if self.close_first and len(self.connections) == 1:
                return
            while True:
                chunk = await reader.read(1 << 20)
                if not chunk:
                    return
                record["received"] += chunk
                self._waiting.discard(number)
                self.arrived.set()
                whole = whole_request(record["received"][start:])
                if whole is not None:
                    length, rest = whole
                    if number in self._doomed:
                        self.dropped.append(record["received"][start:])
                        sock = writer.get_extra_info("socket")
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        writer.transport.abort()
                        return
                    record["requests"] += 1
                    if not self.keep_alive:
                        writer.write(SSE_ANSWER)
                        await writer.drain()
                        return
                    writer.write(KEPT_ANSWER)
                    await writer.drain()
                    start = len(record["received"]) - (len(rest) - length)
                    self._waiting.add(number)
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            self._waiting.discard(number)
            writer.close()
            record["done"].set()


def one_request(received: bytes, body: bytes) -> bool:
    """``received`` is one POST to ``/v1/chat/completions`` carrying ``body``, nothing before it."""
    head, _, rest = received.partition(b"\r\n\r\n")
    return head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and rest == body
