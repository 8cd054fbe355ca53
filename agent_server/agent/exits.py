"""Every way a turn ends, one exception each (PROTOCOL.md "Turn exits").

Role: the closed set of turn exits and their ACP stop reasons. A step raises one of these; the
turn catches it, logs ``turn/end`` with ``exit`` and answers the prompt.

Must never: grow an exit without PROTOCOL.md naming it.
"""

from __future__ import annotations

from typing import Any

STOP_REASONS = {
    "end_turn": "end_turn",
    "max_tokens": "max_tokens",
    "max_turn_requests": "max_turn_requests",
    "refusal": "refusal",
    "cancelled": "cancelled",
}
"""Exit → ACP ``stopReason``. ``error`` answers with a JSON-RPC error instead; ``interrupted`` is
only written by crash repair and never answered."""


class TurnExit(Exception):
    """Base of all turn exits; ``exit`` is the name logged in ``turn/end.exit``."""

    exit: str = ""


class EndTurn(TurnExit):
    """The model finished without tool calls."""

    exit = "end_turn"


class MaxTokens(TurnExit):
    """The last step ended with ``finish_reason: "length"``."""

    exit = "max_tokens"


class MaxTurnRequests(TurnExit):
    """The step budget (``max_steps_per_turn``) was used up."""

    exit = "max_turn_requests"


class Refusal(TurnExit):
    """The provider refused (``content_filter`` or a ``refusal`` field)."""

    exit = "refusal"


class Cancelled(TurnExit):
    """``session/cancel`` or ``$/cancel_request`` on the prompt."""

    exit = "cancelled"


class TurnFailed(TurnExit):
    """Unrecoverable: auth, bad request, retries exhausted, no model configured.

    ``error`` is ``{"code", "message", "retryable"}`` with ``code`` from the LLM error set.
    """

    exit = "error"

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message", "turn failed"))
        self.error = error
