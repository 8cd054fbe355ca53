"""The MCP servers of one session: started in parallel, their tools offered under exposed names.

Role: ``McpTools(specs, …).start()`` starts every server in the background (``session/new`` does not
wait); ``wait_ready(seconds)`` lets the first prompt wait a little for those still starting. Each
tool of a server that is up becomes an ``McpTool`` in the session's tool table (a dict the tool
runner reads), under a name from ``expose_names``; the map and every server that failed are logged
(``mcp/tools``, ``mcp/failed``), and a failure is told to the user. A server that changes its tools
(``notifications/tools/list_changed``), starts late, or is restarted after a crash with other
tools, has them offered anew from the next request on, the new map logged; once the session has
made a model request, that change is a break of the requests' stable head: counted (``mcp/tools``
``break``) and told to the user. ``close()`` stops the servers.

Must never: fail the session because a server failed, or decide whether a call may run (the policy
does, from ``McpTool.mcp``: server, tool, annotations, trusted).
"""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from pydantic import BaseModel, ConfigDict

from agent_server.session import LogWriteError
from agent_server.tools.base import Tool, ToolContext, ToolResult
from agent_server.tools.mcp.connection import Elicit, McpConnection, McpError
from agent_server.tools.mcp.names import expose_names
from agent_server.tools.mcp.results import render_result
from agent_server.tools.mcp.spec import McpServerSpec

log = logging.getLogger("agent_server.mcp")

Emit = Callable[[dict[str, Any]], Awaitable[None]]


class McpArgs(BaseModel):
    """Any JSON object: the server validates its own arguments (its schema is what the model sees)."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class McpInfo:
    """What the policy needs to know about an MCP tool: its ``server`` and ``tool`` names, its
    ``annotations`` (untrusted unless ``trusted``) and whether the user's config trusts the server."""

    server: str
    tool: str
    annotations: dict[str, Any]
    trusted: bool

    @property
    def read_only(self) -> bool:
        """``readOnlyHint``, believed only for a trusted server."""
        return self.trusted and self.annotations.get("readOnlyHint") is True

    @property
    def destructive(self) -> bool:
        """``destructiveHint`` (also believed from an untrusted server: it only makes us more careful)."""
        return self.annotations.get("destructiveHint") is True


class McpTool(Tool):
    """One server tool as a tool of the session. Instances carry their own name and schema."""

    Args = McpArgs
    default_timeout = 120.0

    def __init__(self, name: str, spec: dict[str, Any], info: McpInfo, connection: McpConnection) -> None:
        self.name = name  # type: ignore[misc]  # per instance, not per class
        self.description = str(spec.get("description") or f"{info.tool} (MCP server {info.server})")  # type: ignore[misc]
        self.kind = "read" if info.annotations.get("readOnlyHint") is True else "other"  # type: ignore[misc]
        self.concurrency_safe = info.read_only  # type: ignore[misc]
        self.mcp = info
        self._input_schema = spec.get("inputSchema") or {"type": "object", "properties": {}}
        self._connection = connection

    def schema(self) -> dict[str, Any]:
        """The server's own input schema, offered to the model under the exposed name."""
        params = json.loads(json.dumps(self._input_schema))
        params.setdefault("type", "object")
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": params}}

    def title(self, args: Any, ctx: ToolContext) -> str:
        return f"{self.mcp.tool} ({self.mcp.server} MCP server)"

    async def execute(self, args: McpArgs, ctx: ToolContext) -> ToolResult:
        arguments = args.model_dump()
        try:
            result = await self._connection.call(self.mcp.tool, arguments)
        except McpError as exc:
            return ToolResult.error(str(exc))
        await self._connection.settled()  # tools it changed during the call: offered next request
        text, is_error = render_result(result)
        return ToolResult.error(text) if is_error else ToolResult(text)


