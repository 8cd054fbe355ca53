"""Cursor pagination of ``session/list``: pages in a stable order, an opaque cursor for the next.

Role: the listing is ordered newest first by ``(updated, session id)``; a page ends with a cursor
that names the last entry it returned (base64url of ``{"u": updated, "id": session id}``), and the
next page is every entry strictly after that one in the same order. Sessions written to after a
page was cut move to the front and are not repeated; none is skipped that was listed before.

Must never: repeat an entry in one walk through the pages, or accept a cursor it did not make.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Sequence

PAGE_SIZE = 50
"""Sessions per ``session/list`` page."""


class BadCursor(ValueError):
    """A cursor this server did not make (or one that was altered)."""


def encode_cursor(updated: float, session_id: str) -> str:
    """The opaque cursor after the entry ``(updated, session_id)``."""
    raw = json.dumps({"u": updated, "id": session_id}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[float, str]:
    """``(updated, session_id)`` of a cursor made by ``encode_cursor``; ``BadCursor`` otherwise."""
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        updated, session_id = data["u"], data["id"]
    except (binascii.Error, ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise BadCursor(f"invalid cursor {cursor[:40]!r}: pass the nextCursor of an earlier "
                        "session/list answer, unchanged") from None
    if not isinstance(updated, (int, float)) or isinstance(updated, bool) or not isinstance(session_id, str):
        raise BadCursor(f"invalid cursor {cursor[:40]!r}")
    return float(updated), session_id


def page(entries: Sequence[tuple[float, str, dict[str, Any]]], cursor: str | None,
         size: int = PAGE_SIZE) -> tuple[list[dict[str, Any]], str | None]:
    """One page of ``entries`` (``(updated, session_id, info)``, any order): the infos newest
    first after ``cursor`` (``None``: from the start), at most ``size``, and the next cursor
    (``None`` on the last page). Raises ``BadCursor``."""
    ordered = sorted(entries, key=lambda e: (e[0], e[1]), reverse=True)
    if cursor is not None:
        after = decode_cursor(cursor)
        ordered = [e for e in ordered if (e[0], e[1]) < after]
    chosen = ordered[:size]
    more = len(ordered) > size
    return [e[2] for e in chosen], (encode_cursor(chosen[-1][0], chosen[-1][1]) if more else None)
