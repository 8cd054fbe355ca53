"""A real TLS endpoint on 127.0.0.1 for the model client's https path.

``TLSEndpoint`` serves a certificate for ``localhost`` and ``127.0.0.1`` signed by a CA made for
the test (``trustme``); ``ca_file`` is that CA's PEM, which a client trusts the way httpx reads the
environment (``SSL_CERT_FILE``). Each accepted connection (its TLS handshake done) is recorded:
the bytes received and an event set when it ended; a complete request (``Content-Length``) is
answered with a short SSE stream (``Connection: close``). ``close_first``: the first connection is
closed at once after its handshake, unanswered (a server's idle timeout).
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

try:
    import trustme
except ImportError as exc:  # a venv made before pyproject's test extras named it
    raise ImportError("trustme is not installed in this venv: re-run `bash scripts/setup.sh` "
                      "(pyproject's test extras name it)") from exc

from .timeouts import HANG

SSE_ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
              b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n'
              b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n')


class TLSEndpoint:
    def __init__(self, directory: Path, *, close_first: bool = False) -> None:
        ca = trustme.CA()
        self.ca_file = directory / "ca.pem"
        ca.cert_pem.write_to_path(str(self.ca_file))
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("localhost", "127.0.0.1").configure_cert(self._context)
        self.close_first = close_first
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        record: dict[str, Any] = {"received": b"", "done": asyncio.Event()}
        self.connections.append(record)
        self.accepted.set()
        try:
            if self.close_first and len(self.connections) == 1:
                return
            while True:
                chunk = await reader.read(1 << 20)
                if not chunk:
                    return
                record["received"] += chunk
                self.arrived.set()
                head, _, rest = record["received"].partition(b"\r\n\r\n")
                fields = dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:] if b": " in line)
                if 0 <= int(fields.get(b"Content-Length", b"-1")) <= len(rest):
                    writer.write(SSE_ANSWER)
                    await writer.drain()
                    return
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()
            record["done"].set()


def one_request(received: bytes, body: bytes) -> bool:
    """``received`` is one POST to ``/v1/chat/completions`` carrying ``body``, nothing before it."""
    head, _, rest = received.partition(b"\r\n\r\n")
    return head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and rest == body
