"""An MCP server's elicitation, asked of the user through the ACP client (``elicitation/create``).

Role: ``Elicitor(connection, session_id, capabilities, timeout)`` turns the params of an MCP
``elicitation/create`` (form: ``message`` + ``requestedSchema``; url: ``message`` + ``url`` +
``elicitationId``) into ACP's session-scoped ``elicitation/create`` request (ACP 1.29: the same
modes, ``sessionId`` beside them), the message prefixed with the asking server's name, and the
client's ``{action, content?}`` back. ``elicitor_for(capabilities)`` is ``None`` for a client that
advertises neither mode: MCP servers are then not offered elicitation at all.

Must never: wait past its timeout, ask in a mode the client did not advertise, or present a
server's question as the agent's own.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from agent_server.server.rpc.jsonrpc import ConnectionClosed, JsonRpcError

METHOD = "elicitation/create"


class ElicitationFailed(RuntimeError):
    """The question could not be asked or was not answered; ``str()`` says why."""


def client_modes(capabilities: Any) -> frozenset[str]:
    """The elicitation modes a client's ``clientCapabilities`` advertise (``form``, ``url``)."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    if not isinstance(elicitation, dict):
        return frozenset()
    return frozenset(mode for mode in ("form", "url") if isinstance(elicitation.get(mode), dict))


class Elicitor:
    """Asks one session's user an MCP server's elicitation (see the module docstring)."""

    def __init__(self, connection: Callable[[], Any], session_id: str, modes: frozenset[str],
                 timeout: Callable[[], float]) -> None:
        self._connection = connection
        self.session_id = session_id
        self.modes = modes
        self._timeout = timeout

    def params(self, server: str, asked: dict[str, Any]) -> dict[str, Any]:
        """The ACP ``elicitation/create`` params for MCP params ``asked`` of ``server``."""
        mode = asked.get("mode") or "form"
        if mode not in self.modes:
            raise ElicitationFailed(f"the editor does not take {mode} elicitations")
        message = f"MCP server {server!r} asks: {asked.get('message') or ''}"
        params: dict[str, Any] = {"sessionId": self.session_id, "mode": mode, "message": message}
        if mode == "form":
            params["requestedSchema"] = asked.get("requestedSchema") or {"type": "object", "properties": {}}
        else:
            params["url"], params["elicitationId"] = asked.get("url"), asked.get("elicitationId")
        params["_meta"] = {"agentServer": {"mcpServer": server}}
        return params

    async def __call__(self, server: str, asked: dict[str, Any]) -> dict[str, Any]:
        connection = self._connection()
        if connection is None or connection.closed.is_set():
            raise ElicitationFailed("the editor is not connected")
        params = self.params(server, asked)
        timeout = self._timeout()
        try:
            answer = await connection.request(METHOD, params, timeout=timeout)
        except asyncio.TimeoutError:
            raise ElicitationFailed(f"the user did not answer within {timeout:g} s") from None
        except ConnectionClosed:
            raise ElicitationFailed("the editor disconnected") from None
        except JsonRpcError as exc:
            raise ElicitationFailed(f"the editor answered error {exc.code}: {exc.message}") from None
        if not isinstance(answer, dict) or answer.get("action") not in ("accept", "decline", "cancel"):
            raise ElicitationFailed(f"the editor's answer is not an elicitation result: {str(answer)[:200]}")
        result = {"action": answer["action"]}
        if answer["action"] == "accept" and isinstance(answer.get("content"), dict):
            result["content"] = answer["content"]
        return result


def elicitor_for(connection: Callable[[], Any], session_id: str, capabilities: Any,
                 timeout: Callable[[], float]) -> Elicitor | None:
    """An ``Elicitor`` for a client that advertises an elicitation mode, else ``None``."""
    modes = client_modes(capabilities)
    return Elicitor(connection, session_id, modes, timeout) if modes else None
