"""One session's updates, serialised with a replay of its history (a load of a running session).

Role: every live update of a session goes through its ``UpdateGate``; ``replay`` holds the gate
while it sends the history, so the editor gets the replay whole and then the live updates, in
order, none interleaved. A live update that was already waiting at the gate when the replay began
is handed to the replay's builder (``waiting``): its content is already in what the builder reads
(a streamed delta is added to the partial message before it is sent), so the builder leaves it
out of the replay — it follows right after — and nothing is shown twice or lost.

Must never: drop or reorder live updates, or let one through while a replay is being sent.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

Emit = Callable[[dict[str, Any]], Awaitable[None]]


class UpdateGate:
    """The gate of one session's updates; ``send`` delivers one update to the front end."""

    def __init__(self, send: Emit) -> None:
        self._send = send
        self._lock = asyncio.Lock()
        self._waiting: list[dict[str, Any]] = []

    async def emit(self, update: dict[str, Any]) -> None:
        """Send a live update (after a replay in progress, in arrival order)."""
        self._waiting.append(update)
        try:
            async with self._lock:
                self._remove(update)
                await self._send(update)
        finally:
            self._remove(update)

    def _remove(self, update: dict[str, Any]) -> None:
        for i, item in enumerate(self._waiting):
            if item is update:
                del self._waiting[i]
                return

    async def replay(self, build: Callable[[list[dict[str, Any]]], list[dict[str, Any]]]) -> int:
        """Send ``build(waiting)`` (the history, given the live updates already waiting to be sent
        after it) with no live update in between; returns how many were sent."""
        async with self._lock:
            updates = build(list(self._waiting))
            for update in updates:
                await self._send(update)
            return len(updates)


def without_waiting(text: str, waiting: list[dict[str, Any]], kind: str) -> str:
    """``text`` (streamed so far) minus the ``kind`` chunks still waiting to be sent, which were
    added to its end before being sent."""
    for update in reversed(waiting):
        if update.get("sessionUpdate") != kind:
            continue
        piece = str((update.get("content") or {}).get("text", ""))
        if piece and text.endswith(piece):
            text = text[: len(text) - len(piece)]
    return text
