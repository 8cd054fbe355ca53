"""The ``initialize`` answer (ACP v1; PROTOCOL.md "Methods the server implements").

Role: build the ``initialize`` result from the client's params. It is imported by the CLI's fast
path, which answers the editor's first request before ``asyncio``, ``httpx`` or pydantic load.

Must never: import anything but the standard library's lightest modules, or advertise a
capability that is not built (ACP clients act on what is advertised).
"""

from __future__ import annotations

from typing import Any

from agent_server import __version__

PROTOCOL_VERSION = 1


def initialize_result(params: dict[str, Any] | None) -> dict[str, Any]:
    """Return the ``InitializeResponse`` for ``params`` (the client's ``InitializeRequest``).

    Always ``protocolVersion: 1`` (the only version we speak, whatever the client asked).
    Capabilities switched on here are exactly those implemented: text and embedded-context
    prompts; ``session/load``, ``session/list`` (with pages), ``session/delete``,
    ``session/resume``, ``session/close`` and the unstable ``session/fork``; ``additionalDirectories``
    (extra workspace roots, policy-checked like ``cwd``); the ``agentServer`` extension block
    (PROTOCOL.md "Extensions") when the client announced it, with the negotiated position encoding.
    """
    capabilities: dict[str, Any] = {
        "loadSession": True,
        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": False},
        "sessionCapabilities": {"list": {}, "delete": {}, "additionalDirectories": {},
                                "resume": {}, "close": {}, "fork": {}},
    }
    extension = _extension(params)
    if extension is not None:
        capabilities["_meta"] = {"agentServer": extension}
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": capabilities,
        "authMethods": [],
        "agentInfo": {"name": "agent-server", "title": "agent-server", "version": __version__},
    }


def negotiate_encoding(offered: Any) -> str:
    """The first of the client's position encodings we support (``utf-16``, ``utf-8``,
    ``utf-32``), else ``utf-16`` (LSP's default)."""
    if isinstance(offered, list):
        for name in offered:
            if name in ("utf-16", "utf-8", "utf-32"):
                return name
    return "utf-16"


def _extension(params: dict[str, Any] | None) -> dict[str, Any] | None:
    caps = (params or {}).get("clientCapabilities")
    meta = caps.get("_meta") if isinstance(caps, dict) else None
    ext = meta.get("agentServer") if isinstance(meta, dict) else None
    if not isinstance(ext, dict) or ext.get("version") != 1 or ext.get("applyWorkspaceEdit") is not True:
        return None
    return {"version": 1, "applyWorkspaceEdit": True,
            "positionEncoding": negotiate_encoding(ext.get("positionEncodings"))}
