"""One session's updates: streamed text coalesced, everything in order, a replay sent whole.

Role: every live update of a session goes through its ``UpdateGate`` — the one place both front
ends' updates pass (ACP ``session/update``, the LSP progress), so the two rules below hold for
every update whoever made it (the agent's stream, a tool's live output, a notice).

Must never: drop or reorder live updates, hold an update that is not a text chunk, delay the
first chunk after another update, or let a live update through while a replay is being sent.

* Coalescing (PROTOCOL.md, "Updates sent during a turn"): a text chunk (``agent_message_chunk`` /
  ``agent_thought_chunk``) leaves at once when it is the first since the session's last other
  update or flush, or when no chunk left in the last ``interval`` (16 ms); otherwise it is held and
  joined with the chunks after it, and the held text leaves ``interval`` after the last chunk
  did — at most one chunk notification per interval, bytes and order intact (a change of kind
  starts a new notification). Any other update (``tool_call``, ``tool_call_update`` — a live
  terminal delta included —, ``plan``, ``usage_update`` …) first sends the held text, then
  itself; ``flush()`` sends it at the end of a step and before a prompt is answered.
* Replay (a load of a running session): ``replay`` holds the gate while it sends the history, so
  the editor gets the replay whole and then the live updates, in order, none interleaved. Live
  updates already taken for sending when the replay began, and held text, are handed to the
  replay's builder (``waiting``): their content is already in what the builder reads (a streamed
  delta is added to the partial message before it is emitted), so the builder leaves them out of
  the replay — they follow right after — and nothing is shown twice or lost.

Each send runs in a task of its own, shielded: an emitter cancelled while its update waits (a
cancelled turn) does not lose it, and held text another update took with it still leaves.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Iterable

Emit = Callable[[dict[str, Any]], Awaitable[None]]

log = logging.getLogger("agent_server.server")

CHUNK_KINDS = frozenset({"agent_message_chunk", "agent_thought_chunk"})
"""The ``sessionUpdate`` kinds whose text is coalesced."""

CHUNK_INTERVAL = 0.016
"""Seconds: at most one chunk notification per session per interval (about one display frame)."""


def _text_of(update: dict[str, Any]) -> str | None:
    """The text of a plain streamed chunk (``{"sessionUpdate", "content": {"type": "text",
    "text"}}`` and, optionally, its ``messageId`` string, nothing else), or ``None`` for anything
    that must be sent as it is."""
    if len(update) != 2 and not (len(update) == 3 and type(update.get("messageId")) is str):
        return None
    content = update.get("content")
    if type(content) is not dict or len(content) != 2 or content.get("type") != "text":
        return None
    text = content.get("text")
    return text if type(text) is str else None


def _chunk(kind: str, text: str, message_id: str | None = None) -> dict[str, Any]:
    chunk: dict[str, Any] = {"sessionUpdate": kind, "content": {"type": "text", "text": text}}
    if message_id is not None:
        chunk["messageId"] = message_id
    return chunk

YIELD_AFTER = 0.005
"""Seconds a replay may keep the event loop before it lets other tasks run (a long history is
thousands of updates, each written at once while the pipe takes them)."""

REPLAY_BATCH = 64
"""Updates of a replay handed to the front end's ``send_many`` at once (one write for them all,
instead of one system call and one drain per update); memory holds at most one batch."""

EmitMany = Callable[[list[dict[str, Any]]], Awaitable[None]]


class UpdateGate:
    """The gate of one session's updates; ``send`` delivers one update to the front end.

    ``interval``: seconds between two chunk notifications (``CHUNK_INTERVAL``); ``send_many``
    (optional) delivers several updates, in order, as ``send`` would one by one: a replay hands
    it batches of up to ``REPLAY_BATCH``. Create it inside the event loop that runs the session.
    """

    def __init__(self, send: Emit, *, send_many: EmitMany | None = None, interval: float = CHUNK_INTERVAL) -> None:
        self._send = send
        self._send_many = send_many or self._send_each
        self._interval = interval
        self._lock = asyncio.Lock()
        self._waiting: list[dict[str, Any]] = []
        """Updates taken for sending, not yet sent (waiting for the lock), in order."""
        self._held: list[tuple[tuple[str, str | None], list[str]]] = []
        """Text not sent yet: runs of one kind and ``messageId``, in order, each a list of pieces
        joined when sent."""
        self._last = float("-inf")
        """Loop time the last chunk notification was taken for sending."""
        self._open = True
        """The next chunk leaves at once (nothing streamed yet, or another update / a flush since)."""
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    # -- live updates ---------------------------------------------------------------------------

    async def emit(self, update: dict[str, Any]) -> None:
        """Send a live update: a text chunk now or with the next coalesced one (see the module);
        anything else after the held text, at once. In arrival order, after a replay in progress."""
        kind = update.get("sessionUpdate")
        text = _text_of(update) if kind in CHUNK_KINDS else None
        if text is None:
            batch = self._take()
            batch.append(update)
            self._open = True
            await self._deliver(batch)
            return
        if not text:
            return  # an empty chunk shows nothing (and would only cost a notification)
        loop = asyncio.get_running_loop()
        now = loop.time()
        if not self._held and (self._open or now - self._last >= self._interval):
            self._open = False
            self._last = now
            await self._deliver([update])
            return
        held = self._held
        key = (kind, update.get("messageId"))
        if held and held[-1][0] == key:
            held[-1][1].append(text)
        else:
            held.append((key, [text]))
        if self._timer is None:
            self._timer = loop.call_at(max(now, self._last + self._interval), self._due)

    async def flush(self) -> None:
        """Send the held text now and return once every update emitted before has been sent (end
        of a step, before a prompt's answer). The next chunk leaves at once."""
        batch = self._take()
        self._open = True
        if batch:
            self._start(batch)
        if self._tasks:  # every send started before, in order (each takes the fair lock first thing)
            await asyncio.wait(list(self._tasks))

    def _take(self) -> list[dict[str, Any]]:
        """The held text as chunk updates (emptied; the timer is stopped)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._held:
            return []
        batch = [_chunk(kind, pieces[0] if len(pieces) == 1 else "".join(pieces), message_id)
                 for (kind, message_id), pieces in self._held]
        self._held = []
        return batch

    def _due(self) -> None:
        """The interval after the last chunk notification has passed: send the held text."""
        self._timer = None
        batch = self._take()
        if batch:
            self._last = asyncio.get_running_loop().time()
            self._start(batch)

    def _start(self, batch: list[dict[str, Any]]) -> asyncio.Task[None]:
        self._waiting.extend(batch)
        task = asyncio.get_running_loop().create_task(self._send_all(batch))
        self._tasks.add(task)
        task.add_done_callback(self._sent)
        return task

    async def _deliver(self, batch: list[dict[str, Any]]) -> None:
        await asyncio.shield(self._start(batch))

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:  # retrieved here: its emitter may be gone
            log.warning("a session update was not sent", exc_info=task.exception())

    async def _send_all(self, batch: list[dict[str, Any]]) -> None:
        async with self._lock:
            for update in batch:
                self._remove(update)
            for update in batch:
                await self._send(update)

    def _remove(self, update: dict[str, Any]) -> None:
        for i, item in enumerate(self._waiting):
            if item is update:
                del self._waiting[i]
                return

    # -- replay ---------------------------------------------------------------------------------

    async def replay(self, build: Callable[[list[dict[str, Any]]], Iterable[dict[str, Any]]]) -> int:
        """Send ``build(waiting)`` (the history, given the live updates that will be sent after
        it — taken for sending or held text, in order) with no live update in between; returns
        how many were sent. ``build`` is called once, at once; the updates it returns may be made
        lazily, one per send."""
        sent = 0
        async with self._lock:
            held = [_chunk(kind, "".join(pieces), message_id) for (kind, message_id), pieces in self._held]
            started = time.monotonic()
            batch: list[dict[str, Any]] = []
            for update in build(list(self._waiting) + held):
                batch.append(update)
                sent += 1
                if len(batch) >= REPLAY_BATCH:
                    await self._send_many(batch)
                    batch = []
                if time.monotonic() - started > YIELD_AFTER:  # a write that needs no wait does not
                    if batch:
                        await self._send_many(batch)
                        batch = []
                    await asyncio.sleep(0)  # give the loop back: other sessions go on meanwhile
                    started = time.monotonic()
            if batch:
                await self._send_many(batch)
            return sent

    async def _send_each(self, updates: list[dict[str, Any]]) -> None:
        """``send_many`` for a front end without one: ``send`` each update in order."""
        for update in updates:
            await self._send(update)


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
