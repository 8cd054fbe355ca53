"""The configurable ACP *client* side used by the SDK harness (``acp_client.AcpHarness``).

Role: what the test's "editor" answers when the agent calls it. Everything is opt-in: a method
without a configured handler is not implemented (the SDK answers ``-32601``) and, unless
``ClientConfig.client_capabilities`` says otherwise, a capability is advertised exactly when its
handler is configured (``fs.readTextFile`` ↔ ``read_text_file``, ``fs.writeTextFile`` ↔
``write_text_file``).

Handlers work on wire JSON: they receive the request ``params`` as a camelCase dict and return
the ``result`` dict (or a pydantic model, or ``None`` for ``{}``); raising ``acp.RequestError``
answers with that error. A handler may be sync or async, or a plain dict (a fixed result).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError
from pydantic import BaseModel

Handler = Callable[[dict[str, Any]], Any] | Mapping[str, Any]

#: The ``clientCapabilities._meta.agentServer`` block of PROTOCOL.md ("Negotiation").
AGENT_SERVER_EXTENSION: dict[str, Any] = {
    "version": 1,
    "bufferVersions": True,
    "applyWorkspaceEdit": True,
    "positionEncodings": ["utf-16", "utf-8"],
}
#: The wire name of the edit-proposal extension request (server → client).
APPLY_WORKSPACE_EDIT = "_agent_server/apply_workspace_edit"


@dataclass
class ClientConfig:
    """How the harness client behaves.

    ``client_capabilities``: the exact ``clientCapabilities`` JSON to send; ``None`` derives it
    from the handlers (and ``agent_server_extension``).
    ``permission``: ``None`` (not implemented), an option id or kind to select
    (``"allow_once"`` …), ``"cancelled"``, a fixed result dict, or a handler.
    ``ext_methods``: handlers keyed by wire name (``"_agent_server/apply_workspace_edit"``).
    ``agent_server_extension``: ``True`` adds ``AGENT_SERVER_EXTENSION`` to the derived
    capabilities' ``_meta``; a dict adds that block instead.
    """

    client_capabilities: dict[str, Any] | None = None
    permission: str | Handler | None = None
    read_text_file: Handler | None = None
    write_text_file: Handler | None = None
    ext_methods: Mapping[str, Handler] = field(default_factory=dict)
    agent_server_extension: bool | dict[str, Any] = False
    client_info: dict[str, Any] = field(default_factory=lambda: {"name": "acp-test-harness", "version": "0.1.0"})

    def capabilities(self) -> dict[str, Any]:
        """The ``clientCapabilities`` to send in ``initialize``."""
        if self.client_capabilities is not None:
            return self.client_capabilities
        caps: dict[str, Any] = {
            "fs": {
                "readTextFile": self.read_text_file is not None,
                "writeTextFile": self.write_text_file is not None,
            },
            "terminal": False,
        }
        if self.agent_server_extension:
            block = AGENT_SERVER_EXTENSION if self.agent_server_extension is True else dict(self.agent_server_extension)
            caps["_meta"] = {"agentServer": block}
        return caps


def _dump(model: Any) -> Any:
    if isinstance(model, BaseModel):
        return model.model_dump(mode="json", by_alias=True, exclude_none=True)
    if isinstance(model, list):
        return [_dump(m) for m in model]
    return model


async def call_handler(handler: Handler, params: dict[str, Any]) -> Any:
    """Run a handler (dict, sync or async callable) and normalise its result to wire JSON."""
    if isinstance(handler, Mapping):
        result: Any = dict(handler)
    else:
        result = handler(params)
        if inspect.isawaitable(result):
            result = await result
    if result is None:
        return {}
    return _dump(result)


class Questions:
    """A permission handler that records each question (``asked``) and answers ``option`` (an
    option id)."""

    def __init__(self, option: str = "allow_once") -> None:
        self.option: str = option
        self.asked: list[dict[str, Any]] = []

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(params)
        return {"outcome": {"outcome": "selected", "optionId": self.option}}

    def titles(self) -> list[str]:
        """The titles of the questions asked, in order."""
        return [q["toolCall"].get("title", "") for q in self.asked]


def select_permission(choice: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A permission handler selecting the option whose ``optionId`` (else ``kind``) is ``choice``.

    ``"cancelled"`` answers the cancelled outcome. If no option matches, it answers ``cancelled``
    too and the mismatch is visible in the transcript.
    """

    def handler(params: dict[str, Any]) -> dict[str, Any]:
        if choice == "cancelled":
            return {"outcome": {"outcome": "cancelled"}}
        options = params.get("options") or []
        for key in ("optionId", "kind"):
            for option in options:
                if option.get(key) == choice:
                    return {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}
        return {"outcome": {"outcome": "cancelled"}}

    return handler


