"""One step: one model request (with its retried attempts) and the assistant message it produced.

Role: log what enters the request (``request/header``, ``request/context`` when they change, then
``step/start``), rebuild the body from the log, stream it (forwarding deltas to the editor as they
arrive), retry retryable failures with backoff (each failed attempt logged as ``assistant/attempt``,
nothing of it committed), and commit the final ``assistant`` event. Each text and reasoning delta
goes to the stream journal (``session.journal``) before the editor, for crash recovery.

A failed attempt may already have shown text to the user (ACP cannot take a chunk back). Its
``assistant/attempt`` event keeps that text (``text``, ``reasoning``: what the user saw, never
projected: the model never sees a dead attempt) and, when another attempt follows, the notice the
user is shown before it (``retry``: the wait and the notice text, sent as one
``agent_message_chunk`` marked ``_meta.agentServer.retry``). ``session/load`` replays both from the
event (``retry_notice``), so the reloaded transcript is the live one.

Must never: send a body that was not rebuilt from the log, or commit anything of a failed attempt
to what the model sees.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Awaitable, Callable, Protocol

from agent_server.agent.exits import TurnFailed
from agent_server.agent.request import request_body
from agent_server.agent.request_memo import RequestMemo
from agent_server.llm import (
    AssembledMessage,
    Finish,
    LLMError,
    ReasoningDelta,
    TextDelta,
    encode_body,
)
from agent_server.session import EventLog, SessionEvent
from agent_server.session.images import ImageMissing
from agent_server.session.journal import StreamJournal

Emit = Callable[[dict[str, Any]], Awaitable[None]]
"""Sends one ACP ``SessionUpdate`` payload (the ``update`` of ``session/update``) to the editor."""

Flush = Callable[[], Awaitable[None]]
"""Sends what ``Emit`` held back (coalesced text) and returns once every update emitted before left."""


class ModelClient(Protocol):
    """What a step needs from the LLM layer: stream a request body, yield ``StreamEvent``\\s;
    ``ready``: awaited before the request's last bytes are sent (``ChatClient.stream``)."""

    def stream(self, body: bytes, *, ready: Awaitable[None] | None = None) -> AsyncIterator[Any]: ...


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter, honouring ``Retry-After``.

    ``max_attempts`` HTTP tries in all; the delay before try n+1 is
    ``uniform(0, min(max_delay, base_delay * 2**(n-1)))``, or ``retry_after`` if the provider gave
    one (capped at ``max_delay``).
    """

    max_attempts: int = 4
    base_delay: float = 1.0
    max_delay: float = 30.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, attempt: int, error: LLMError) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based)."""
        if error.retry_after is not None:
            return min(self.max_delay, max(0.0, error.retry_after))
        return self.rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** (attempt - 1)))


@dataclass
class PartialMessage:
    """What the current attempt has streamed so far (kept if the turn is cancelled mid-stream).

    Deltas are collected in lists (joining once is linear; ``str +=`` on an attribute is not).
    """

    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    step: int | None = None
    """The step whose request is in flight (``None`` between requests)."""
    journal: StreamJournal | None = None
    """The session's stream journal (``session.journal``): each delta is written to it before it
    is sent, so crash recovery can log what a killed process had streamed."""

    @property
    def text(self) -> str:
        """The answer text streamed so far."""
        return "".join(self.text_parts)

    @property
    def reasoning(self) -> str:
        """The reasoning streamed so far."""
        return "".join(self.reasoning_parts)

    def reset(self, step: int | None) -> None:
        """Start a new attempt of ``step`` (``None``: no request in flight)."""
        self.text_parts.clear()
        self.reasoning_parts.clear()
        self.step = step


@dataclass(frozen=True)
class RequestHeader:
    """Everything that goes into a request besides the history (logged as ``request/header``)."""

    system: str
    model: str
    params: dict[str, Any]
    tools: list[dict[str, Any]]
    reasoning_content: str
    context: dict[str, Any] | None = None
    """What the system text and the notes so far tell the model (``agent.header.context_data``)."""
    note: dict[str, Any] | None = None
    """The ``header/note`` to log before this header (``agent.header.header_note``), or ``None``."""

    def as_data(self) -> dict[str, Any]:
        """The ``request/header`` event data."""
        data = {
            "system": self.system,
            "model": self.model,
            "params": self.params,
            "tools": self.tools,
            "reasoning_content": self.reasoning_content,
        }
        if self.context is not None:
            data["context"] = self.context
        return data


