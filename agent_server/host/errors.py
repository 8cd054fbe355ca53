"""Errors the session host raises, for a front end to map onto its protocol.

Role: ``HostError(kind, message, data)`` says what went wrong in front-end-neutral terms —
``kind`` is ``"invalid"`` (bad arguments: ACP ``-32602``), ``"not_found"`` (unknown session:
``-32002``), ``"auth_required"`` (no usable API key: ``-32000``) or ``"internal"`` (the host could
not do it: ``-32603``, ``data.code`` says why).

Must never: carry protocol framing; the front end owns the wire.
"""

from __future__ import annotations

from typing import Any, Literal

Kind = Literal["invalid", "not_found", "auth_required", "internal"]


class HostError(Exception):
    """A request the host refuses or cannot do.

    ``kind``: ``"invalid"`` | ``"not_found"`` | ``"auth_required"`` | ``"internal"``; ``message``: for the user;
    ``data``: structured details (``sessionId``, ``path``, ``code`` …) or ``None``.
    """

    def __init__(self, kind: Kind, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.data = data


def unknown_session(session_id: str) -> HostError:
    """The ``not_found`` error for ``session_id``."""
    return HostError("not_found", f"unknown session: {session_id}", {"sessionId": session_id})
