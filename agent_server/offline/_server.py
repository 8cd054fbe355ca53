"""A tiny scripted OpenAI-compatible HTTP/1.1 endpoint on 127.0.0.1 (asyncio streams).

Role: answer ``POST …/chat/completions`` from a queue of scripted responses (see ``_script``),
recording every request byte for byte, with exact control over which bytes leave in which TCP
write (each write is drained, ``TCP_NODELAY`` is set). Every response says ``Connection: close``
and the connection is closed after it, so one connection carries one request — unless
``keep_alive``: then a whole response leaves the connection open for the next request, as a
provider's server does, and ``drop_idle`` makes the connections waiting for their next request
fail it unanswered (what a firewall that forgot them, or a server's idle timeout met by the
request, does). Streamed bodies use ``Transfer-Encoding: chunked`` unless a ``raw`` script asks
for close-delimited framing.

Used by the test suite and by the user-facing offline demo.

Must never: pretend to be a model — it only replays what it was given — or listen on anything
but the loopback interface unless explicitly told to.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import dataclasses
import json
import os
import re
import socket
import struct
import threading
from collections.abc import Iterable, Mapping
from contextlib import suppress
from pathlib import Path
from typing import Any

from ._http import BadRequest, RecordedRequest, http_head, merge_headers, read_request
from ._script import Script, normalize_response, step_of
from ._validate import history_problem

__all__ = ["OfflineEndpoint", "ThreadedEndpoint"]

_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_MODEL_PATHS = ("/v1/models", "/models")
_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}
_FRAME_END = re.compile(rb"(?<=\n\n)|(?<=\r\n\r\n)|(?<=\r\r)")
READ_LIMIT = 1 << 20
"""The connections' ``StreamReader`` limit: it pauses reading at twice this (and a head line may be this long)."""