def log_request_inputs(log: EventLog, header: RequestHeader, context: dict[str, Any]) -> None:
    """Append ``request/header`` (after its ``header/note``, if it has one) and ``request/context``
    unless equal to the latest ones."""
    for kind, data in (("request/header", header.as_data()), ("request/context", context)):
        last = log.latest(kind)
        if last is None or last.data != data:
            if kind == "request/header" and header.note is not None:
                log.append("header/note", header.note)
            log.append(kind, data)


async def stream_step(
    log: EventLog,
    client: ModelClient,
    emit: Emit,
    *,
    turn: int,
    step: int,
    retry: RetryPolicy,
    partial: PartialMessage,
    requests: RequestMemo | None = None,
    flush: Flush | None = None,
    images: Callable[[bytes], bytes] | None = None,
) -> AssembledMessage:
    """Run one step's request: log ``step/start``, stream with retries, return the message.

    ``requests``: the session's ``RequestMemo`` (the same bytes as ``encode_body(request_body(…))``
    without re-walking the log); ``images``: ``ImageStore.resolve`` of the session's folder (the
    bytes sent hold the stored images, the log their names). ``flush``: the session's gate flush — a failed try that showed
    text has it all sent before its ``assistant/attempt`` is logged. Before each retry the user is
    told (``retry_notice``, emitted after the failed try's text, before the wait).

    The caller commits the ``assistant`` event and then sets ``partial.step`` to ``None``: until
    then a cancel keeps what was streamed (the end of the step's text may still be on its way to the
    editor: ``flush``). Raises ``TurnFailed`` when the error is not
    retryable or the attempts are used up; ``asyncio.CancelledError`` passes through (``partial``
    then holds what was streamed).
    """
    start = log.append("step/start", {"turn": turn, "step": step})
    events = log.events
    body = requests.request(events, start.seq) if requests is not None else encode_body(request_body(events, start.seq))
    if images is not None:  # each image reference becomes the stored bytes' data: URL (session.images)
        try:
            body = images(body)
        except ImageMissing as exc:
            raise TurnFailed({"code": "STORAGE", "retryable": False, "message": str(exc)}) from None
    for attempt in range(1, retry.max_attempts + 1):
        partial.reset(step)
        if partial.journal is not None:
            partial.journal.begin(step_seq=start.seq, turn=turn, step=step, attempt=attempt)
        try:  # partial.step: cleared on commit
            return await _stream_once(client, body, emit, partial, start.seq, Waiting(log, emit, turn, step, attempt))
        except LLMError as error:
            final = not error.retryable or attempt == retry.max_attempts
            delay = None if final else retry.delay(attempt, error)
            data: dict[str, Any] = {"turn": turn, "step": step, "attempt": attempt, "error": error.to_dict(),
                                    "status": error.status}
            if partial.text_parts or partial.reasoning_parts:
                if flush is not None:
                    try:  # its text is all out before it is logged: a load meanwhile replays it from ``partial``
                        await flush()
                    except asyncio.CancelledError:
                        _log_failed(log, partial, data)
                        raise
            if delay is not None:
                data["retry"] = {"delay": delay, "notice": retry_notice_text(
                    error, delay, shown=bool(partial.text_parts or partial.reasoning_parts),
                    next_attempt=attempt + 1, max_attempts=retry.max_attempts)}
            event = _log_failed(log, partial, data)
            if final:
                detail = error.to_dict()
                if error.retryable:
                    detail["message"] = f"{detail['message']} (gave up after {attempt} attempt{'s' if attempt != 1 else ''})"
                raise TurnFailed(detail) from error
            notice = retry_notice(event)
            if notice is not None:  # made from the event, as a load makes it: live = replay
                await emit(notice)
            await asyncio.sleep(delay or 0.0)
    raise AssertionError("unreachable")


