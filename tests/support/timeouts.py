"""How long a test waits for an event before it calls the wait a hang.

Role: one generous bound, ``HANG``, for every wait in the tests that only guards against a hang (an
answer, an exit, a message, a thread's end). It is reached only when the awaited thing never
happens, so its length costs a passing test nothing, and a loaded machine (CI has 2 cores; 8
engineers sharing one reach load 16) does not turn a slow start into a failure.
``AGENT_SERVER_TEST_HANG_SCALE`` (a number, default 1) multiplies it for a slower machine.
Must never: carry a timing claim (how fast something must be is a bench/ figure, never a test's
assert), nor bound a wait the test expects to run out (an absence check keeps its own short window).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable


def _scale() -> float:
    raw = os.environ.get("AGENT_SERVER_TEST_HANG_SCALE", "").strip()
    try:
        scale = float(raw) if raw else 1.0
    except ValueError:
        raise ValueError(f"AGENT_SERVER_TEST_HANG_SCALE={raw!r} is not a number") from None
    if not scale > 0:
        raise ValueError(f"AGENT_SERVER_TEST_HANG_SCALE={raw!r} must be above 0")
    return scale


SCALE = _scale()
HANG = 60.0 * SCALE


async def until(predicate: Callable[[], object], what: str, *, timeout: float | None = None,
                every: float = 0.005) -> None:
    """Poll ``predicate()`` every ``every`` s until it is true; ``AssertionError`` naming ``what``
    after ``timeout`` s (``HANG``): for a state no event announces (a file, a log's events)."""
    loop = asyncio.get_running_loop()
    limit = HANG if timeout is None else timeout
    deadline = loop.time() + limit
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {limit:g} s waiting for {what}")
        await asyncio.sleep(every)
