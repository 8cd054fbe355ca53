"""HTTP + SSE transport to an OpenAI-compatible ``/chat/completions`` endpoint.

Role: :class:`ChatClient` owns one pooled ``httpx.AsyncClient``; :meth:`ChatClient.stream` POSTs
exactly the body bytes it is given, decodes the server-sent events with ``httpx_sse``'s decoders a
network read at a time (``_sse.SseReads``), feeds them to a :class:`StreamAssembler` and yields its
events — what one read brought at once, adjacent deltas of one kind joined. Every failure leaves
as an :class:`LLMError`; three clocks and one cap bound an attempt (below), all retryable.

Must never: decide anything about the turn — no retries, no body rewriting, no logging of the
API key. Retry policy belongs to the caller, which reads ``LLMError.retryable``/``retry_after``.

Three clocks and one cap bound an attempt (one HTTP request):

* byte idleness — the httpx *read* timeout is ``stream_idle_timeout``: any bytes on the socket (a
  ``: keep-alive`` comment included) reset it; a silent socket raises ``STREAM_IDLE`` (this also
  covers waiting for the response headers);
* no progress — ``no_progress_timeout`` seconds without model output (content, reasoning, refusal,
  a tool call's name or arguments, a finish): SSE comments, ``ping`` events and empty deltas do not
  reset it, so a provider that trickles keep-alives or empty frames forever fails as ``NETWORK``;
* a total deadline — ``attempt_timeout`` seconds for the whole attempt, headers included, however
  steadily output arrives (one token a second, forever) → ``NETWORK``;
* an output cap — more than ``max_output_chars`` characters of output in one attempt → ``NETWORK``.

All four are retryable; the caller's retry policy decides what happens next.

The answer is whole at ``data: [DONE]``: ``Usage`` and ``Finish`` are yielded then, and the rest of
the body (the closing chunk, the server's close) is read to its end in a task of its own
(``_read_tail``), so a keep-alive connection goes back to the pool for the next request and httpx's
nested generators end by themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ._transport import EndpointTransport, HeldBody, ValidatingPool, endpoint_transport  # first: keeps httpx's CLI module from loading

import httpx  # noqa: E402  (after ._transport)

from ._assembler import StreamAssembler
from ._errors import LLMError, error_from_payload, error_from_response
from ._events import StreamEvent
from ._sse import SseReads

__all__ = ["ChatClient"]

_MAX_ERROR_BODY = 64 * 1024       # bytes of a non-2xx body read for the error message
_MAX_JSON_BODY = 8 * 1024 * 1024  # bytes of a non-SSE 200 body read
_TAIL_SECONDS = 5.0               # how long the body's end after [DONE] is read for (in the background)
_TAIL_BYTES = 64 * 1024           # how much of it, at most
_PRELOADED = False                # ChatClient.preload() has run in this process (llm.preloaded())


def _redact_url(url: str) -> str:
    """``url`` without user:password (never put credentials in error messages)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))


async def _read_capped(response: httpx.Response, limit: int) -> bytes:
    buf = bytearray()
    async for piece in response.aiter_bytes():
        buf += piece
        if len(buf) >= limit:
            break
    return bytes(buf[:limit])


def _completion_as_chunk(payload: Mapping[str, Any]) -> dict[str, Any]:
    """A non-streamed ``chat.completion`` re-shaped as one chunk (``message`` → ``delta``),
    for servers that ignore ``"stream": true``."""
    choices = []
    for choice in payload.get("choices") or []:
        if isinstance(choice, Mapping):
            message = choice.get("message")
            tool_calls = message.get("tool_calls") if isinstance(message, Mapping) else None
            delta = dict(message) if isinstance(message, Mapping) else {}
            if isinstance(tool_calls, list):
                delta["tool_calls"] = [dict(tc, index=i) if isinstance(tc, Mapping) else tc
                                       for i, tc in enumerate(tool_calls)]
            choices.append({"index": choice.get("index", 0), "delta": delta,
                            "finish_reason": choice.get("finish_reason")})
    return {"choices": choices, "usage": payload.get("usage")}


class _Cookies(httpx.Cookies):
    """The client's cookie jar, which reads a response's cookies only when it has any: httpx's
    ``extract_cookies`` builds a ``urllib`` request and an ``email`` message of every response's
    headers for the jar to look for ``Set-Cookie`` in (its cost: bench/README.md); without a
    ``Set-Cookie``/``Set-Cookie2`` header it finds none, so skipping it changes nothing."""

    def extract_cookies(self, response: httpx.Response) -> None:
        headers = response.headers
        if "set-cookie" in headers or "set-cookie2" in headers:
            super().extract_cookies(response)


