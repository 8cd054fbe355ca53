"""One pooled HTTP client per model endpoint, shared by every session of the process.

Role: hand out ``ChatClient``\\s keyed by ``(base_url, api_key)`` so connections are reused across
sessions and turns, and close them all at shutdown.

Must never: create a client per request (connection set-up would dominate short steps).
"""

from __future__ import annotations

from agent_server.llm import ChatClient


class ClientPool:
    """``get(base_url, api_key)`` → a shared ``ChatClient``; ``aclose()`` closes them all."""

    def __init__(self, stream_idle_timeout: float) -> None:
        self._idle = stream_idle_timeout
        self._clients: dict[tuple[str, str | None], ChatClient] = {}

    def get(self, base_url: str, api_key: str | None) -> ChatClient:
        """The client for this endpoint and key, created on first use."""
        key = (base_url, api_key)
        if key not in self._clients:
            self._clients[key] = ChatClient(base_url, api_key, stream_idle_timeout=self._idle)
        return self._clients[key]

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
