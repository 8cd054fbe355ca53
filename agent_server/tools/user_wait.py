"""A tool call's run time, which does not count the time the user spends deciding.

Role: the pipeline gives each dispatched call a ``CallClock`` (through the ``CALL_CLOCK`` context
variable, which the call's task copies) and bounds the call by ``clock.elapsed()`` — the time it
ran, minus the time it was *paused*. A backend that waits on the user — an edit proposal shown in
the editor, a ``workspace/applyEdit`` preview, a permission question asked from inside a tool —
wraps that wait in ``with awaiting_user():``; the call's deadline stands still meanwhile. Such a
wait is bounded by the approval timeout (``[policy] approval_timeout``) by whoever waits, as a
permission question is, and ends in a clear answer (``timeout``), never in the tool's timeout.

Must never: pause a clock for work of the tool or the editor itself (reading, writing, a document
sync): only a wait whose length is the user's choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from contextvars import ContextVar
from typing import Callable, Iterator


class CallClock:
    """Run time of one call: ``elapsed()`` seconds since the start, not counting paused spans.

    Pauses nest (``pause()``/``resume()`` pairs; the clock runs again when the last one ends).
    ``now``: the time source (``time.monotonic``; a test's own clock).
    ``changed()``: an awaitable that completes at the next pause or resume.
    """

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self._now = now
        self._start = now()
        self._paused_total = 0.0
        self._paused_at: float | None = None
        self._depth = 0
        self._changed = asyncio.Event()

    @property
    def paused(self) -> bool:
        """Whether the call is waiting on the user now."""
        return self._depth > 0

    def elapsed(self) -> float:
        """Seconds the call has run, paused spans left out."""
        now = self._now()
        paused = self._paused_total + (now - self._paused_at if self._paused_at is not None else 0.0)
        return now - self._start - paused

    def pause(self) -> None:
        """Stop the clock (the call now waits on the user)."""
        self._depth += 1
        if self._depth == 1:
            self._paused_at = self._now()
            self._signal()

    def resume(self) -> None:
        """Run the clock again once every pause has ended."""
        if self._depth == 0:
            return
        self._depth -= 1
        if self._depth == 0 and self._paused_at is not None:
            self._paused_total += self._now() - self._paused_at
            self._paused_at = None
            self._signal()

    async def changed(self) -> None:
        """Return at the next pause or resume."""
        await self._changed.wait()

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


CALL_CLOCK: ContextVar[CallClock | None] = ContextVar("agent_server_call_clock", default=None)
"""The clock of the tool call running in this task (``None`` outside a dispatched call)."""


@contextlib.contextmanager
def awaiting_user() -> Iterator[None]:
    """Pause the current call's clock for the block (no-op outside a dispatched call)."""
    clock = CALL_CLOCK.get()
    if clock is None:
        yield
        return
    clock.pause()
    try:
        yield
    finally:
        clock.resume()


async def run_within(task: "asyncio.Future[object]", clock: CallClock, budget: float) -> bool:
    """Wait for ``task`` until it is done (``True``) or ``clock`` has run ``budget`` seconds
    (``False``; the task is left running for the caller to cancel). The clock stands still while
    it is paused, so a call waiting on the user is never timed out by this."""
    while not task.done():
        remaining = None if clock.paused else budget - clock.elapsed()
        if remaining is not None and remaining <= 0:
            return False
        change = asyncio.ensure_future(clock.changed())
        try:
            await asyncio.wait({task, change}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            change.cancel()
    return True
