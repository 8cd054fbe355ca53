"""A small bidirectional JSON-RPC 2.0 engine over newline-delimited JSON (PROTOCOL.md "Transport").

Role: read one message per line, dispatch requests concurrently (one task each), answer them, route
responses to the requests this side sent, and apply the transport's error rules: a line that is not
JSON → ``-32700`` with ``id: null``; a batch or a malformed message → ``-32600``; an unknown method →
``-32601``; unknown notifications are ignored; a request without ``params`` is still answered;
``$/cancel_request`` cancels an in-flight request, which is then answered ``-32800`` (or as its
handler decides).

Must never: write anything to its output that is not one whole JSON-RPC message per line, or import
anything heavier than ``asyncio`` and ``json`` (it is on the start-up path).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import re
from typing import Any, Awaitable, Callable, Protocol, Sequence

from agent_server.server.rpc.bounds import MAX_SEND_BYTES, fit_line
from agent_server.server.rpc.wire import encode_message, encode_notifications

log = logging.getLogger("agent_server.jsonrpc")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800
RESOURCE_NOT_FOUND = -32002
AUTH_REQUIRED = -32000
"""ACP's "Authentication required": the client should offer the agent's ``authMethods``."""

MAX_LINE_BYTES = 64 * 1024 * 1024
"""Longest message (one line) the engine reads: a longer one is skipped — read through to its
newline without being kept — and answered ``-32600`` (``id: null``: its id was never parsed), and
the next line is served (docs/protocol.md "Transport"). 64 MiB leaves room for the largest file the
tools read (32 MiB) as JSON text."""


def _valid_id(value: Any) -> bool:
    """Whether ``value`` can be a JSON-RPC id here: a string or an integer (not a boolean)."""
    return isinstance(value, (int, str)) and not isinstance(value, bool)


_SNIFF = re.compile(rb'\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d{1,18}|"[^"\\]{0,200}")\s*,\s*"(\w+)"')


def _sniff_id(head: bytes) -> tuple[Any, str | None]:
    """The id at the start of a line too long to parse, and whether it is a ``request`` (a
    ``method`` follows) or a ``response`` (``result`` / ``error``); ``(None, None)`` when the line
    does not start ``{"jsonrpc":"2.0","id":…``."""
    match = _SNIFF.match(head)
    if match is None:
        return None, None
    raw, key = match.group(1), match.group(2)
    value: Any = int(raw) if raw[:1] != b'"' else raw[1:-1].decode("utf-8", "replace")
    kind = {b"method": "request", b"result": "response", b"error": "response"}.get(key)
    return (value, kind) if kind else (None, None)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def with_details(error: Any) -> Any:
    """The JSON-RPC ``error`` object with ``data.details``: the reason in words (its ``message``
    unless ``data`` says more). The official TypeScript SDK's convention, which clients such as
    Toad show instead of ``message`` ("Failed to initialize agent —" and nothing after it).
    ``data`` that is not an object is kept as it is."""
    if not isinstance(error, dict):
        return error
    data = error.get("data")
    if data is None:
        return {**error, "data": {"details": str(error.get("message", ""))}}
    if isinstance(data, dict) and not isinstance(data.get("details"), str):
        return {**error, "data": {**data, "details": str(error.get("message", ""))}}
    return error


class JsonRpcError(Exception):
    """An error answer: raised by handlers to answer with it, and by ``Connection.request`` when
    the peer answered with an error. ``code`` (int), ``message`` (str), ``data`` (JSON or None)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        """The JSON-RPC ``error`` object."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class MessageTooLarge(JsonRpcError):
    """A message of this side could not be sent: its line would be over the bound of what this side
    sends (``bounds.MAX_SEND_BYTES``) and it cannot be shrunk (``bounds.fit_line``). Raised by
    ``send`` (and so by ``request``/``begin_request``) before anything is written."""

    def __init__(self, method: str, size: int, limit: int) -> None:
        super().__init__(INTERNAL_ERROR, f"{method} is too large to send: {size:,} bytes, over the {limit:,} "
                                         "bytes a message may be (docs/protocol.md, Size limit)",
                         {"agentServer": {"tooLarge": {"bytes": size, "limit": limit}}})
        self.size, self.limit = size, limit


class ConnectionClosed(Exception):
    """The peer went away before answering a request this side sent."""


class Writer(Protocol):
    """What the engine writes to: ``asyncio.StreamWriter`` fits."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class RequestContext:
    """Per-request handle given to a request handler.

    ``id`` and ``method`` of the request; ``on_cancel``: set it to a callable to take over
    ``$/cancel_request`` for this request (the handler then answers normally); ``after_response``
    registers a coroutine function run right after the response is written (for notifications
    that must follow it).
    """

    def __init__(self, request_id: Any, method: str) -> None:
        self.id = request_id
        self.method = method
        self.on_cancel: Callable[[], None] | None = None
        self.cancel_requested = False
        self._after: list[Callable[[], Awaitable[None]]] = []
        self._with_answer: list[dict[str, Any]] = []

    def after_response(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run ``callback()`` once the response to this request has been written."""
        self._after.append(callback)

    def notify_with_answer(self, method: str, params: dict[str, Any]) -> None:
        """Send the notification ``method`` right after a successful response, in the same write
        (one line each, nothing between them): a message that must follow the answer then wakes
        the peer once, with the answer, not a second time a moment later. Not sent when the
        request fails."""
        self._with_answer.append({"jsonrpc": "2.0", "method": method, "params": params})


RequestHandler = Callable[[dict[str, Any], RequestContext], Awaitable[Any]]
NotificationHandler = Callable[[dict[str, Any]], Awaitable[None]]


class Connection:
    """One JSON-RPC peer connection over a line reader and a writer.

    ``requests`` and ``notifications`` map method names to handlers. ``serve()`` runs until the
    reader hits EOF; then pending outgoing requests fail with ``ConnectionClosed``.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: Writer,
        *,
        requests: dict[str, RequestHandler],
        notifications: dict[str, NotificationHandler] | None = None,
        max_send_bytes: int = MAX_SEND_BYTES,
    ) -> None:
        self.max_send_bytes = max_send_bytes
        self._reader = reader
        self._writer = writer
        self._requests = requests
        self._notifications = notifications or {}
        self._write_lock = asyncio.Lock()
        self._ids = itertools.count(1)
        self._pending: dict[Any, asyncio.Future[Any]] = {}
        self._inflight: dict[Any, tuple[asyncio.Task[None], RequestContext]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = asyncio.Event()

    # -- sending ------------------------------------------------------------------------------

    async def send(self, message: dict[str, Any], then: Sequence[dict[str, Any]] = ()) -> None:
        """Write one message as one line; messages never interleave. A line over
        ``max_send_bytes`` is shrunk to lines within it (``bounds.fit_line``: a text chunk split,
        a tool call's display cut, a result answered with an error) or, when it cannot be, not
        written at all: ``MessageTooLarge``. Every error answer carries ``data.details``
        (``with_details``). ``then``: messages written right after it, in the same write (one that
        cannot be written within the bound is left out, logged)."""
        if "error" in message and "method" not in message:
            message = {**message, "error": with_details(message["error"])}
        data = self._bounded(message, encode_message(message))
        if then:
            lines = [data]
            for follow in then:
                try:
                    lines.append(self._bounded(follow, encode_message(follow)))
                except MessageTooLarge:
                    pass  # (logged by _bounded)
            data = b"".join(lines)
        async with self._write_lock:
            self._writer.write(data)
            await self._writer.drain()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification; returns once it is written."""
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def notify_many(self, method: str, params: Sequence[dict[str, Any]]) -> None:
        """Send one notification per item of ``params``, in order, as one write (one line each,
        nothing interleaved): what ``notify`` per item sends, in one system call instead of one
        per message. Returns once all are written."""
        data = encode_notifications(method, params)
        if len(data) > self.max_send_bytes:  # some line may be over the bound: each on its own
            lines = []
            for item in params:
                message = {"jsonrpc": "2.0", "method": method, "params": item}
                lines.append(self._bounded(message, encode_message(message)))
            data = b"".join(lines)
        if data:
            async with self._write_lock:
                self._writer.write(data)
                await self._writer.drain()

    async def request(self, method: str, params: dict[str, Any], *, timeout: float | None = None) -> Any:
        """Send a request and wait for its result.

        Raises ``JsonRpcError`` for an error answer, ``ConnectionClosed`` if the peer goes away,
        ``asyncio.TimeoutError`` after ``timeout`` seconds. On timeout or cancellation the peer is
        sent ``$/cancel_request`` for it.
        """
        request_id, future = await self.begin_request(method, params)
        try:
            # not wait_for: Python 3.11's returns an answer that came in the same turn of the loop as
            # the caller's cancellation (a client answers a question ``cancelled`` right after its
            # ``session/cancel``, as ACP asks), and the cancellation is lost: the turn went on
            async with asyncio.timeout(timeout):
                return await asyncio.shield(future)
        except (asyncio.CancelledError, asyncio.TimeoutError):
            self.cancel_outgoing(request_id)
            raise
        finally:
            self.forget(request_id)

    async def begin_request(self, method: str, params: dict[str, Any]) -> tuple[int, "asyncio.Future[Any]"]:
        """Send a request; return ``(id, future)`` — the future gets the result, or raises
        ``JsonRpcError`` / ``ConnectionClosed``. Call ``forget(id)`` once done with it."""
        if self.closed.is_set():
            raise ConnectionClosed(f"connection closed; cannot send {method}")
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        except BaseException:
            self._pending.pop(request_id, None)
            raise
        return request_id, future

    def _bounded(self, message: dict[str, Any], data: bytes) -> bytes:
        """``data``, or lines within ``max_send_bytes`` that carry ``message``; raises
        ``MessageTooLarge`` when there are none."""
        if len(data) <= self.max_send_bytes:
            return data
        fitted = fit_line(message, data, self.max_send_bytes)
        what = str(message.get("method") or f"the answer to request {message.get('id')!r}")
        if fitted is None:
            log.error("not sent: %s would be a %d-byte line, over the %d-byte bound", what, len(data),
                      self.max_send_bytes)
            raise MessageTooLarge(what, len(data), self.max_send_bytes)
        log.warning("%s would be a %d-byte line, over the %d-byte bound: sent as %d bytes (split or cut; "
                    "docs/protocol.md, Size limit)", what, len(data), self.max_send_bytes, len(fitted))
        return fitted

    def cancel_outgoing(self, request_id: int) -> None:
        """Send ``$/cancel_request`` for a request of ours; its future stays open for the peer's
        real answer (it may already have done the work)."""
        if not self.closed.is_set() and request_id in self._pending:
            self._spawn(self.notify("$/cancel_request", {"requestId": request_id}))

    def forget(self, request_id: int) -> None:
        """Stop waiting for an answer to ``request_id`` (a late answer is then ignored)."""
        self._pending.pop(request_id, None)

    # -- receiving ----------------------------------------------------------------------------

    async def serve(self) -> None:
        """Read and dispatch messages until EOF, then close."""
        try:
            while True:
                try:
                    line = await self._reader.readuntil(b"\n")
                except asyncio.IncompleteReadError as exc:
                    if exc.partial.strip():
                        await self._handle_line_safely(exc.partial)
                    break
                except asyncio.LimitOverrunError as exc:
                    await self._skip_oversized(exc.consumed)
                    continue
                await self._handle_line_safely(line)
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionClosed("the client closed the connection"))

    async def wait_idle(self) -> None:
        """Wait for every request handler and background send started so far."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _skip_oversized(self, consumed: int) -> None:
        """Read a line over ``MAX_LINE_BYTES`` through to its newline without keeping it. Its id,
        when its first bytes name one (``{"jsonrpc":"2.0","id":…``, as this engine and the ACP
        SDKs write a message), is not lost: a request is answered ``-32600`` with that id, and an
        answer to a request of ours fails that request at once (``MessageTooLarge``) instead of
        leaving it waiting; otherwise the error goes out with ``id: null``."""
        head = await self._reader.readexactly(consumed)
        size = consumed
        while True:
            try:
                size += len(await self._reader.readuntil(b"\n"))
                break
            except asyncio.LimitOverrunError as exc:
                size += len(await self._reader.readexactly(exc.consumed))
            except asyncio.IncompleteReadError as exc:
                size += len(exc.partial)
                break
        request_id, kind = _sniff_id(head)
        future = self._pending.get(request_id) if kind == "response" else None
        if future is not None and not future.done():
            log.error("skipped the %d-byte answer to request %r: over the %d-byte limit of a line", size,
                      request_id, MAX_LINE_BYTES)
            future.set_exception(MessageTooLarge(f"the answer to request {request_id!r}", size, MAX_LINE_BYTES))
            return
        log.error("skipped a %d-byte %s: over the %d-byte limit of a line", size,
                  f"request (id {request_id!r})" if kind == "request" else "message", MAX_LINE_BYTES)
        await self._send_error(request_id if kind == "request" and request_id not in self._inflight else None,
                               INVALID_REQUEST, f"message too large: a message may be at most "
                               f"{MAX_LINE_BYTES} bytes ({MAX_LINE_BYTES >> 20} MiB) on one line; it was skipped")

    async def _handle_line_safely(self, line: bytes) -> None:
        """``_handle_line``, but no exception from one message ends the serve loop: a bug met while
        dispatching is logged and, when the message was a request, answered ``-32603``."""
        try:
            await self._handle_line(line)
        except (ConnectionError, asyncio.CancelledError):
            raise  # the output is gone, or we are being stopped
        except Exception as exc:
            log.exception("handling a message failed")
            try:
                message = json.loads(line)
                request_id = message.get("id") if isinstance(message, dict) and "method" in message else None
            except Exception:
                request_id = None
            if not _valid_id(request_id) or request_id in self._inflight:
                request_id = None
            await self._send_error(request_id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}")

    async def _handle_line(self, line: bytes) -> None:
        if not line.strip():
            return
        try:
            message = json.loads(line, parse_constant=_reject_constant)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            if isinstance(exc, UnicodeDecodeError) and self._fail_non_utf8_response(line):
                return
            reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
            await self._send_error(None, PARSE_ERROR, f"parse error: {reason}")
            return
        if isinstance(message, list):
            await self._send_error(None, INVALID_REQUEST, "batch requests are not supported")
            return
        if not isinstance(message, dict):
            await self._send_error(None, INVALID_REQUEST, "a message must be a JSON object")
            return
        if "method" in message:
            await self._handle_call(message)
        elif "id" in message and ("result" in message or "error" in message):
            self._handle_response(message)
        else:
            request_id = message.get("id") if _valid_id(message.get("id")) else None
            await self._send_error(request_id, INVALID_REQUEST, "neither a request nor a response")

    async def _handle_call(self, message: dict[str, Any]) -> None:
        method = message["method"]
        is_request = "id" in message
        request_id = message.get("id")
        if is_request and not _valid_id(request_id):
            await self._send_error(None, INVALID_REQUEST, "id must be a string or an integer")
            return
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            if is_request:
                await self._send_error(request_id, INVALID_REQUEST, 'expected "jsonrpc": "2.0" and a string method')
            return
        params = message.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            if is_request:
                await self._send_error(request_id, INVALID_PARAMS, "params must be an object")
            return
        if not is_request:
            await self._handle_notification(method, params)
            return
        handler = self._requests.get(method)
        if handler is None:
            await self._send_error(request_id, METHOD_NOT_FOUND, f"method not found: {method}")
            return
        if request_id in self._inflight:
            await self._send_error(request_id, INVALID_REQUEST, f"request id {request_id!r} is already in flight")
            return
        context = RequestContext(request_id, method)
        task = self._spawn(self._run_request(handler, params, context))
        self._inflight[request_id] = (task, context)

    async def _handle_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "$/cancel_request":
            request_id = params.get("requestId")
            if _valid_id(request_id):  # anything else names no request of ours: ignored
                self._cancel_inflight(request_id)
            else:
                log.debug("ignoring $/cancel_request with requestId %.100r", request_id)
            return
        handler = self._notifications.get(method)
        if handler is None:
            log.debug("ignoring unknown notification %s", method)
            return
        self._spawn(self._run_notification(handler, method, params))

    def _cancel_inflight(self, request_id: Any) -> None:
        entry = self._inflight.get(request_id)
        if entry is None:
            return
        entry[1].cancel_requested = True
        # Deliver on the next loop pass: a request whose $/cancel_request came in the same read has
        # not started yet, and cancelling a task before its first step would skip its answer.
        asyncio.get_running_loop().call_soon(self._deliver_cancel, request_id)

    def _deliver_cancel(self, request_id: Any) -> None:
        entry = self._inflight.get(request_id)
        if entry is None:
            return
        task, context = entry
        if context.on_cancel is not None:
            context.on_cancel()
        else:
            task.cancel()

    async def _run_notification(self, handler: NotificationHandler, method: str, params: dict[str, Any]) -> None:
        try:
            await handler(params)
        except Exception:
            log.exception("notification handler for %s failed", method)

    async def _run_request(self, handler: RequestHandler, params: dict[str, Any], context: RequestContext) -> None:
        response: dict[str, Any] = {"jsonrpc": "2.0", "id": context.id}
        try:
            result = await handler(params, context)
            response["result"] = {} if result is None else result
        except JsonRpcError as exc:
            response["error"] = exc.to_dict()
        except asyncio.CancelledError:
            if not context.cancel_requested:
                raise
            response["error"] = {"code": REQUEST_CANCELLED, "message": "request cancelled"}
        except Exception as exc:
            log.exception("handler for %s failed", context.method)
            response["error"] = {
                "code": INTERNAL_ERROR,
                "message": f"internal error: {type(exc).__name__}: {exc}",
            }
        finally:
            self._inflight.pop(context.id, None)
        try:
            await self.send(response, context._with_answer if "result" in response else ())
        except (ConnectionError, BrokenPipeError):
            # the client went away while the request ran (an editor's Restart Server): no one to answer
            log.debug("the answer to %s was not sent: the connection is gone", context.method)
            return
        for callback in context._after:
            try:
                await callback()
            except Exception:
                log.exception("after-response callback of %s failed", context.method)

    def _fail_non_utf8_response(self, line: bytes) -> bool:
        """A line that is not UTF-8 but is, read leniently, the answer to a request of ours (an editor
        that sent a buffer's latin1 bytes as is): that request fails at once with an error marked
        ``data.agentServer.notUtf8`` instead of waiting for its timeout. ``False``: not such a line."""
        try:
            message = json.loads(line.decode("utf-8", "replace"), parse_constant=_reject_constant)
        except (ValueError, RecursionError):
            return False
        if not isinstance(message, dict) or "method" in message or not _valid_id(message.get("id")):
            return False
        future = self._pending.get(message["id"])
        if future is None or future.done() or not ("result" in message or "error" in message):
            return False
        log.warning("the answer to request %r is not UTF-8; failing that request", message["id"])
        future.set_exception(JsonRpcError(INTERNAL_ERROR, "the answer was not UTF-8 text",
                                          {"agentServer": {"notUtf8": True}}))
        return True

    def _handle_response(self, message: dict[str, Any]) -> None:
        if message["id"] is None and isinstance(message.get("error"), dict):
            # the peer could not read a line of ours (not JSON, too large …) and could not tell its id
            # (or rejected a notification: Toad answers an update it does not know with id null and a
            # several-line type-check report) — one log line, whatever the peer's text holds
            error = message["error"]
            log.error("the peer rejected or could not read a message this side sent: error %s: %s",
                      _one_line(error.get("code")), _one_line(error.get("message")))
            return
        if not _valid_id(message["id"]):
            log.warning("response with an invalid id %.100r ignored", message["id"])
            return
        future = self._pending.get(message["id"])
        if future is None or future.done():
            log.debug("response to unknown request id %r ignored (answered after it was cancelled?)", message["id"])
            return
        if "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            code = error.get("code")
            future.set_exception(
                JsonRpcError(
                    code if isinstance(code, int) and not isinstance(code, bool) else INTERNAL_ERROR,
                    str(error.get("message", "malformed error response")),
                    error.get("data"),
                )
            )
        else:
            future.set_result(message.get("result"))

    async def _send_error(self, request_id: Any, code: int, message: str) -> None:
        await self.send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})

    def _spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task


def _one_line(value: Any, limit: int = 500) -> str:
    """``value`` as one line of the log: a peer's text with its line breaks and runs of blanks
    folded into single spaces, cut at ``limit`` characters (said with "…")."""
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit] + "…"