class ChatClient:
    """Streaming client for one OpenAI-compatible endpoint.

    Args:
        base_url: the API root, e.g. ``"https://api.deepseek.com/v1"``; requests go to
            ``base_url.rstrip("/") + "/chat/completions"``.
        api_key: sent as ``Authorization: Bearer <api_key>`` when not None/empty.
        headers: extra request headers (e.g. OpenRouter's ``HTTP-Referer``); Content-Type,
            Accept and (when ``api_key`` is set) Authorization are always ours.
        stream_idle_timeout: seconds without a single received byte before ``STREAM_IDLE``
            (also the limit for writing the request body).
        attempt_timeout: seconds one attempt may take in all (``None``: no limit) → ``NETWORK``.
        no_progress_timeout: seconds without model output, keep-alives and empty frames
            notwithstanding (``None``: no limit) → ``NETWORK``.
        max_output_chars: characters of output one attempt may produce (``None``: no cap)
            → ``NETWORK``.
        max_tool_calls: tool calls one answer keeps (``None``: all); the rest are dropped at
            assembly (``AssembledMessage.dropped_tool_calls``).
        connect_timeout: seconds to establish the connection (and to wait for a pooled one).
        transport: an ``httpx.AsyncBaseTransport`` to use instead of the network one
            (``_transport.endpoint_transport``: no TLS context for a plain-http endpoint).

    Use one instance per endpoint for the life of the process and ``await aclose()`` at exit.
    """

    def __init__(self, base_url: str, api_key: str | None, *,
                 headers: dict[str, str] | None = None,
                 stream_idle_timeout: float = 300.0, connect_timeout: float = 10.0,
                 attempt_timeout: float | None = 600.0, no_progress_timeout: float | None = 300.0,
                 max_output_chars: int | None = 4_000_000, max_tool_calls: int | None = 64,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/chat/completions"
        self.stream_idle_timeout = stream_idle_timeout
        self.attempt_timeout = attempt_timeout
        self.no_progress_timeout = no_progress_timeout
        self.max_output_chars = max_output_chars
        self.max_tool_calls = max_tool_calls
        self._headers: dict[str, str] = dict(headers or {})
        self._headers["Content-Type"] = "application/json"
        self._headers["Accept"] = "text/event-stream"
        self._api_key = api_key or None
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._headers["Cache-Control"] = "no-store"  # last, as httpx-sse's ``aconnect_sse`` adds it
        timeout = httpx.Timeout(connect=connect_timeout, read=stream_idle_timeout,
                                write=stream_idle_timeout, pool=connect_timeout)
        self._connect_timeout = connect_timeout
        self._transport = transport or endpoint_transport(self.base_url)
        self._client = httpx.AsyncClient(timeout=timeout, follow_redirects=False, transport=self._transport)
        self._tails: set[asyncio.Task[Any]] = set()
        self._opening: asyncio.Task[Any] | None = None  # the last ``preconnect``'s
        self._client._cookies = _Cookies()  # type: ignore[assignment]  # (the setter would wrap it)
        try:  # parsed once, not per request (httpx takes a URL as it is); a bad one fails per request, as before
            self._target: httpx.URL | str = httpx.URL(self.url)
        except Exception:  # noqa: BLE001 — httpx raises it again, as it did, on each request
            self._target = self.url
        self._timeouts = timeout.as_dict()
        self._head: httpx.Headers | None = None  # every request's head but its Content-Length (``_request``)

    @staticmethod
    def preload() -> None:
        """Import now what the first request would import on its way out, from any thread (no
        loop needed): this module (httpx), httpcore's async network layer (anyio with its asyncio
        backend and socket streams, and the names httpcore reads from it per call) and the two
        regular expressions ``urllib.parse`` compiles on first use (httpx's cookie jar parses each
        response's URL with them). A ``session/load`` calls it in its worker thread, so a prompt
        sent right after the load's answer does not wait on the loop for these imports."""
        import anyio
        import anyio._backends._asyncio  # noqa: F401 — the backend get_current_task picks on a running loop
        from urllib.request import Request

        for name in ("connect_tcp", "fail_after", "Lock", "Event", "Semaphore", "CancelScope", "sleep", "streams",
                     "abc", "BrokenResourceError", "ClosedResourceError", "EndOfStream"):
            getattr(anyio, name)  # anyio imports these names lazily, on first use
        Request("http://127.0.0.1/")  # urllib.parse's _splittype and _splithost compile their patterns once
        global _PRELOADED
        _PRELOADED = True

    def warm(self) -> None:
        """``preload``, then what needs the running loop (anyio's backend chosen for it), and the
        requests' head: merged (``_request``) and validated by h11 (``ValidatingPool.prepare``)
        now rather than by the first request. Call on the running loop, when it is idle; nothing
        is sent and no connection is opened."""
        import anyio

        self.preload()
        anyio.get_current_task()  # picks (imports, unless preloaded) anyio's backend for the running loop
        if isinstance(self._target, httpx.URL):
            head = self._request(b"", None).headers.raw
            pool = getattr(self._transport, "_pool", None)
            if isinstance(pool, ValidatingPool):
                pool.prepare(head)

    def preconnect(self) -> bool:
        """Start opening the connection the first request will use (after ``session/new`` or a
        load: its name resolution, connect and TLS handshake are then not on the way to the model),
        in a task on the running loop; nothing is sent on it. Only when the pool has no connection
        yet and the client has its own transport (``EndpointTransport.open_spare``: no proxy is
        named): ``False`` otherwise. A failure is silent: the request then connects as before."""
        transport = self._transport
        if not isinstance(transport, EndpointTransport) or not isinstance(self._target, httpx.URL):
            return False
        if self._opening is not None and not self._opening.done():
            return True  # being opened (a load starts it before its replay)
        task = transport.open_spare(self._target, self._connect_timeout)
        if task is None:
            return False
        self._opening = task
        self._tails.add(task)  # stopped by aclose as a tail is
        task.add_done_callback(self._tails.discard)
        return True

    async def aclose(self) -> None:
        """Close the pooled connections (a response's tail still being read, or a connection being
        opened ahead, is stopped first). The client cannot be used afterwards."""
        tails = list(self._tails)
        for task in tails:
            task.cancel()
        await asyncio.gather(*tails, return_exceptions=True)
        await self._client.aclose()

    def _read_tail(self, texts: AsyncIterator[str], response: contextlib.AsyncExitStack) -> None:
        """After ``data: [DONE]``: read what is left of the body to its end — the closing chunk, the
        server's close — in a task of its own, then close the response (``response``: its exit
        stack). A body read to its end gives its connection back to the pool for the next request
        (a response closed before it ends closes its connection: a new TCP and TLS handshake for
        every request), and httpx's nested generators end as they should instead of each being
        left to the loop's finaliser. The answer is not waited for: ``Finish`` is yielded at once.
        Nothing read here is parsed (nothing after ``[DONE]`` is an event); at most
        ``_TAIL_BYTES`` in ``_TAIL_SECONDS``, else the response is closed as it is; an error there
        changes nothing (the answer is whole)."""
        async def tail() -> None:
            try:
                read = 0
                async with asyncio.timeout(_TAIL_SECONDS):
                    async for text in texts:
                        read += len(text)
                        if read > _TAIL_BYTES:
                            break
            except Exception:  # noqa: BLE001 — a broken or slow end after a whole answer
                pass
            finally:
                try:
                    await texts.aclose()  # type: ignore[attr-defined]
                finally:
                    await response.aclose()

        task = asyncio.get_running_loop().create_task(tail())
        self._tails.add(task)
        task.add_done_callback(self._tails.discard)

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def stream(self, body: bytes, *, ready: Awaitable[Any] | None = None) -> AsyncIterator[StreamEvent]:
        """POST ``body`` (already encoded with :func:`encode_body`, containing ``"stream": true``)
        and yield the stream's events: ReasoningDelta / TextDelta / ToolCallStarted /
        ToolCallDelta in wire order, then ``Usage`` (if the provider sent usage), then exactly
        one ``Finish``; nothing after it.

        ``ready``: an awaitable (a future or task: it is awaited at most once, and not at all when
        the request fails before its body) that must finish before the endpoint can hold the whole
        request — the connection is taken and all but the body's last byte written, then ``ready``
        is awaited, then the last byte is sent (``HeldBody``); a ``ready`` whose ``done_now()`` says
        it is done by then is not awaited, and the request leaves whole. If it raises, that exception
        leaves here unchanged and the connection is closed, never pooled: the endpoint never got a
        whole request.

        If you stop iterating early, close the generator (``contextlib.aclosing``) so the
        connection is released at once.

        Raises:
            LLMError: AUTH / RATE_LIMIT / BAD_REQUEST / CONTEXT_WINDOW_EXCEEDED / SERVER for a
                non-2xx answer or an error frame; NETWORK when the endpoint cannot be reached,
                the attempt passes ``attempt_timeout``, ``no_progress_timeout`` passes without
                output, or the output passes ``max_output_chars``;
                STREAM_IDLE when nothing arrives for ``stream_idle_timeout`` s; STREAM_CLOSED
                when the stream breaks before a finish; EMPTY_RESPONSE when it carried nothing.
            TypeError: ``body`` is not bytes.
        """
        if not isinstance(body, (bytes, bytearray)):
            raise TypeError("ChatClient.stream() takes the encoded body bytes (see encode_body)")
        assembler = StreamAssembler(max_tool_calls=self.max_tool_calls)
        got_headers = False
        loop = asyncio.get_running_loop()
        deadline = None if self.attempt_timeout is None else loop.time() + self.attempt_timeout
        try:
            request = self._request(body, ready)
            async with contextlib.AsyncExitStack() as stack:
                try:
                    async with asyncio.timeout_at(deadline):
                        response = await self._client.send(request, stream=True)
                except TimeoutError as exc:
                    if isinstance(request.stream, HeldBody) and request.stream.failed is exc:
                        raise  # ``ready``'s own error, unchanged
                    raise self._deadline_error("waiting for the response headers") from None
                stack.push_async_callback(response.aclose)
                got_headers = True
                if not 200 <= response.status_code < 300:
                    raw = await _read_capped(response, _MAX_ERROR_BODY)
                    error = error_from_response(response.status_code, response.headers, raw)
                    raise self._no_such_path(error) if response.status_code in (404, 405) else error
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" not in content_type.lower():
                    try:
                        async with asyncio.timeout_at(deadline):
                            answer = await self._non_sse(response, content_type, assembler)
                    except TimeoutError:
                        raise self._deadline_error("reading the response") from None
                    for event in answer:
                        yield event
                    return
                reads = SseReads(assembler, max_output_chars=self.max_output_chars, status=response.status_code)
                progress_at = loop.time()
                texts: Any = response.aiter_text()
                try:
                    while not reads.done:
                        stalled = (None if self.no_progress_timeout is None
                                   else progress_at + self.no_progress_timeout)
                        when = min((t for t in (deadline, stalled) if t is not None), default=None)
                        try:
                            async with asyncio.timeout_at(when):
                                text = await anext(texts)
                        except StopAsyncIteration:
                            events, error = reads.end()
                            for event in events:
                                yield event
                            if error is not None:
                                raise error
                            break
                        except TimeoutError:
                            if deadline is not None and loop.time() >= deadline:
                                raise self._deadline_error("in the stream") from None
                            raise LLMError("NETWORK", f"no progress for {self.no_progress_timeout:g} s from "
                                           f"{_redact_url(self.url)}: the stream sent only keep-alives or empty "
                                           "frames (no_progress_timeout)") from None
                        before = (assembler.output_chars, assembler.finish_reason)
                        events, error = reads.read(text)  # everything this read brought, at once
                        while True:
                            for event in events:
                                yield event
                            if error is not None:
                                raise error
                            if not reads.pending:  # the first delta left alone: the rest follows
                                break
                            events, error = reads.more()
                        if (assembler.output_chars, assembler.finish_reason) != before:
                            progress_at = loop.time()
                    if reads.done:  # the answer is whole: the body's own end is read in the background
                        self._read_tail(texts, stack.pop_all())
                        texts = None
                finally:
                    if texts is not None:
                        await texts.aclose()
                done = reads.done
            # the response is closed here (or, after [DONE], by its tail); emit Usage + Finish
            for event in assembler.close(done_seen=done):
                yield event
        except LLMError as exc:
            raise self._scrubbed(exc) from None
        except httpx.ReadTimeout:
            where = "in the stream" if got_headers else "waiting for the response headers"
            raise LLMError("STREAM_IDLE", f"no data for {self.stream_idle_timeout:g} s {where} "
                           f"from {_redact_url(self.url)}") from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if not got_headers:
                raise self._network_error(exc) from None
            if assembler.finish_reason is not None:
                # the provider finished its message and then dropped the connection: accept
                for event in assembler.close(done_seen=False):
                    yield event
                return
            raise LLMError("STREAM_CLOSED", f"the connection broke mid-stream: {exc}") from None
        except httpx.DecodingError as exc:
            raise LLMError("SERVER", f"undecodable response body: {exc}") from None
        except httpx.TransportError as exc:  # connect errors/timeouts, write errors, proxies …
            raise self._network_error(exc) from None

    def _request(self, body: bytes, ready: Awaitable[Any] | None) -> httpx.Request:
        """The ``httpx.Request`` that POSTs ``body``: what ``build_request`` makes (the client's
        headers merged with ours, ``Host``, the cookie jar's ``Cookie``, ``Content-Length`` last),
        its head but ``Content-Length`` merged once and the body given as its stream (not read
        into the request again); with ``ready``, that stream is a ``HeldBody`` (the same head)."""
        if self._head is None:
            if not isinstance(self._target, httpx.URL):  # raises httpx's error, as on every request before
                return self._client.build_request("POST", self._target, content=bytes(body), headers=self._headers)
            made = self._client.build_request("POST", self._target, headers=self._headers)
            made.headers.pop("Content-Length", None)
            self._head = made.headers
        body = bytes(body)
        stream = httpx.ByteStream(body) if ready is None else HeldBody(body, ready, self.stream_idle_timeout)
        request = httpx.Request("POST", self._target, headers=self._head, stream=stream,
                                extensions={"timeout": self._timeouts})
        if self._client._cookies:  # (an empty jar adds nothing: ``build_request`` skips it too)
            self._client._cookies.set_cookie_header(request)
        request.headers["Content-Length"] = str(len(body))  # last, where httpx puts it
        return request

    def _deadline_error(self, where: str) -> LLMError:
        return LLMError("NETWORK", f"the request to {_redact_url(self.url)} did not finish within "
                        f"{self.attempt_timeout:g} s (attempt_timeout; {where})")

    def _network_error(self, exc: Exception) -> LLMError:
        detail = str(exc) or type(exc).__name__
        return self._scrubbed(LLMError("NETWORK", f"cannot reach {_redact_url(self.url)}: {detail}"))

    def _scrubbed(self, error: LLMError) -> LLMError:
        """``error`` with the API key removed from its message (a provider may echo it, and an
        invalid header value shows up in transport errors): keys never reach logs or editors."""
        if not self._api_key or len(self._api_key) < 8 or self._api_key not in error.message:
            return error  # a short dummy key ("x") is no secret, and scrubbing it would mangle text
        return LLMError(error.code, error.message.replace(self._api_key, "<redacted>"),
                        status=error.status, retry_after=error.retry_after)

    def _no_such_path(self, error: LLMError) -> LLMError:
        """A 404/405 of the chat completions URL: which URL, and the usual cause — a base URL
        without its API root (``…/v1``), or a model the endpoint does not serve."""
        base = _redact_url(self.base_url)
        if "model" in error.message.lower():
            hint = "the endpoint may not serve this model: check the model name"
        elif not any(part[:1] == "v" and part[1:2].isdigit() for part in urlsplit(self.base_url).path.split("/")):
            hint = (f"is the base URL missing its API root? OpenAI-compatible servers answer at …/v1/chat/completions: "
                    f"try {base}/v1")
        else:
            hint = "is the base URL the API root of an OpenAI-compatible server (the part before /chat/completions)?"
        return LLMError(error.code, f"{error.message} (from POST {_redact_url(self.url)}; {hint})",
                        status=error.status, retry_after=error.retry_after)

    async def _non_sse(self, response: httpx.Response, content_type: str,
                       assembler: StreamAssembler) -> list[StreamEvent]:
        """A 2xx answer that is not ``text/event-stream``: an error object is mapped; a plain
        ``chat.completion`` (server ignored ``stream``) is assembled as one chunk; anything else
        is BAD_REQUEST (wrong base URL?)."""
        raw = await _read_capped(response, _MAX_JSON_BODY)
        try:
            payload = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            payload = None
        if isinstance(payload, Mapping) and payload.get("error"):
            raise error_from_payload(payload, default="SERVER")
        if isinstance(payload, Mapping) and isinstance(payload.get("choices"), list):
            return assembler.feed(_completion_as_chunk(payload)) + assembler.close(done_seen=True)
        snippet = raw[:300].decode("utf-8", errors="replace")
        raise LLMError(
            "BAD_REQUEST",
            f"expected an SSE stream (text/event-stream) from {_redact_url(self.url)}, got "
            f"HTTP {response.status_code} {content_type or 'without a content type'}: "
            f"{snippet!r}; is base_url the API root of an OpenAI-compatible server (…/v1)?",
            status=response.status_code,
        )
