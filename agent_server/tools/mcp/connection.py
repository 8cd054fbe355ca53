"""One MCP server, run with the official ``mcp`` SDK for the life of a session.

Role: ``McpConnection(spec, env)`` starts the server (stdio: a child process with the given
environment that dies with us — ``setpriv --pdeathsig KILL`` where available — in its own process
group; http: Streamable HTTP with the spec's headers), lists its tools, and calls them with a timeout
and cancel. The SDK's async context lives in one task of its own (anyio scopes must be left by the
task that entered them); calls come from any task. A server that died is restarted on the next call.

Must never: let a call hang past its timeout, or leave the server's process behind after ``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from typing import Any

from agent_server.tools.mcp.spec import McpServerSpec

log = logging.getLogger("agent_server.mcp")


class McpError(RuntimeError):
    """The server could not be started, died, timed out or answered an error; ``str()`` says which."""


def _jsonable(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(model, "model_dump") else dict(model)


class McpConnection:
    """A running MCP server. ``tools``: its tool list (JSON dicts: name, description, inputSchema,
    annotations) after ``start``; ``start_timeout`` / ``call_timeout`` in seconds."""

    def __init__(self, spec: McpServerSpec, env: dict[str, str], *, start_timeout: float = 20.0,
                 call_timeout: float = 120.0) -> None:
        self.spec = spec
        self.env = env
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self.tools: list[dict[str, Any]] = []
        self._client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()

    def _server_arg(self) -> Any:
        from mcp.client.stdio import StdioServerParameters  # deferred: only sessions with servers pay

        if self.spec.transport == "http":
            return self.spec.url
        command, args = self.spec.command, list(self.spec.args)
        setpriv = shutil.which("setpriv")
        if setpriv:  # the server gets SIGKILL when this process dies, even by kill -9
            command, args = setpriv, ["--pdeathsig", "KILL", "--", self.spec.command, *args]
        return StdioServerParameters(command=command, args=args, env={**self.env, **self.spec.env})

    def _make_client(self) -> Any:
        from mcp import Client

        if self.spec.transport == "http" and self.spec.headers:
            import httpx2  # the SDK's HTTP client; headers go through a configured client
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client(self.spec.url, http_client=httpx2.AsyncClient(headers=self.spec.headers))
            return Client(transport, mode="auto")
        return Client(self._server_arg(), mode="auto")

    async def _run(self, ready: asyncio.Future[None]) -> None:
        self._stop = asyncio.Event()
        try:
            async with self._make_client() as client:
                self._client = client
                listed = await client.list_tools()
                self.tools = [_jsonable(t) for t in listed.tools]
                if not ready.done():
                    ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for the start
            if not ready.done():
                ready.set_exception(McpError(f"MCP server {self.spec.name!r} did not start: {_reason(exc)}"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.info("MCP server %s ended: %s", self.spec.name, _reason(exc))
        finally:
            self._client = None

    async def start(self) -> list[dict[str, Any]]:
        """Start the server and list its tools. Raises ``McpError`` (with the reason) on failure or
        after ``start_timeout``."""
        async with self._lock:
            if self._client is not None:
                return self.tools
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._runner = asyncio.create_task(self._run(ready), name=f"mcp:{self.spec.name}")
            try:
                await asyncio.wait_for(asyncio.shield(ready), self.start_timeout)
            except asyncio.TimeoutError:
                await self.close()
                raise McpError(f"MCP server {self.spec.name!r} did not start within {self.start_timeout:g} s") from None
            except McpError:
                await self.close()
                raise
            return self.tools

    @property
    def alive(self) -> bool:
        """Whether the server is connected (its task still runs)."""
        return self._client is not None and self._runner is not None and not self._runner.done()

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
        """Call ``tool``; returns the ``CallToolResult`` as JSON. Restarts a dead server first.
        Raises ``McpError`` on a timeout or a transport failure; ``asyncio.CancelledError`` when the
        caller is cancelled (the SDK sends ``notifications/cancelled``)."""
        if not self.alive:
            await self.close()
            await self.start()
        client = self._client
        try:
            result = await asyncio.wait_for(client.call_tool(tool, arguments), timeout or self.call_timeout)
        except asyncio.TimeoutError:
            raise McpError(f"MCP tool {self.spec.name}/{tool} timed out after {timeout or self.call_timeout:g} s") from None
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the SDK raises many kinds; the model gets the reason
            from mcp.shared.exceptions import MCPError
            from mcp_types import CONNECTION_CLOSED

            if isinstance(exc, MCPError) and exc.code != CONNECTION_CLOSED and self.alive:
                raise McpError(f"MCP tool {self.spec.name}/{tool} failed: {exc.error.message}") from None
            await self.close()  # the transport is gone: the next call starts the server again
            raise McpError(f"MCP server {self.spec.name!r} stopped during the call ({_reason(exc)}); "
                           "it will be restarted on the next call") from None
        return _jsonable(result)

    async def close(self) -> None:
        """Stop the server (its process and group) and forget the connection."""
        runner, self._runner = self._runner, None
        if self._stop is not None:
            self._stop.set()
        if runner is not None and not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), 5)
            except (asyncio.TimeoutError, Exception):  # noqa: BLE001
                runner.cancel()
                with contextlib.suppress(BaseException):
                    await runner
        self._client = None


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text[:300]


__all__ = ["McpConnection", "McpError"]
