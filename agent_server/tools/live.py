"""Live output of a running shell command, for editors that show it in a terminal as it comes.

Role: ``LiveOutput`` receives the bytes a command prints (``feed``, called by the ``bash`` tool's
reader through the ``LIVE_OUTPUT`` context variable the pipeline sets for that call) and sends
them to the editor as ``tool_call_update``\\s carrying ``_meta.<key> {terminal_id, data}`` — the
terminal convention of Zed, claude-agent-acp and codex-acp (``key`` is ``terminal_output`` or
``terminal_output_delta``; both append ``data`` to what the editor's terminal already shows). At
most one update leaves per ``interval`` (50 ms); the first leaves at once. The stream is capped
at ``limit`` bytes of output, after which one line says so and nothing more is sent (the
command goes on; its result shows its end). Secrets are replaced by ``<redacted>`` exactly as in
the final result, also when one is split across two reads: an end of the output that could be
the start of a secret waits for the next piece.

Must never: change what the model sees or what the log holds (this is display only), block the
reader (``feed`` is synchronous and cheap), or send a secret, or anything after ``close``.
"""

from __future__ import annotations

import asyncio
import codecs
import contextvars
import signal
from typing import Any, Awaitable, Callable, Sequence

from .base import ToolResult
from .child_env import MIN_SECRET_CHARS, redact

#: Seconds between two live updates of one call (at most one per interval).
INTERVAL_SECONDS = 0.05
#: Most bytes of a command's output streamed live; the rest shows in its result only.
LIMIT_BYTES = 512 * 1024

LIVE_OUTPUT: contextvars.ContextVar["LiveOutput | None"] = contextvars.ContextVar("LIVE_OUTPUT", default=None)
"""The live stream of the tool call running in this task (set by the pipeline), or ``None``."""

Emit = Callable[[dict[str, Any]], Awaitable[None]]


def capped_notice(limit: int) -> str:
    """The line that ends a capped stream (``limit`` in bytes)."""
    return (f"\n[agent-server: live output stopped after {limit // 1024:,} KiB; the command goes on "
            "and its result shows how it ended]\n")