class MemoryFs:
    """In-memory "editor buffers" for ``fs/read_text_file`` / ``fs/write_text_file`` handlers.

    ``files`` maps absolute paths to text. ``versions`` (optional) maps a path to
    ``(version, dirty)``; when present the read result carries
    ``_meta.agentServer = {"version": version, "dirty": dirty}`` (PROTOCOL.md "Buffer versions").
    Missing files answer ``-32002`` (resource not found). ``line``/``limit`` are honoured
    (1-based line).
    """

    def __init__(
        self, files: Mapping[str, str] | None = None, versions: Mapping[str, tuple[int | None, bool]] | None = None
    ) -> None:
        self.files: dict[str, str] = dict(files or {})
        self.versions: dict[str, tuple[int | None, bool]] = dict(versions or {})
        self.reads: list[dict[str, Any]] = []
        self.writes: list[dict[str, Any]] = []

    def read(self, params: dict[str, Any]) -> dict[str, Any]:
        """``fs/read_text_file`` handler."""
        self.reads.append(params)
        path = params["path"]
        if path not in self.files:
            raise RequestError.resource_not_found(path)
        text = self.files[path]
        line, limit = params.get("line"), params.get("limit")
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            end = None if limit is None else start + limit
            text = "".join(lines[start:end])
        result: dict[str, Any] = {"content": text}
        if path in self.versions:
            version, dirty = self.versions[path]
            result["_meta"] = {"agentServer": {"version": version, "dirty": dirty}}
        return result

    def write(self, params: dict[str, Any]) -> dict[str, Any]:
        """``fs/write_text_file`` handler."""
        self.writes.append(params)
        self.files[params["path"]] = params["content"]
        return {}


class HarnessClient:
    """Duck-typed ``acp.Client`` built from a ``ClientConfig``.

    Only configured methods exist as attributes (the SDK resolves handlers with ``getattr``), so an
    unconfigured one is answered ``-32601`` by the SDK. ``updates`` holds every ``session/update``
    as ``(session_id, typed update)``; ``calls`` every agent→client request this client handled,
    as ``(wire method, params)``.
    """

    def __init__(self, config: ClientConfig, on_update: Callable[[], None] | None = None) -> None:
        self.config = config
        self.updates: list[tuple[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.ext_notifications: list[tuple[str, dict[str, Any]]] = []
        self._on_update = on_update
        if config.permission is not None:
            handler = config.permission
            if isinstance(handler, str):
                handler = select_permission(handler)
            self.request_permission = self._make_permission(handler)
        if config.read_text_file is not None:
            self.read_text_file = self._make_read(config.read_text_file)
        if config.write_text_file is not None:
            self.write_text_file = self._make_write(config.write_text_file)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        """Record one ``session/update`` (typed by the SDK)."""
        self.updates.append((session_id, update))
        if self._on_update is not None:
            self._on_update()

    async def _handle(self, method: str, handler: Handler, params: dict[str, Any]) -> Any:
        self.calls.append((method, params))
        return await call_handler(handler, params)

    def _make_permission(self, handler: Handler) -> Callable[..., Awaitable[Any]]:
        async def request_permission(session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
            params = {"sessionId": session_id, "toolCall": _dump(tool_call), "options": _dump(options)}
            if kwargs:
                params["_meta"] = kwargs
            return await self._handle("session/request_permission", handler, params)

        return request_permission

    def _make_read(self, handler: Handler) -> Callable[..., Awaitable[Any]]:
        async def read_text_file(
            session_id: str, path: str, line: int | None = None, limit: int | None = None, **kwargs: Any
        ) -> Any:
            params: dict[str, Any] = {"sessionId": session_id, "path": path}
            if line is not None:
                params["line"] = line
            if limit is not None:
                params["limit"] = limit
            if kwargs:
                params["_meta"] = kwargs
            return await self._handle("fs/read_text_file", handler, params)

        return read_text_file

    def _make_write(self, handler: Handler) -> Callable[..., Awaitable[Any]]:
        async def write_text_file(session_id: str, path: str, content: str, **kwargs: Any) -> Any:
            params: dict[str, Any] = {"sessionId": session_id, "path": path, "content": content}
            if kwargs:
                params["_meta"] = kwargs
            return await self._handle("fs/write_text_file", handler, params)

        return write_text_file

    async def ext_method(self, method: str, params: dict[str, Any]) -> Any:
        """Extension requests; the SDK strips the leading ``_`` from ``method``."""
        wire = f"_{method}"
        handler = self.config.ext_methods.get(wire, self.config.ext_methods.get(method))
        if handler is None:
            raise RequestError.method_not_found(wire)
        return await self._handle(wire, handler, params)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        """Extension notifications are recorded and otherwise ignored."""
        self.ext_notifications.append((f"_{method}", params))

    def describe(self) -> str:
        """Short description for failure messages."""
        return json.dumps({"capabilities": self.config.capabilities(), "calls": [m for m, _ in self.calls]})


async def never_answer(params: dict[str, Any]) -> dict[str, Any]:
    """A handler that never returns (until cancelled): models a user who never decides."""
    await asyncio.Event().wait()
    raise AssertionError("unreachable")
