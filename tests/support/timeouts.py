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

import os


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
