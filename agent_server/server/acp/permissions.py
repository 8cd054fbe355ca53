"""Asking the editor: ``session/request_permission`` (PROTOCOL.md "Methods the server calls").

Role: ``PermissionRequester.ask(question)`` sends one permission request for a session and turns
whatever comes back — or does not — into a policy ``Answer``: a selected option; the client's
``cancelled``; a timeout (``[policy] approval_timeout``, default 10 min; the request is then
cancelled with ``$/cancel_request``); an error response; an answer that does not fit the schema
or names an option we did not offer; a client that does not implement the method (``-32601``,
remembered for the session) or is not connected. A turn cancelled while the request is pending
cancels the request (``$/cancel_request``) and re-raises ``asyncio.CancelledError``.

Must never: turn a failure into an allow — only a well-formed ``selected`` with an offered allow
option is one (``Answer.allowed``), and nothing here raises except the turn's cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from agent_server.policy.approvals import Answer, Ask
from agent_server.server.rpc.jsonrpc import METHOD_NOT_FOUND, Connection, ConnectionClosed, JsonRpcError

log = logging.getLogger("agent_server.server")

METHOD = "session/request_permission"


def parse_answer(result: Any, offered: tuple[str, ...]) -> Answer:
    """The ``Answer`` for a ``RequestPermissionResponse`` ``result`` given the ``offered`` ids."""
    outcome = result.get("outcome") if isinstance(result, dict) else None
    if not isinstance(outcome, dict):
        return Answer("malformed", detail="the answer has no outcome object")
    kind = outcome.get("outcome")
    if kind == "cancelled":
        return Answer("cancelled", detail="the client answered cancelled")
    if kind != "selected":
        return Answer("malformed", detail=f"unknown outcome {kind!r}")
    option = outcome.get("optionId")
    if not isinstance(option, str):
        return Answer("malformed", detail="a selected outcome without an optionId string")
    if option not in offered:
        return Answer("unknown_option", option=None, detail=f"optionId {option!r} was not offered")
    return Answer("selected", option=option)


class PermissionRequester:
    """The ``Approver`` of one session.

    ``connection``: returns the live ``Connection`` (or ``None``); ``session_id``: the ACP
    session; ``timeout``: returns the seconds to wait for an answer (read per question, so the
    configured value is always the current one).
    """

    def __init__(self, connection: Callable[[], Connection | None], session_id: str,
                 timeout: Callable[[], float]) -> None:
        self._connection = connection
        self.session_id = session_id
        self._timeout = timeout
        self.unsupported: str | None = None

    def params(self, question: Ask) -> dict[str, Any]:
        """The ``RequestPermissionRequest`` params for ``question``."""
        tool_call: dict[str, Any] = {"toolCallId": question.tool_call_id, "title": question.title,
                                     "kind": question.kind, "status": "pending", "rawInput": question.raw_input}
        if question.content:
            tool_call["content"] = question.content
        if question.locations:
            tool_call["locations"] = question.locations
        return {"sessionId": self.session_id, "toolCall": tool_call, "options": question.options_json()}

    async def ask(self, question: Ask) -> Answer:
        """Ask the user; see the module docstring for every way this can end."""
        if self.unsupported is not None:
            return Answer("unavailable", detail=self.unsupported)
        connection = self._connection()
        if connection is None or connection.closed.is_set():
            return Answer("unavailable", detail="the client is not connected")
        timeout = self._timeout()
        try:
            result = await connection.request(METHOD, self.params(question), timeout=timeout)
        except asyncio.TimeoutError:
            return Answer("timeout", detail=f"no answer within {timeout:g} s")
        except ConnectionClosed:
            return Answer("unavailable", detail="the client disconnected")
        except JsonRpcError as exc:
            if exc.code == METHOD_NOT_FOUND:
                self.unsupported = f"the client does not implement {METHOD}"
                return Answer("unavailable", detail=self.unsupported)
            return Answer("error", detail=f"error {exc.code}: {exc.message}")
        except (OSError, ValueError) as exc:  # a broken pipe while sending
            log.debug("permission request failed: %s", exc)
            return Answer("unavailable", detail=f"the request could not be sent ({exc})")
        return parse_answer(result, question.options)