def _log_failed(log: EventLog, partial: PartialMessage, data: dict[str, Any]) -> SessionEvent:
    """Append the ``assistant/attempt`` of a failed try (with what it streamed, when anything) and
    end the attempt in ``partial`` (nothing of it is committed if the turn is cancelled next)."""
    text, reasoning = partial.text, partial.reasoning
    if text:
        data["text"] = text
    if reasoning:
        data["reasoning"] = reasoning
    event = log.append("assistant/attempt", data)
    partial.step = None
    if partial.journal is not None:  # what it streamed is in the log now
        partial.journal.end()
    return event


RETRY_CAUSES = {
    "RATE_LIMIT": "rate limited",
    "STREAM_CLOSED": "the stream closed",
    "STREAM_IDLE": "the stream went silent",
    "EMPTY_RESPONSE": "an empty answer",
    "SERVER": "a server error",
    "NETWORK": "a network error",
}
"""The cause a retry notice names, by ``LLMError.code`` (retryable codes only)."""


def dropped_calls_text(dropped: int, kept: int) -> str:
    """What the user is told when ``dropped`` tool calls of an answer past the per-answer cap were not
    run (``kept`` were): live, and again on ``session/load``."""
    return (f"\n\n[agent-server] {dropped:,} tool calls of this answer were dropped unrun: at most {kept} per "
            "answer (max_tool_calls_per_step).")


def retry_notice_text(error: LLMError, delay: float, *, shown: bool, next_attempt: int, max_attempts: int) -> str:
    """The one-line notice shown before try ``next_attempt`` of ``max_attempts``, framed by blank
    lines (``"\\n\\n[agent-server] …\\n\\n"``): whether the failed try had shown text (``shown``:
    "the model's answer broke off"), why (``RETRY_CAUSES``, with the HTTP status when there was
    one) and the wait (``delay`` seconds, rounded: "3 s", "1.4 s", "now")."""
    cause = RETRY_CAUSES.get(error.code, error.code.lower().replace("_", " "))
    if error.status is not None:
        cause = f"{cause}, HTTP {error.status}"
    what = "The model's answer broke off" if shown else "The model request failed"
    when = "now" if delay < 0.05 else f"in {_seconds(delay)} s"
    return f"\n\n[agent-server] {what} ({cause}); retrying {when} (attempt {next_attempt} of {max_attempts})…\n\n"


def _seconds(delay: float) -> str:
    rounded = round(delay) if delay >= 10 else round(delay, 1)
    return f"{rounded:g}"


def retry_notice(event: SessionEvent) -> dict[str, Any] | None:
    """The ``agent_message_chunk`` that told the user of the retry after the failed try
    ``event`` (an ``assistant/attempt``), or ``None`` when no retry followed it. The same update
    live (sent before the wait) and on ``session/load``: ``content`` is the logged notice text,
    ``_meta.agentServer.retry`` is ``{seq (the event's), attempt (the failed try, 1-based), code
    (the LLM error code), delaySeconds}`` — a client may show it apart (``agent-server run``
    prints it on stderr); any other shows the text."""
    retry = event.data.get("retry")
    if event.type != "assistant/attempt" or not isinstance(retry, dict) or not retry.get("notice"):
        return None
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(retry["notice"])},
            "_meta": {"agentServer": {"retry": {
                "seq": event.seq, "attempt": event.data.get("attempt"),
                "code": (event.data.get("error") or {}).get("code"),
                "delaySeconds": round(float(retry.get("delay") or 0.0), 3)}}}}


WAIT_NOTICES = (15.0, 60.0, 180.0)
"""Seconds after a try was sent at which, while nothing of its answer has arrived yet, the user is
told the agent still waits for the model (``waiting_notice``): an endpoint that accepts the
connection and never answers otherwise shows nothing for the whole ``stream_idle_timeout``."""


def waiting_notice_text(seconds: float) -> str:
    """The one-line notice of a try still unanswered after ``seconds``."""
    return (f"\n\n[agent-server] No answer from the model yet ({_seconds(seconds)} s); still waiting — "
            "stop the turn to give up.\n\n")


def waiting_notice(event: SessionEvent) -> dict[str, Any]:
    """The ``agent_message_chunk`` of an ``assistant/waiting`` event: the same live and on
    ``session/load``; ``_meta.agentServer.waiting`` is ``{seq, attempt, seconds}`` (a client may show it
    apart, as a retry notice)."""
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": str(event.data["notice"])},
            "_meta": {"agentServer": {"waiting": {"seq": event.seq, "attempt": event.data.get("attempt"),
                                                  "seconds": event.data.get("seconds")}}}}


