"""One MCP server, run with the official ``mcp`` SDK for the life of a session.

Role: ``McpConnection(spec, env)`` starts the server (stdio: a child process with the given
environment, in its own process group, under ``reaper.py``, so that its whole process tree ends
with it, with ``close`` and with us, even by ``kill -9``; http: Streamable HTTP with the spec's headers), lists its tools, and calls them with a timeout
and cancel. The SDK's async context lives in one task of its own (anyio scopes must be left by the
task that entered them); calls come from any task. A server that died is restarted on the next call.
A stdio server's stderr stays out of ours: it is read through a pipe and only its end is kept
(``stderr.StderrTail``, 64 KiB), told with a "did not start" or "stopped" error.

Must never: let a call hang past its timeout, or leave the server's process behind after ``close``.

Tool list changes: a server that announces them sends ``notifications/tools/list_changed`` — on
its own for a pre-2026 (``initialize``) connection, inside a ``subscriptions/listen`` stream the
connection opens for a 2026-07-28 one when the server offers ``tools.listChanged``. Either way the
tools are listed again (all pages, bypassing the SDK's response cache) and ``on_tools_changed``
gets the new list; changes that arrive while a refresh runs make one more refresh after it. A
restarted server's list goes to ``on_tools_changed`` as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable

from agent_server.tools.mcp.spec import McpServerSpec
from agent_server.tools.mcp.stderr import StderrTail

log = logging.getLogger("agent_server.mcp")


_REAPER = Path(__file__).with_name("reaper.py")
NAMESPACES = os.environ.get("AGENT_SERVER_MCP_NAMESPACES", "1") != "0"
"""Whether stdio servers get a PID namespace of their own where user namespaces work (``0``: the
subreaper only; the tests run both)."""

_SDK_MODULES = ("mcp", "mcp.types", "mcp.client.stdio", "mcp.client.streamable_http", "mcp.shared.exceptions",
                "mcp_types", "mcp_types.version", "httpx2")
"""What a connection imports: seconds of module loading on a 2-core machine."""
_sdk_loaded = False


def _import_sdk() -> None:
    import importlib

    for name in _SDK_MODULES:
        importlib.import_module(name)


async def load_sdk() -> None:
    """Import the MCP SDK in a worker thread, once per process, so that the event loop keeps
    answering requests meanwhile (importing it on the loop held every request for 2–4 s)."""
    global _sdk_loaded
    if not _sdk_loaded:  # several servers starting at once: each waits in a thread; imports are locked
        await asyncio.to_thread(_import_sdk)
        _sdk_loaded = True


class McpError(RuntimeError):
    """The server could not be started, died, timed out or answered an error; ``str()`` says which."""


def _jsonable(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True) if hasattr(model, "model_dump") else dict(model)


ToolsChanged = Callable[[str, list[dict[str, Any]]], Awaitable[None]]
"""``(server name, its new tool list)``: called after the server said its tools changed."""

Elicit = Callable[[str, dict[str, Any]], Awaitable[dict[str, Any]]]
"""``(server name, the MCP ``elicitation/create`` params as JSON)`` → the answer as JSON
(``{"action", "content"?}``): the user's, through the client. Raises ``RuntimeError`` (its text: the
reason) when it cannot be asked or answered; the server is then told that reason as an error."""


class McpConnection:
    """A running MCP server. ``tools``: its tool list (JSON dicts: name, description, inputSchema,
    annotations) after ``start``; ``start_timeout`` / ``call_timeout`` in seconds;
    ``on_tools_changed``: told the new list after ``notifications/tools/list_changed``."""

    def __init__(self, spec: McpServerSpec, env: dict[str, str], *, start_timeout: float = 20.0,
                 call_timeout: float = 120.0, on_tools_changed: ToolsChanged | None = None,
                 elicit: Elicit | None = None) -> None:
        self.spec = spec
        self.elicit = elicit
        """Asks the user a server's elicitation (the client takes them); ``None``: elicitation is
        not advertised to the server, and the SDK declines one with an error."""
        self.env = env
        self.start_timeout = start_timeout
        self.call_timeout = call_timeout
        self.on_tools_changed = on_tools_changed
        self.tools: list[dict[str, Any]] = []
        self._client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self._refresh: asyncio.Task[None] | None = None
        self._stale = False
        # a stdio server's stderr: kept out of ours (it stays quiet), its end kept and told when it fails
        self._stderr = StderrTail()

    def _server_arg(self) -> Any:
        from mcp.client.stdio import StdioServerParameters  # deferred: only sessions with servers pay

        if self.spec.transport == "http":
            return self.spec.url
        # the server's whole process tree ends with it and with us (reaper.py: its own PID namespace,
        # else a subreaper); run by path, standard library only, so it starts in milliseconds
        command = sys.executable
        args = ["-I", "-S", str(_REAPER), str(os.getpid()), *(["--subreaper"] if not NAMESPACES else []),
                "--", self.spec.command, *self.spec.args]
        return StdioServerParameters(command=command, args=list(args), env={**self.env, **self.spec.env})

    def _make_client(self) -> Any:
        from mcp import Client

        # the server's own requests: an elicitation goes to the user when the client takes them (the
        # SDK then advertises elicitation); sampling and roots are never advertised, and the SDK
        # declines them at once ("Sampling not supported", "List roots not supported"), as any other
        # method ("Method not found")
        options: dict[str, Any] = {"mode": "auto", "message_handler": self._on_message}
        if self.elicit is not None:
            options["elicitation_callback"] = self._on_elicit
        if self.spec.transport == "http" and self.spec.headers:
            import httpx2  # the SDK's HTTP client; headers go through a configured client
            from mcp.client.streamable_http import streamable_http_client

            transport = streamable_http_client(self.spec.url, http_client=httpx2.AsyncClient(headers=self.spec.headers))
            return Client(transport, **options)
        if self.spec.transport == "http":
            return Client(self._server_arg(), **options)
        from mcp.client.stdio import stdio_client

        return Client(stdio_client(self._server_arg(), errlog=self._stderr.pipe()), **options)

    async def _on_elicit(self, context: Any, params: Any) -> Any:
        """The SDK's elicitation callback (a standalone ``elicitation/create`` of a pre-2026
        connection, or an input request of a 2026-07-28 call): the user's answer through
        ``elicit``, within the call timeout; any failure is an error the server is told."""
        from mcp import types

        asked = _jsonable(params)
        asked.pop("_meta", None)
        try:
            answer = await asyncio.wait_for(self.elicit(self.spec.name, asked), self.call_timeout)  # type: ignore[misc]
            return types.ElicitResult.model_validate(answer)
        except asyncio.TimeoutError:
            reason = f"the user did not answer within {self.call_timeout:g} s"
        except ValueError as exc:  # the client's answer is not an elicitation result
            reason = f"the client's answer is not an elicitation result: {_reason(exc)}"
        except RuntimeError as exc:
            reason = str(exc)
        log.info("MCP server %s: its elicitation was not answered: %s", self.spec.name, reason)
        return types.ErrorData(code=types.INVALID_REQUEST, message=f"Elicitation not answered: {reason}")

    def stderr_tail(self, limit: int = 400) -> str:
        """The last ``limit`` characters a stdio server wrote to its stderr (``""`` for none / http)."""
        return self._stderr.text(limit)

    def _stderr_said(self) -> str:
        """``"; its stderr ends: …"`` for a message about the server's end (``""``: it wrote none),
        saying so when the start of a long stderr was cut (only ``KEEP_BYTES`` are kept)."""
        tail = self.stderr_tail()
        if not tail:
            return ""
        cut = (f" ({self._stderr.written:,} bytes written, the first {self._stderr.dropped:,} cut)"
               if self._stderr.dropped else "")
        return f"; its stderr ends{cut}: {tail}"

    async def _run(self, ready: asyncio.Future[None]) -> None:
        self._stop = asyncio.Event()
        listener: asyncio.Task[None] | None = None
        try:
            async with self._make_client() as client:
                self._stderr.spawned()
                self._client = client
                self.tools = await _list_tools(client)
                listener = self._listen(client)
                if not ready.done():
                    ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for the start
            if not ready.done():
                self._stderr.spawned()  # a server that did not start: the pipe ends with it
                ready.set_exception(McpError(f"MCP server {self.spec.name!r} did not start: {_reason(exc)}"
                                             f"{self._stderr_said()}"))
            elif not isinstance(exc, asyncio.CancelledError):
                log.info("MCP server %s ended: %s", self.spec.name, _reason(exc))
        finally:
            if listener is not None:
                listener.cancel()
                with contextlib.suppress(BaseException):
                    await listener
            self._client = None

    def _listen(self, client: Any) -> asyncio.Task[None] | None:
        """On a 2026-07-28 connection whose server offers ``tools.listChanged``, keep a
        ``subscriptions/listen`` stream open (its ``notifications/tools/list_changed`` reach
        ``_on_message``); older connections get the notification without asking."""
        from mcp_types.version import MODERN_PROTOCOL_VERSIONS

        tools = getattr(client.server_capabilities, "tools", None)
        if client.protocol_version not in MODERN_PROTOCOL_VERSIONS or not getattr(tools, "list_changed", False):
            return None

        async def listen() -> None:
            try:
                async with client.listen(tools_list_changed=True) as subscription:
                    async for _ in subscription:
                        pass  # the same change arrives as a notification: _on_message refreshes
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the server refused or dropped the stream
                log.info("MCP server %s: no tool list changes (%s)", self.spec.name, _reason(exc))

        return asyncio.create_task(listen(), name=f"mcp-listen:{self.spec.name}")

    async def _on_message(self, message: Any) -> None:
        """The SDK's message handler: a tool list change starts a refresh in a task of its own
        (listing from inside the handler would wait on the loop that delivers the answer)."""
        from mcp.types import ToolListChangedNotification

        if not isinstance(getattr(message, "root", message), ToolListChangedNotification):
            return
        if self._refresh is not None and not self._refresh.done():
            self._stale = True  # one more round after the running one
            return
        self._refresh = asyncio.get_running_loop().create_task(self._refresh_tools(),
                                                               name=f"mcp-tools:{self.spec.name}")

    async def _refresh_tools(self) -> None:
        while True:
            self._stale = False
            client = self._client
            if client is None:
                return
            try:
                tools = await asyncio.wait_for(_list_tools(client, fresh=True), self.call_timeout)
            except Exception as exc:  # noqa: BLE001 - keep the old list; the next change tries again
                log.info("MCP server %s: listing its changed tools failed: %s", self.spec.name, _reason(exc))
                return
            self.tools = tools
            if self.on_tools_changed is not None:
                await self.on_tools_changed(self.spec.name, tools)
            if not self._stale:
                return

    async def settled(self, timeout: float = 5.0) -> None:
        """Wait (at most ``timeout`` seconds) for a tool list refresh that is running, so that a
        change the server announced during a call is offered from the very next request."""
        refresh = self._refresh
        if refresh is not None and not refresh.done():
            await asyncio.wait({refresh}, timeout=timeout)

    async def start(self) -> list[dict[str, Any]]:
        """Start the server and list its tools. Raises ``McpError`` (with the reason) on failure or
        after ``start_timeout``."""
        await load_sdk()
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
        """Call ``tool``; returns the ``CallToolResult`` as JSON. Restarts a dead server first and
        tells ``on_tools_changed`` the restarted server's tool list (it may differ). Raises ``McpError`` on a timeout or a transport failure; ``asyncio.CancelledError`` when the
        caller is cancelled (the SDK sends ``notifications/cancelled``)."""
        if not self.alive:
            await self.close()
            await self.start()
            if self.on_tools_changed is not None:  # another process: its tools are offered from now on
                await self.on_tools_changed(self.spec.name, self.tools)
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
                           f"it will be restarted on the next call{self._stderr_said()}") from None
        return _jsonable(result)

    async def close(self) -> None:
        """Stop the server (its process and group) and forget the connection."""
        refresh, self._refresh = self._refresh, None
        if refresh is not None and not refresh.done():
            refresh.cancel()
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
        self._stderr.close()


async def _list_tools(client: Any, *, fresh: bool = False) -> list[dict[str, Any]]:
    """Every tool of the server, page after page (``fresh``: not from the SDK's response cache)."""
    tools: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(1000):  # a server that pages forever is cut off
        listed = await client.list_tools(cursor=cursor, cache_mode="refresh" if fresh else "use")
        tools += [_jsonable(t) for t in listed.tools]
        cursor = getattr(listed, "next_cursor", None)
        if not cursor:
            break
    return tools


def _reason(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return text[:300]


__all__ = ["McpConnection", "McpError", "load_sdk"]