class OfflineEndpoint:
    """The scripted endpoint. ``async with OfflineEndpoint(script=[...]) as ep:`` then point a
    client at ``ep.base_url`` (``"http://127.0.0.1:PORT/v1"``).

    Args:
        script: scripted responses (dicts, see ``_script``) or a loaded :class:`Script`.
        default: the answer when the queue is empty (default: a 500 JSON error
            ``"offline endpoint: no scripted response left"``).
        loop: replay the script forever instead of falling back to ``default``.
        host, port: where to listen (port 0 = any free port).
        record_path: append one JSON line per request to this file as requests arrive.
        base_dir: folder for relative ``sse_file`` paths.
        reject_invalid_history: answer a chat request whose history a provider would refuse
            (a tool call without its result, a stray tool message, an empty assistant message;
            see ``_validate``) with HTTP 400 ``invalid_request_error``, as providers do, without
            using up a scripted response.
        api_key: when set, every request must carry ``Authorization: Bearer <api_key>``; any
            other is answered HTTP 401 ``invalid_api_key`` as providers do (recorded, no scripted
            response used up).
        keep_alive: keep a connection open after a whole response (no ``Connection: close``) and
            read its next request from it; a response that is not whole (``hang``, an aborted or
            close-delimited ``raw``) still closes it.

    Attributes:
        requests: every :class:`RecordedRequest`, in arrival order (``connection``: the number of
            the connection that carried it, counted from 1).
        dropped: the requests that arrived on a connection ``drop_idle`` doomed: read, never
            answered nor played (no model saw them), not in ``requests``.
    """

    def __init__(self, script: Iterable[Mapping[str, Any]] | Script = (), *,
                 default: Mapping[str, Any] | None = None, loop: bool = False,
                 host: str = "127.0.0.1", port: int = 0,
                 record_path: str | Path | None = None,
                 base_dir: str | Path | None = None,
                 reject_invalid_history: bool = False, api_key: str | None = None,
                 keep_alive: bool = False) -> None:
        if not isinstance(script, Script):
            script = Script(script, default=default, loop=loop, base_dir=base_dir)
        self._base_dir = base_dir
        self._queue: collections.deque[dict[str, Any]] = collections.deque(script.responses)
        self._replay = list(script.responses) if script.loop else []
        self._by_step = list(script.responses) if script.by_step else None
        self.default = script.default
        self.host, self.port = host, port
        self.record_path = Path(record_path) if record_path else None
        self.requests: list[RecordedRequest] = []
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._record_lock = threading.Lock()
        self.reject_invalid_history = reject_invalid_history
        self.api_key = api_key
        self.keep_alive = keep_alive
        self.dropped: list[RecordedRequest] = []
        self._connections = 0
        self._idle: dict[int, socket.socket | None] = {}  # kept connections waiting for their next request
        self._doomed: dict[int, str] = {}

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1`` (valid once started)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def open_connections(self) -> int:
        """How many client connections are being served right now."""
        return len(self._tasks)

    @property
    def idle_connections(self) -> int:
        """How many connections are waiting for a request: kept ones (``keep_alive``) and ones
        opened but not yet used (a client's connection opened ahead)."""
        return len(self._idle)

    def drop_idle(self, how: str = "reset") -> int:
        """Doom every connection now waiting for a request (``idle_connections``), as a
        firewall that forgot it or a server's idle timeout does, without a sign to the client
        until it sends: that request is read whole, recorded in ``dropped`` only, and answered
        with nothing — ``"reset"``: the connection is aborted (a TCP RST, what a forgotten
        connection gets); ``"close"``: it is closed (a FIN, what a server closing it as the
        request came sends). Returns how many were doomed."""
        if how not in ("reset", "close"):
            raise ValueError(f"drop_idle: how is 'reset' or 'close', not {how!r}")
        for number in list(self._idle):  # (a ThreadedEndpoint's caller: the loop's thread may change it)
            self._doomed[number] = how
        return len(self._idle)

    def push(self, response: Mapping[str, Any]) -> None:
        """Queue one more scripted response (validated now; raises ValueError if bad).
        Thread-safe."""
        self._queue.append(normalize_response(response, base_dir=self._base_dir))

    async def start(self) -> OfflineEndpoint:
        """Start listening; sets ``port`` to the real port. Raises OSError if it cannot bind."""
        # a request is read in the socket's own chunks: with asyncio's 64 KiB limit its reader paused at
        # 128 KiB and resumed a turn of the loop later (a 465 KB request: four reads, 0.8 ms)
        self._server = await asyncio.start_server(self._handle, self.host, self.port, limit=READ_LIMIT)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        """Stop listening and drop every open connection (hanging ones included)."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> OfflineEndpoint:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @classmethod
    def start_in_thread(cls, script: Iterable[Mapping[str, Any]] | Script = (),
                        **kwargs: Any) -> ThreadedEndpoint:
        """Run an endpoint on its own event loop in a daemon thread (for sync tests and for
        tests that spawn another process). Same arguments as the constructor.
        Raises whatever ``start()`` raised."""
        return ThreadedEndpoint(cls(script, **kwargs))

    # -- connection handling ---------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # The work runs in an inner task so that stop() can cancel it without the cancellation
        # escaping the task asyncio.start_server created (3.11 logs that as an error).
        inner = asyncio.ensure_future(self._connection(reader, writer))
        self._tasks.add(inner)
        try:
            await inner
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not inner.cancelled() or (current is not None and current.cancelling()):
                raise
        finally:
            self._tasks.discard(inner)

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._connections += 1
        number = self._connections
        self._idle[number] = sock  # (a connection opened ahead waits for its first request)
        try:
            while True:
                request = await read_request(reader)
                self._idle.pop(number, None)
                if request is None:
                    return
                request = dataclasses.replace(request, connection=number)
                how = self._doomed.pop(number, None)
                if how is not None:  # a forgotten connection: nothing answered, nothing played
                    self.dropped.append(request)
                    if how == "reset" and sock is not None:
                        with suppress(OSError):
                            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        writer.transport.abort()
                    return
                whole = await self._dispatch(request, reader, writer)
                if not (self.keep_alive and whole):
                    return
                self._idle[number] = sock
        except BadRequest as exc:
            with suppress(ConnectionError):
                await self._send_json(writer, 400, {"error": {"message": str(exc)}})
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._idle.pop(number, None)
            self._doomed.pop(number, None)
            writer.close()
            with suppress(Exception):
                await writer.wait_closed()

    def _next_response(self, body: bytes = b"") -> tuple[dict[str, Any], str]:
        if self._by_step:
            step = step_of(body)
            if step is not None:
                return self._by_step[min(step, len(self._by_step) - 1)], f"step{step}"
        if not self._queue and self._replay:
            self._queue.extend(self._replay)
        if self._queue:
            return self._queue.popleft(), "script"
        return self.default, "default"

    def _record(self, request: RecordedRequest, answered_with: str) -> None:
        self.requests.append(request)
        if self.record_path is None:
            return
        line = json.dumps(request.to_record(len(self.requests), answered_with),
                          ensure_ascii=False)
        with self._record_lock:  # 0600: request bodies hold prompts and file contents
            fd = os.open(self.record_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")

    async def _dispatch(self, request: RecordedRequest, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> bool:
        """Answer ``request``; whether the answer was whole and left the connection open for
        another request (``keep_alive``)."""
        if self.api_key is not None and request.headers.get("authorization") != f"Bearer {self.api_key}":
            self._record(request, "rejected:api_key")
            await self._send_json(writer, 401, {"error": {
                "message": "Incorrect API key provided", "type": "invalid_request_error", "code": "invalid_api_key"}})
            return self.keep_alive
        if request.path in _CHAT_PATHS and request.method == "POST":
            problem = history_problem(request.body) if self.reject_invalid_history else None
            if problem is not None:
                self._record(request, "rejected:invalid_history")
                await self._send_json(writer, 400, {"error": {
                    "message": problem, "type": "invalid_request_error", "param": "messages", "code": None}})
                return self.keep_alive
            response, source = self._next_response(request.body)
            self._record(request, f"{source}:{response['kind']}")
            return await self._serve(response, reader, writer)
        elif request.path in _MODEL_PATHS and request.method == "GET":
            self._record(request, "models")
            # it plays any model id; these two are the ones its scripts and the README name
            await self._send_json(writer, 200, {"object": "list", "data": [
                {"id": name, "object": "model", "owned_by": "agent-server-offline"}
                for name in ("offline-model", "offline-demo")]})
            return self.keep_alive
        else:
            self._record(request, "not_found")
            await self._send_json(writer, 404, {"error": {
                "message": f"offline endpoint: no route for {request.method} {request.path}",
                "type": "not_found"}})
            return self.keep_alive

    # -- response kinds --------------------------------------------------------------------

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, data: bytes, chunked: bool) -> None:
        if not data:
            return  # an empty chunk would end a chunked body
        writer.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        await writer.drain()

    async def _send_json(self, writer: asyncio.StreamWriter, status: int, payload: Any,
                         headers: Mapping[str, str] | None = None) -> None:
        body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        await self._send_body(writer, status, body, merge_headers(
            {"Content-Type": "application/json"}, headers or {}))

    async def _send_body(self, writer: asyncio.StreamWriter, status: int, body: bytes,
                         headers: Mapping[str, str]) -> None:
        headers = merge_headers({"Content-Length": str(len(body)), **self._closing()}, headers)
        writer.write(http_head(status, headers) + body)
        await writer.drain()

    def _closing(self) -> dict[str, str]:
        """The ``Connection`` header of a whole response: none when the connection is kept."""
        return {} if self.keep_alive else {"Connection": "close"}

    async def _serve(self, r: dict[str, Any], reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> bool:
        """Play the scripted response ``r``; whether it was whole and the connection may carry
        another request (``keep_alive``, and the script's headers did not say ``close``)."""
        kind = r["kind"]
        if r.get("latency"):
            await asyncio.sleep(r["latency"])
        if kind == "error":
            if "json" in r:
                await self._send_json(writer, r["status"], r["json"], r["headers"])
            else:
                await self._send_body(writer, r["status"], str(r["text"]).encode("utf-8"),
                                      merge_headers({"Content-Type": "text/plain"}, r["headers"]))
            return self.keep_alive and not _says_close(r["headers"])
        chunked = not (kind == "raw" and r["framing"] == "close")
        framing = {"Transfer-Encoding": "chunked"} if chunked else {}
        given: Mapping[str, str] = r["headers"] if isinstance(r.get("headers"), Mapping) else {}
        if kind == "hang" and r["headers"] is False:
            await self._wait_for_client(reader)
            return False
        status = r.get("status", 200) if kind == "raw" else 200
        whole = kind in ("sse", "sse_file") or (kind == "raw" and chunked and r["close"] and not r["abort"])
        defaults = {**_SSE_HEADERS, **framing, **(self._closing() if whole else {"Connection": "close"})}
        head = merge_headers(defaults, given)
        writer.write(http_head(status, head))
        await writer.drain()
        if kind == "hang":
            await self._wait_for_client(reader)
            return False
        if kind == "sse_file":
            data = Path(r["path"]).read_bytes()
            if not r["chunk_delay"]:
                await self._write(writer, data, chunked)
            else:
                for i, piece in enumerate(p for p in _FRAME_END.split(data) if p):
                    if i:
                        await asyncio.sleep(r["chunk_delay"])
                    await self._write(writer, piece, chunked)
        elif kind == "sse":
            frames = [f if isinstance(f, str) else json.dumps(f, ensure_ascii=False,
                                                              separators=(",", ":"))
                      for f in r["frames"]] + (["[DONE]"] if r["done"] else [])
            for i, frame in enumerate(frames):
                if i and r["delay"]:
                    await asyncio.sleep(r["delay"])
                await self._write(writer, f"data: {frame}\n\n".encode("utf-8"), chunked)
        elif kind == "raw":
            for w in r["writes"]:
                if w.get("delay"):
                    await asyncio.sleep(w["delay"])
                data = (base64.b64decode(w["bytes_b64"]) if "bytes_b64" in w
                        else str(w["text"]).encode("utf-8"))
                await self._write(writer, data, chunked)
            if not r["close"]:
                await self._wait_for_client(reader)
                return False
            if chunked and r["abort"]:
                return False  # closed without the zero-length chunk: a truncated body
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return self.keep_alive and whole and not _says_close(head)

    @staticmethod
    async def _wait_for_client(reader: asyncio.StreamReader) -> None:
        """Send nothing until the client closes the connection (or the endpoint stops)."""
        while await reader.read(4096):
            pass


def _says_close(headers: Any) -> bool:
    """Whether response headers (a mapping, or anything else: none) say ``Connection: close``."""
    return isinstance(headers, Mapping) and any(
        k.lower() == "connection" and "close" in str(v).lower() for k, v in headers.items())


class ThreadedEndpoint:
    """An :class:`OfflineEndpoint` running on its own loop in a daemon thread.

    ``base_url``, ``requests`` and ``push()`` work from any thread; ``stop()`` (or leaving a
    ``with`` block) shuts it down and joins the thread.
    """

    def __init__(self, endpoint: OfflineEndpoint) -> None:
        self.endpoint = endpoint
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, name="offline-endpoint", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            try:
                await self.endpoint.start()
            except BaseException as exc:  # reported to the starting thread
                self._error = exc
                self._ready.set()
                return
            self._ready.set()
            try:
                await self._stopped.wait()
            finally:
                await self.endpoint.stop()

        asyncio.run(main())

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``."""
        return self.endpoint.base_url

    @property
    def requests(self) -> list[RecordedRequest]:
        """The recorded requests, in arrival order (a live list)."""
        return self.endpoint.requests

    @property
    def open_connections(self) -> int:
        """How many client connections are being served right now."""
        return self.endpoint.open_connections

    @property
    def idle_connections(self) -> int:
        """``OfflineEndpoint.idle_connections``."""
        return self.endpoint.idle_connections

    def drop_idle(self, how: str = "reset") -> int:
        """``OfflineEndpoint.drop_idle`` (its dicts are only read and set: safe from this thread)."""
        return self.endpoint.drop_idle(how)

    def push(self, response: Mapping[str, Any]) -> None:
        """Queue one more scripted response (ValueError if invalid)."""
        self.endpoint.push(response)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the endpoint and join its thread (idempotent)."""
        if self._loop is not None and self._stopped is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopped.set)
        self._thread.join(timeout)

    def __enter__(self) -> ThreadedEndpoint:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