class Waiting:
    """The timers of one try's ``WAIT_NOTICES``: each that fires before the answer's first event
    logs ``assistant/waiting`` and sends its notice; ``stop()`` (the first event, or the try's end)
    cancels the rest, and ``told()`` is what the first chunk waits for (the notice comes first)."""

    def __init__(self, log: EventLog, emit: Emit, turn: int, step: int, attempt: int) -> None:
        self.log, self.emit, self.turn, self.step, self.attempt = log, emit, turn, step, attempt
        self.sent: asyncio.Future[Any] | None = None
        self.timer: asyncio.TimerHandle | None = None
        self.index = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.timer = self.loop.call_later(WAIT_NOTICES[0], self._fire)

    def _fire(self) -> None:
        seconds = WAIT_NOTICES[self.index]
        try:
            event = self.log.append("assistant/waiting", {"turn": self.turn, "step": self.step, "attempt": self.attempt,
                                                          "seconds": seconds, "notice": waiting_notice_text(seconds)})
        except Exception:  # noqa: BLE001 — a log that cannot take it: no notice (the turn meets the log's error itself)
            self.timer = None
            return
        previous = self.sent

        async def send() -> None:
            if previous is not None:
                await previous
            await self.emit(waiting_notice(event))

        self.sent = asyncio.ensure_future(send())
        self.index += 1
        if self.index < len(WAIT_NOTICES) and self.loop is not None:
            self.timer = self.loop.call_later(WAIT_NOTICES[self.index] - seconds, self._fire)
        else:
            self.timer = None

    def stop(self) -> asyncio.Future[Any] | None:
        """Cancel the timers; the notice still being sent, if any."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        sent, self.sent = self.sent, None
        return sent if sent is not None and not sent.done() else None

    async def answered(self) -> None:
        """The answer's first event came: no more notices, the one being sent goes out first (as a
        load replays them)."""
        sent = self.stop()
        if sent is not None:
            await sent

    async def ended(self) -> None:
        """The try ended with nothing of its answer (failed, cancelled): no more notices."""
        sent = self.stop()
        if sent is not None:
            await asyncio.shield(sent)


async def _stream_once(client: ModelClient, body: bytes, emit: Emit, partial: PartialMessage,
                       step_seq: int, waiting: Waiting | None = None) -> AssembledMessage:
    """One attempt: stream ``body``, forward its deltas, return the message at its ``Finish``. The
    stream is closed here when the attempt ends (its ``aclose``), not left to the event loop's
    finaliser of abandoned generators (a thread-safe wake-up and a task of its own, per stream).
    ``waiting``: the try's wait notices, stopped at the answer's first event."""
    stream = client.stream(body)
    if waiting is not None:
        waiting.start()
    try:
        async for event in stream:
            if waiting is not None:
                await waiting.answered()
                waiting = None
            if isinstance(event, TextDelta):
                partial.text_parts.append(event.text)
                if partial.journal is not None:  # on disk before the editor can have it
                    partial.journal.text(event.text)
                await emit(_chunk("agent_message_chunk", event.text, message_id(step_seq, "agent_message_chunk")))
            elif isinstance(event, ReasoningDelta):
                partial.reasoning_parts.append(event.text)
                if partial.journal is not None:
                    partial.journal.reasoning(event.text)
                await emit(_chunk("agent_thought_chunk", event.text, message_id(step_seq, "agent_thought_chunk")))
            elif isinstance(event, Finish):
                return event.message
    finally:
        if waiting is not None:
            await waiting.ended()
        close = getattr(stream, "aclose", None)
        if close is not None:
            await close()
    raise LLMError("STREAM_CLOSED", "the stream ended without a finish")


def _chunk(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        chunk["messageId"] = message_id
    return chunk


def message_id(seq: int, kind: str) -> str:
    """The ACP ``messageId`` of a chunk, from the log: the ``seq`` of the ``step/start`` whose
    answer it streams (``user_message_chunk``: of the ``user`` event), so that ``session/load``
    replays the same ids. The thought and the text of one step are two messages."""
    prefix = {"agent_thought_chunk": "thought", "agent_message_chunk": "msg", "user_message_chunk": "user"}[kind]
    return f"{prefix}-{seq}"