class McpTools:
    """The MCP servers of one session.

    ``specs``: from ``specs_from_acp``; ``env``: the scrubbed environment servers start with;
    ``trusted``: server names the user's config trusts; ``table``: the session's tool table (name →
    tool), updated in place; ``log``: the session's ``EventLog``; ``emit``: its updates; ``wrap``:
    applied to every tool not known to be read-only (the session's checkpoints snapshot around it);
    ``elicit``: asks the user a server's elicitation through the client (``None``: the client takes
    none, and servers are not offered elicitation).
    """

    def __init__(self, specs: list[McpServerSpec], env: dict[str, str], trusted: set[str],
                 table: dict[str, Tool], log: Any, emit: Emit, *, call_timeout: float = 120.0,
                 wrap: Callable[[Tool], Tool] | None = None, problems: list[str] | None = None,
                 max_tools: int = 128, elicit: Elicit | None = None) -> None:
        self.specs = specs
        self.wrap = wrap
        self.problems = list(problems or [])
        """``mcpServers`` entries that cannot run (``specs_from_acp``): told to the user once the
        session may speak."""
        self.assigned: dict[str, tuple[str, str]] = {}
        """Every name given in this session (``{exposed: (server, tool)}``): kept for good."""
        self._told: set[tuple[str, str]] = set()
        self._offered: set[str] = set()
        """The names the MCP part of the table holds now."""
        self.max_tools = max_tools
        """Tools offered in all (built-in ones first): MCP tools past it are left out, and said so."""
        self._left_out: set[str] = set()
        self._shown: dict[str, str] | None = _logged_offer(log)
        """What the last publish offered (exposed name → its schema as sent, encoded; for a loaded
        session, what its last request sent): a change of it after the session's first model request
        is a break of the requests' stable head."""
        of_type = getattr(log, "of_type", None)  # an EventLog (a loaded session's count goes on)
        self.breaks = sum(1 for e in of_type("mcp/tools") if e.data.get("break")) if of_type is not None else 0
        """Tool-list changes that broke the stable head in this session (counted in ``mcp/tools``)."""
        self.trusted = trusted
        self.table = table
        self.log = log
        self.emit = emit
        self.connections = {s.name: McpConnection(s, env, call_timeout=call_timeout, on_tools_changed=self._changed,
                                                  elicit=elicit) for s in specs}
        self.listed: dict[str, list[dict[str, Any]]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def start(self, gate: asyncio.Event | None = None) -> None:
        """Start every server in the background, once ``gate`` is set (the front end sets it when
        its answer to ``session/new`` has left, so nothing is said about the session before)."""
        self._tasks = [asyncio.create_task(self._start_one(s, gate), name=f"mcp-start:{s.name}") for s in self.specs]
        if self.problems:
            self._tasks.append(asyncio.create_task(self._tell_problems(gate), name="mcp-problems"))

    async def _tell_problems(self, gate: asyncio.Event | None) -> None:
        if gate is not None:
            await gate.wait()
        for problem in self.problems:
            await self._say(f"{problem}.")

    async def _say(self, text: str, severity: str = "warning") -> None:
        """Tell the user: a chat line marked as a notice (``_meta.agentServer.notice``), which the
        ACP front end sends as an ACP ``notice`` to a client that takes them. Logged first
        (``mcp/notice {text, severity}``: never projected, the model is not told), so ``session/load``
        shows it again (``mcp_notice_update``)."""
        data = {"text": f"{text.rstrip('.')}.", "severity": severity}
        try:
            self.log.append("mcp/notice", data)
        except LogWriteError:  # the user is told all the same; the log's own failure is the turn's to report
            log.warning("the MCP notice %r could not be logged", data["text"])
        await self.emit(mcp_notice_update(data))

    async def wait_ready(self, seconds: float) -> None:
        """Wait at most ``seconds`` for servers still starting (the first prompt calls this)."""
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            await asyncio.wait(pending, timeout=seconds)

    async def _start_one(self, spec: McpServerSpec, gate: asyncio.Event | None) -> None:
        if gate is not None:
            await gate.wait()
        try:
            tools = await self.connections[spec.name].start()
        except McpError as exc:
            self.log.append("mcp/failed", {"server": spec.name, "error": str(exc)})
            await self._say(f"{exc}. Its tools are not available in this session")
            return
        self.listed[spec.name] = tools
        await self._publish()

    async def _changed(self, server: str, tools: list[dict[str, Any]]) -> None:
        """A server's tool list changed (``notifications/tools/list_changed``, or a restart): offer the new list
        from the next request on (its logged ``request/header`` carries it), log the new map."""
        if server not in self.listed:
            return  # still starting: its start publishes the list it gets
        if tools == self.listed[server]:
            return
        self.listed[server] = tools
        log.info("MCP server %s changed its tools: %s", server, [t.get("name") for t in tools])
        await self._publish()

    async def _publish(self) -> None:
        """Rebuild the MCP part of the tool table from the servers that are up (in spec order);
        names given before are kept (``assigned``); a tool a server lists twice is offered once
        and the user is told."""
        up = [s for s in self.specs if s.name in self.listed]
        by_key: dict[tuple[str, str], dict[str, Any]] = {}
        for s in up:
            for t in self.listed[s.name]:
                key = (s.name, str(t.get("name")))
                if key in by_key:
                    if key not in self._told:
                        self._told.add(key)
                        self.log.append("mcp/failed", {"server": s.name, "error": f"tool {key[1]!r} listed twice"})
                        await self._say(f"MCP server {s.name!r} lists the tool {key[1]!r} twice; the first is offered")
                    continue
                by_key[key] = t
        names = expose_names({s.name: [t for (srv, t) in by_key if srv == s.name] for s in up}, self.assigned)
        self.assigned.update(names)
        room = max(0, self.max_tools - sum(1 for n in self.table if n not in self._offered))  # built-ins first
        if len(names) > room:
            cut = list(names)[room:]
            names = {n: names[n] for n in list(names)[:room]}
            new = [n for n in cut if n not in self._left_out]
            self._left_out.update(new)
            if new:
                self.log.append("mcp/failed", {"server": None, "error": f"tools left out (max_tools {self.max_tools})",
                                               "left_out": new})
                shown = ", ".join(new[:10]) + (f" and {len(new) - 10} more" if len(new) > 10 else "")
                await self._say(f"{len(new)} MCP tool{'s' if len(new) != 1 else ''} left out: the model is offered "
                                f"{self.max_tools} tools at most ([agent] max_tools): {shown}")
        for name in self._offered:  # the previous MCP part (wrapped tools are not McpTool instances)
            self.table.pop(name, None)
        self._offered = set(names)
        kinds: dict[str, str] = {}  # how each is shown (session/load shows it the same way)
        offered: dict[str, McpTool] = {}
        for exposed, (server, tool) in names.items():
            spec = by_key[(server, tool)]
            info = McpInfo(server, tool, dict(spec.get("annotations") or {}), server in self.trusted)
            tool = offered[exposed] = McpTool(exposed, spec, info, self.connections[server])
            if tool.kind != "other":
                kinds[exposed] = tool.kind
            self.table[exposed] = self.wrap(tool) if self.wrap is not None and not info.read_only else tool
        data: dict[str, Any] = {"map": {n: [s, t] for n, (s, t) in names.items()},
                                "servers": [s.name for s in up], "kinds": kinds}
        shown = {n: json.dumps(t.schema(), sort_keys=True) for n, t in offered.items()}
        said = None
        requested = getattr(self.log, "count", lambda kind: 0)("step/start")
        before = self._shown or {}  # a server up only after the first request: its tools are a change too
        if shown != before and requested:
            # the tools offered change after a request was made: the next request cannot extend the
            # previous one (a provider's prefix cache restarts there): counted, logged and said
            self.breaks += 1
            data["break"] = self.breaks
            said = self._break_text(before, shown)
        self._shown = shown
        self.log.append("mcp/tools", data)
        if said is not None:
            await self._say(said, "info")

    def _break_text(self, before: dict[str, str], after: dict[str, str]) -> str:
        """What a break of the stable head by a tool-list change tells the user."""
        added = [n for n in after if n not in before]
        removed = [n for n in before if n not in after]
        changed = [n for n in after if n in before and after[n] != before[n]]
        parts = [f"{len(names)} {what}" for names, what in ((added, "added"), (removed, "removed"),
                                                              (changed, "described anew")) if names]
        return (f"The MCP tools changed ({', '.join(parts)}): the model is offered the new list from its next "
                f"request, whose start no longer repeats the previous request, so a provider's prompt cache "
                f"starts anew there (tool-list change {self.breaks} of this session)")

    async def close(self) -> None:
        """Stop every server (their processes end with them)."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*(c.close() for c in self.connections.values()), return_exceptions=True)


def mcp_notice_update(data: dict[str, Any]) -> dict[str, Any]:
    """The chat line of an ``mcp/notice`` event, as sent live and on ``session/load``."""
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": f"[agent-server] {data.get('text', '')}\n"},
            "_meta": {"agentServer": {"notice": {"severity": data.get("severity") or "warning"}}}}


def _logged_offer(log: Any) -> dict[str, str] | None:
    """The MCP tools the session's last logged request offered (``None``: no such request)."""
    latest = getattr(log, "latest", None)
    header = latest("request/header") if latest is not None else None
    tools = latest("mcp/tools") if latest is not None else None
    if header is None or tools is None:
        return None
    mapped = tools.data.get("map") or {}
    return {t["function"]["name"]: json.dumps(t, sort_keys=True) for t in header.data.get("tools") or []
            if isinstance(t, dict) and t.get("function", {}).get("name") in mapped}