class LiveOutput:
    """The live output stream of one tool call.

    ``emit``: sends one session update (the session's update path); ``tool_call_id``: the call,
    also its ``terminal_id``; ``key``: the ``_meta`` key the client asked for; ``secrets``: values
    to redact (the tool context's ``redact``); ``interval`` in seconds, ``limit`` in bytes.
    """

    def __init__(self, emit: Emit, tool_call_id: str, key: str, secrets: Sequence[str] = (), *,
                 interval: float = INTERVAL_SECONDS, limit: int = LIMIT_BYTES) -> None:
        self._emit = emit
        self.tool_call_id = tool_call_id
        self.key = key
        self._secrets = tuple(s for s in secrets if s and len(s) >= MIN_SECRET_CHARS)
        self._interval = interval
        self._limit = limit
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = bytearray()  # read, not yet decoded
        self._held = ""  # decoded, kept back: may be the start of a secret
        self._accepted = 0  # bytes taken into the stream (at most ``limit``)
        self._overflow = False  # bytes were dropped at the limit
        self._capped = False  # the notice was sent; nothing more goes out
        self._closed = False
        self._next = 0.0  # loop time before which no update leaves
        self._timer: asyncio.Task[None] | None = None
        self._sleeping = False
        self.updates = 0
        """Updates sent so far."""

    @property
    def capped(self) -> bool:
        """Whether the stream reached its limit (the notice was or will be sent)."""
        return self._overflow

    def feed(self, data: bytes) -> None:
        """Take the next bytes the command printed (the reader's thread of control, never blocks)."""
        if self._closed or self._overflow or not data:
            return
        room = self._limit - self._accepted
        if len(data) > room:
            data = data[:room]
            self._overflow = True
        self._accepted += len(data)
        self._pending += data
        if self._timer is None:
            self._timer = asyncio.get_running_loop().create_task(self._pump(), name=f"live-output-{self.tool_call_id}")

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while (self._pending or (self._overflow and not self._capped)) and not self._closed:
                delay = self._next - loop.time()
                if delay > 0:
                    self._sleeping = True
                    await asyncio.sleep(delay)
                    self._sleeping = False
                await self._flush(final=self._overflow)
        finally:
            self._sleeping = False
            self._timer = None

    async def _flush(self, *, final: bool) -> None:
        """Send what is pending (keeping back a possible secret's start unless ``final``)."""
        text = self._held + self._decoder.decode(bytes(self._pending), final=final)
        self._pending.clear()
        if final:
            send, self._held = text, ""
        else:
            cut = self._safe_cut(text)
            send, self._held = text[:cut], text[cut:]
        send = redact(send, self._secrets)
        if final and self._overflow and not self._capped:
            send += capped_notice(self._limit)
            self._capped = True
        if not send:
            return
        self._next = asyncio.get_running_loop().time() + self._interval
        self.updates += 1
        await self._emit({"sessionUpdate": "tool_call_update", "toolCallId": self.tool_call_id,
                          "_meta": {self.key: {"terminal_id": self.tool_call_id, "data": send}}})

    def _safe_cut(self, text: str) -> int:
        """How much of ``text`` may leave now: all but its longest end that could be the start of
        a secret (the next piece may complete it), and never part of a whole secret."""
        cut = len(text)
        for secret in self._secrets:
            for k in range(min(len(secret) - 1, len(text)), 0, -1):
                if text.endswith(secret[:k]):
                    cut = min(cut, len(text) - k)
                    break
        for secret in self._secrets:  # a whole secret across the cut goes out whole, later
            start = text.find(secret, max(0, cut - len(secret) + 1))
            while 0 <= start < cut:
                cut = start
                start = text.find(secret, max(0, cut - len(secret) + 1))
        return cut

    async def close(self) -> None:
        """The command ended: send what is left (all of it, redacted), then nothing more."""
        if self._closed:
            return
        timer = self._timer
        if timer is not None and not timer.done():
            if self._sleeping:
                timer.cancel()
            await asyncio.gather(timer, return_exceptions=True)
        self._closed = True
        if not self._capped:
            await self._flush(final=True)

    def abort(self) -> None:
        """The call was cancelled: stop at once, send nothing more (its result follows)."""
        self._closed = True
        if self._timer is not None and not self._timer.done():
            self._timer.cancel()


def terminal_block(tool_call_id: str) -> dict[str, Any]:
    """The ``terminal`` content block of a call whose output the editor shows live."""
    return {"type": "terminal", "terminalId": tool_call_id}


def end_terminal(update: dict[str, Any], tool_call_id: str, result: ToolResult, *, partial: bool) -> None:
    """Make ``update`` (a call's final ``tool_call_update``, whose first content block is the
    text the model sees) close the editor's terminal: ``_meta.terminal_exit {terminal_id,
    exit_code, signal}`` (a signal's death has ``exit_code`` null and the signal's name; a
    command that never ran has both null). When the command ran (its result's meta has
    ``exit_code``), the terminal stays the card's content and the text goes to
    ``rawOutput.formatted_output`` (as in claude-agent-acp and codex-acp: the terminal already
    shows the output) — and also after the terminal when the terminal did not get all of it
    (``partial``: capped or cancelled). When it did not run (denied, refused), the text says why,
    as for other clients."""
    text_block = update["content"][0]
    text = text_block["content"]["text"]
    shown = "exit_code" in result.meta
    code = result.meta.get("exit_code")
    exit_code: int | None = code if isinstance(code, int) and code >= 0 else None
    signal_name: str | None = None
    if isinstance(code, int) and code < 0:
        try:
            signal_name = signal.Signals(-code).name
        except ValueError:
            signal_name = f"signal {-code}"
    update["_meta"] = {"terminal_exit": {"terminal_id": tool_call_id, "exit_code": exit_code, "signal": signal_name}}
    if shown:
        update["content"] = [terminal_block(tool_call_id), *([text_block] if partial else []), *result.content]
        update["rawOutput"] = {"formatted_output": text, "exit_code": exit_code}
