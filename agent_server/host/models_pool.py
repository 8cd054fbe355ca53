"""One pooled HTTP client per model endpoint, shared by every session of the process.

Role: hand out ``ChatClient``\\s keyed by ``(base_url, api_key)`` so connections are reused across
sessions and turns, and close them all at shutdown.

Must never: create a client per request (connection set-up would dominate short steps).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_server.llm import ChatClient


class ClientPool:
    """``get(base_url, api_key)`` → a shared ``ChatClient``; ``aclose()`` closes them all.

    ``settings``: the ``[agent]`` settings (``AgentSettings``): the stream's idle, no-progress and
    total timeouts and the output cap of one attempt."""

    def __init__(self, settings: Any) -> None:
        self._limits = {"stream_idle_timeout": settings.stream_idle_timeout,
                        "no_progress_timeout": settings.no_progress_timeout,
                        "attempt_timeout": settings.attempt_timeout,
                        "max_output_chars": settings.max_output_chars,
                        "max_tool_calls": settings.max_tool_calls_per_step}
        self._clients: dict[tuple[str, str | None], ChatClient] = {}

    def get(self, base_url: str, api_key: str | None) -> ChatClient:
        """The client for this endpoint and key, created on first use."""
        key = (base_url, api_key)
        if key not in self._clients:
            # httpx loads here, with the first client (the warm-up after session/new, or a prompt):
            # not on the way to the session/new answer
            from agent_server.llm import ChatClient

            self._clients[key] = ChatClient(base_url, api_key, **self._limits)
        return self._clients[key]

    async def aclose(self) -> None:
        """Close every client."""
        for client in self._clients.values():
            await client.aclose()
        self._clients.clear()
