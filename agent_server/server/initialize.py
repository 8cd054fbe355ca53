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
    prompts. ``loadSession``, ``sessionCapabilities.*`` and the ``agentServer`` extension block
    are added by the issues that build them.
    """
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": False,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": False, "sse": False},
            "sessionCapabilities": {},
        },
        "authMethods": [],
        "agentInfo": {"name": "agent-server", "title": "agent-server", "version": __version__},
    }
