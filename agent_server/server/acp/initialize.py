"""The ``initialize`` answer (ACP v1; PROTOCOL.md "Methods the server implements").

Role: build the ``initialize`` result from the client's params. It is imported by the CLI's fast
path, which answers the editor's first request before ``asyncio``, ``httpx`` or pydantic load.

Must never: import anything but the standard library's lightest modules (and ``config.views``,
standard library only: the slash commands it lists), or advertise a
capability that is not built (ACP clients act on what is advertised).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from agent_server import __version__
from agent_server.config.views import SLASH_COMMANDS

PROTOCOL_VERSION = 1

LOGIN_METHOD_ID = "agent-server-login"
"""The one ``authMethods`` entry: ``agent-server login`` (provider, key, model; checked, then stored)."""


def initialize_result(params: dict[str, Any] | None, *, image: bool = False) -> dict[str, Any]:
    """Return the ``InitializeResponse`` for ``params`` (the client's ``InitializeRequest``).

    Always ``protocolVersion: 1`` (the only version we speak, whatever the client asked).
    Capabilities switched on here are exactly those implemented: text and embedded-context
    prompts, and images when a configured model takes them (``image``: ``Config.accepts_images``); ``session/load``, ``session/list`` (with pages), ``session/delete``,
    ``session/resume``, ``session/close`` and the unstable ``session/fork``; ``additionalDirectories``
    (extra workspace roots, policy-checked like ``cwd``); the unstable ``systemPrompt`` (``append``
    and ``override``) on ``session/new|load|resume|fork``; the ``agentServer`` extension block
    (PROTOCOL.md "Extensions") when the client announced it, with the negotiated position encoding.
    ``authMethods``: the sign-in, ``auth_methods(params)``; ``auth.logout`` (the ``logout`` method).
    ``_meta.agentServer.availableCommands``: the slash commands (``AvailableCommand``\\s, the list
    ``available_commands_update`` sends with a session), so a client completes them before the first.
    """
    capabilities: dict[str, Any] = {
        "loadSession": True,
        "promptCapabilities": {"image": image, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": False},
        "sessionCapabilities": {"list": {}, "delete": {}, "additionalDirectories": {},
                                "resume": {}, "close": {}, "fork": {},
                                "systemPrompt": {"mode": {"override": {}}}},
        "auth": {"logout": {}},
    }
    extension = _extension(params)
    if extension is not None:
        capabilities["_meta"] = {"agentServer": extension}
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": capabilities,
        "authMethods": auth_methods(params),
        "agentInfo": {"name": "agent-server", "title": "agent-server", "version": __version__},
        "_meta": {"agentServer": {"availableCommands": SLASH_COMMANDS}},
    }


def auth_methods(params: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The ``authMethods`` of the answer: one entry, id ``LOGIN_METHOD_ID``.

    * The client announced ``clientCapabilities.auth.terminal`` (ACP) or Zed's
      ``clientCapabilities._meta["terminal-auth"]``: a ``type: "terminal"`` method with
      ``args: ["login"]`` (the client appends them to the command it started us with and runs
      that in a terminal; exit status 0 = signed in). For the ``_meta`` flag it also carries Zed's
      ``_meta["terminal-auth"] {command, args, label}``, the whole command line to run.
    * Otherwise an ``agent`` method (ACP forbids offering ``terminal`` to a client that did not
      ask): ``authenticate`` with it succeeds once a usable key is configured; its description
      says to run ``agent-server login`` in a terminal first.
    """
    caps = (params or {}).get("clientCapabilities")
    caps = caps if isinstance(caps, dict) else {}
    auth = caps.get("auth")
    meta = caps.get("_meta")
    terminal = isinstance(auth, dict) and auth.get("terminal") is True
    legacy = isinstance(meta, dict) and meta.get("terminal-auth") is True
    method: dict[str, Any] = {"id": LOGIN_METHOD_ID, "name": "Sign in with an API key"}
    if not (terminal or legacy):
        method["description"] = ("Run `agent-server login` in a terminal (pick the provider and model, paste "
                                 "the key), then sign in here.")
        return [method]
    method.update(type="terminal", args=["login"],
                  description="Pick the provider and model and paste your API key: it is checked with one "
                              "request, then kept in the system keyring (or a file only you can read).")
    if legacy:
        command, args = _own_command()
        method["_meta"] = {"terminal-auth": {"command": command, "args": [*args, "login"],
                                             "label": "agent-server login"}}
    return [method]


def _own_command() -> tuple[str, list[str]]:
    """How this process was started, as ``(command, args)`` without the sub-command: the
    ``agent-server`` script itself when that is what ran, else ``python -m agent_server``; the
    global options (``--config PATH``) are kept."""
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    options = list(sys.argv[1:])
    if argv0 and not argv0.endswith(".py") and os.path.isfile(argv0) and os.access(argv0, os.X_OK):
        return os.path.abspath(argv0), options
    return sys.executable, ["-m", "agent_server", *options]


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
