"""The raw record of a JSON-RPC conversation with an agent over stdio.

Role: one ``WireMessage`` per NDJSON line, in the order the harness saw it, tagged with its
direction and a monotonic timestamp (``time.monotonic()``: when the line was read from the agent's
stdout, or when it was written to the agent's stdin). Both harnesses (``acp_client`` and
``raw_agent``) append to a ``Transcript``; ``acp_schema.validate_transcript`` consumes
``Transcript.messages()`` (or the ``WireMessage`` objects themselves).

Lines are kept verbatim (``raw``) next to their parse (``message``); a line that is not JSON has
``message = None`` and ``parse_error`` set, so a test can assert that the agent never wrote one.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AGENT_TO_CLIENT = "agent->client"
CLIENT_TO_AGENT = "client->agent"
DIRECTIONS = (AGENT_TO_CLIENT, CLIENT_TO_AGENT)


@dataclass(frozen=True)
class WireMessage:
    """One NDJSON line on the wire.

    ``seq`` is the position in the transcript (0-based), ``t`` a ``time.monotonic()`` timestamp,
    ``raw`` the line without its trailing newline (decoded as UTF-8 with replacement),
    ``message`` the parsed JSON value (``None`` if the line is not JSON; note that a JSON ``null``
    line also parses to ``None`` but has no ``parse_error``).
    """

    seq: int
    direction: str
    t: float
    raw: str
    message: Any
    parse_error: str | None = None

    @property
    def is_json(self) -> bool:
        """True if the line parsed as JSON."""
        return self.parse_error is None

    @property
    def method(self) -> str | None:
        """The JSON-RPC ``method`` if this is a request or notification, else ``None``."""
        if isinstance(self.message, dict) and isinstance(self.message.get("method"), str):
            return self.message["method"]
        return None

    @property
    def kind(self) -> str:
        """``request``, ``notification``, ``response`` or ``invalid`` (by JSON-RPC shape only)."""
        msg = self.message
        if not isinstance(msg, dict):
            return "invalid"
        if "method" in msg:
            return "request" if "id" in msg else "notification"
        if "id" in msg and ("result" in msg or "error" in msg):
            return "response"
        return "invalid"

    def as_dict(self) -> dict[str, Any]:
        """JSON-serialisable form (the shape ``validate_transcript`` also accepts)."""
        out: dict[str, Any] = {
            "seq": self.seq,
            "direction": self.direction,
            "t": self.t,
            "raw": self.raw,
            "message": self.message,
        }
        if self.parse_error is not None:
            out["parse_error"] = self.parse_error
        return out


def parse_line(raw: str) -> tuple[Any, str | None]:
    """Parse one NDJSON line; returns ``(value, None)`` or ``(None, error text)``."""
    try:
        return json.loads(raw), None
    except (ValueError, RecursionError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


@dataclass
class Transcript:
    """Append-only, thread-safe list of ``WireMessage`` with small query helpers.

    ``listeners`` are called (in the appending thread) after each append; the asyncio harness uses
    one to wake up waiters.
    """

    _items: list[WireMessage] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    listeners: list[Callable[[WireMessage], None]] = field(default_factory=list)

    def record(self, direction: str, line: bytes | str, t: float | None = None) -> WireMessage:
        """Append one line (without or with its trailing newline) and return its record."""
        if direction not in DIRECTIONS:
            raise ValueError(f"unknown direction {direction!r}")
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        raw = line.rstrip("\r\n")
        message, error = parse_line(raw)
        with self._lock:
            item = WireMessage(
                seq=len(self._items),
                direction=direction,
                t=time.monotonic() if t is None else t,
                raw=raw,
                message=message,
                parse_error=error,
            )
            self._items.append(item)
        for listener in list(self.listeners):
            listener(item)
        return item

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[WireMessage]:
        return iter(self.snapshot())

    def __getitem__(self, index: int) -> WireMessage:
        return self._items[index]

    def snapshot(self) -> list[WireMessage]:
        """A copy of the records so far."""
        with self._lock:
            return list(self._items)

    def messages(self) -> list[dict[str, Any]]:
        """All records as plain dicts (``direction``, ``t``, ``raw``, ``message`` …)."""
        return [item.as_dict() for item in self.snapshot()]

    def sent(self) -> list[WireMessage]:
        """Records written by the client (client->agent)."""
        return [m for m in self.snapshot() if m.direction == CLIENT_TO_AGENT]

    def received(self) -> list[WireMessage]:
        """Records read from the agent (agent->client)."""
        return [m for m in self.snapshot() if m.direction == AGENT_TO_CLIENT]

    def requests(self, method: str | None = None, direction: str | None = None) -> list[WireMessage]:
        """Requests, optionally filtered by method and direction."""
        return [
            m
            for m in self.snapshot()
            if m.kind == "request"
            and (method is None or m.method == method)
            and (direction is None or m.direction == direction)
        ]

    def notifications(self, method: str | None = None, direction: str | None = None) -> list[WireMessage]:
        """Notifications, optionally filtered by method and direction."""
        return [
            m
            for m in self.snapshot()
            if m.kind == "notification"
            and (method is None or m.method == method)
            and (direction is None or m.direction == direction)
        ]

    def response_to(self, request: WireMessage) -> WireMessage | None:
        """The response (from the other side) carrying ``request``'s id, if it arrived."""
        if request.kind != "request":
            raise ValueError("response_to() needs a request record")
        other = AGENT_TO_CLIENT if request.direction == CLIENT_TO_AGENT else CLIENT_TO_AGENT
        rid = request.message["id"]
        for m in self.snapshot():
            if m.seq > request.seq and m.direction == other and m.kind == "response" and _same_id(m.message["id"], rid):
                return m
        return None

    def last_response(self, method: str, direction: str = CLIENT_TO_AGENT) -> WireMessage | None:
        """Response to the most recent ``method`` request sent in ``direction`` (default: by the client)."""
        reqs = self.requests(method, direction)
        return self.response_to(reqs[-1]) if reqs else None

    def session_updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The raw ``params`` of every ``session/update`` the agent sent (optionally for one session)."""
        out = []
        for m in self.notifications("session/update", AGENT_TO_CLIENT):
            params = m.message.get("params")
            if isinstance(params, dict) and (session_id is None or params.get("sessionId") == session_id):
                out.append(params)
        return out

    def non_json_lines(self, direction: str = AGENT_TO_CLIENT) -> list[WireMessage]:
        """Lines in ``direction`` that did not parse as JSON."""
        return [m for m in self.snapshot() if m.direction == direction and not m.is_json]

    def dump(self, path: str | Path) -> Path:
        """Write the transcript as one JSON document ``{"messages": [...]}``; returns the path."""
        path = Path(path)
        path.write_text(json.dumps({"messages": self.messages()}, indent=1, ensure_ascii=False) + "\n")
        return path

    def format(self, limit: int | None = 200) -> str:
        """Human-readable rendering (for assertion messages), one line per record."""
        items = self.snapshot()
        if limit is not None and len(items) > limit:
            items = items[-limit:]
        start = items[0].t if items else 0.0
        arrow = {AGENT_TO_CLIENT: "<-", CLIENT_TO_AGENT: "->"}
        return "\n".join(f"{m.seq:4d} {m.t - start:8.3f}s {arrow[m.direction]} {m.raw[:500]}" for m in items)


def _same_id(a: Any, b: Any) -> bool:
    """JSON-RPC id equality (type-sensitive: 1, "1" and true are different ids)."""
    return type(a) is type(b) and a == b
