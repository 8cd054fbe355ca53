"""``finalised_async_generators()``: which async generators the event loop had to finalise itself."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def finalised_async_generators() -> Iterator[list[str]]:
    """Within the block, record the ``__qualname__`` of every async generator left to the loop's
    finaliser (one not run to its end nor closed by its owner); the hooks are restored after."""
    finalised: list[str] = []
    hooks = sys.get_asyncgen_hooks()

    def spy(agen):
        finalised.append(agen.__qualname__)
        return hooks.finalizer(agen)

    sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=spy)
    try:
        yield finalised
    finally:
        sys.set_asyncgen_hooks(*hooks)
