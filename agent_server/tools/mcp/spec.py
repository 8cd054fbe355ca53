"""MCP server specs from ACP ``mcpServers`` entries (``McpServerStdio``, ``McpServerHttp``).

Role: ``specs_from_acp`` reads them: a stdio entry is ``{name, command, args, env: [{name, value}]}``; an http entry is
``{type: "http", name, url, headers: [{name, value}]}``. ``sse`` servers are not supported (we
advertise ``mcpCapabilities.sse: false``) and are reported.

Must never: drop an entry silently, or start anything (it reads specs only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence


class McpSpecError(ValueError):
    """An ``mcpServers`` entry that cannot be run; ``str()`` says which and why."""


@dataclass(frozen=True)
class McpServerSpec:
    """One server: ``transport`` ``"stdio"`` (``command``, ``args``, ``env``) or ``"http"``
    (``url``, ``headers``)."""

    name: str
    transport: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)


def _pairs(value: Any, what: str, server: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, list) or not all(isinstance(p, dict) and isinstance(p.get("name"), str)
                                              and isinstance(p.get("value"), str) for p in value):
        raise McpSpecError(f"MCP server {server!r}: {what} must be a list of {{name, value}} strings")
    return {p["name"]: p["value"] for p in value}


def specs_from_acp(entries: Sequence[Any]) -> tuple[list[McpServerSpec], list[str]]:
    """``(specs, problems)``: the runnable servers, and one sentence per entry that is not."""
    specs: list[McpServerSpec] = []
    problems: list[str] = []
    seen: set[str] = set()
    for entry in entries:
        try:
            if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
                raise McpSpecError(f"MCP server entry without a name: {str(entry)[:120]}")
            name = entry["name"]
            if name in seen:
                raise McpSpecError(f"MCP server {name!r} is given twice; the first one is used")
            kind = entry.get("type", "stdio")
            if kind == "stdio" and isinstance(entry.get("command"), str) and entry["command"]:
                args = entry.get("args") or []
                if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                    raise McpSpecError(f"MCP server {name!r}: args must be a list of strings")
                spec = McpServerSpec(name, "stdio", command=entry["command"], args=tuple(args),
                                     env=_pairs(entry.get("env"), "env", name))
            elif kind == "http" and isinstance(entry.get("url"), str) and entry["url"].startswith(("http://", "https://")):
                spec = McpServerSpec(name, "http", url=entry["url"], headers=_pairs(entry.get("headers"), "headers", name))
            elif kind == "sse":
                raise McpSpecError(f"MCP server {name!r}: SSE transport is not supported (use stdio or http)")
            else:
                raise McpSpecError(f"MCP server {name!r}: needs a command (stdio) or an http(s) url (type http)")
        except McpSpecError as exc:
            problems.append(str(exc))
            continue
        seen.add(name)
        specs.append(spec)
    return specs, problems
