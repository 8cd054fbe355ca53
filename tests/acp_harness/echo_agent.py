"""Stand-in ACP agent for testing the harnesses (built on the official ACP Python SDK).

Role: a tiny, deterministic agent that speaks ACP v1 over stdio so the client harnesses
(``tests/support/acp_client.py``, ``raw_agent.py``, ``clients/ts-harness``) can be tested
without the real ``agent-server``. Run it as ``python tests/acp_harness/echo_agent.py``.

A prompt is echoed back as two ``agent_message_chunk`` updates (``"echo: "`` and the text),
then ``end_turn``. Prompts starting with a command exercise the client side:

* ``/slow``            – one chunk, then waits for ``session/cancel`` → ``cancelled``
* ``/permission``      – asks ``session/request_permission``; echoes the outcome (or the error)
* ``/read PATH``       – ``fs/read_text_file`` if the client advertised it, else says so
* ``/write PATH TEXT`` – ``fs/write_text_file`` if the client advertised it, else says so
* ``/ext``             – calls the ``_agent_server/apply_workspace_edit`` extension method
* ``/stderr TEXT``     – writes TEXT to stderr
* ``/spawn-child``     – starts a ``sleep 300`` grandchild and echoes its pid (orphan test)
* ``/exit``            – the process dies mid-turn (exit status 3)
* ``/tool``            – one ``tool_call`` + ``tool_call_update`` pair, then ``end_turn``
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import acp
from acp import PROTOCOL_VERSION, RequestError, text_block, update_agent_message_text
from acp.schema import (
    AgentCapabilities,
    Implementation,
    InitializeResponse,
    NewSessionResponse,
    PermissionOption,
    PromptCapabilities,
    PromptResponse,
    ToolCallUpdate,
)


class EchoAgent:
    """ACP agent implementation (duck-typed ``acp.Agent``)."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.client_capabilities: Any = None
        self.cancel_events: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, client_info: Any = None, **kwargs: Any
    ) -> InitializeResponse:
        self.client_capabilities = client_capabilities
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(prompt_capabilities=PromptCapabilities(embedded_context=True)),
            agent_info=Implementation(name="echo-agent", version="0.0.1"),
            auth_methods=[],
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = f"echo-{uuid.uuid4().hex[:12]}"
        self.cancel_events[session_id] = asyncio.Event()
        return NewSessionResponse(session_id=session_id)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        event = self.cancel_events.get(session_id)
        if event is not None:
            event.set()

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id=session_id, update=update_agent_message_text(text))

    def _fs(self, name: str) -> bool:
        fs = getattr(self.client_capabilities, "fs", None)
        return bool(getattr(fs, name, False))

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        if session_id not in self.cancel_events:
            raise RequestError.invalid_params({"sessionId": session_id, "reason": "unknown session"})
        self.cancel_events[session_id].clear()
        text = "".join(getattr(block, "text", "") or "" for block in prompt)
        command, _, rest = text.partition(" ")
        handler = {
            "/slow": self._slow,
            "/permission": self._permission,
            "/read": self._read,
            "/write": self._write,
            "/ext": self._ext,
            "/stderr": self._stderr,
            "/spawn-child": self._spawn_child,
            "/exit": self._exit,
            "/tool": self._tool,
        }.get(command)
        if handler is None:
            await self.say(session_id, "echo: ")
            await self.say(session_id, text)
            return PromptResponse(stop_reason="end_turn")
        return await handler(session_id, rest)

    async def _slow(self, session_id: str, rest: str) -> PromptResponse:
        await self.say(session_id, "working")
        try:
            await asyncio.wait_for(self.cancel_events[session_id].wait(), timeout=30)
        except TimeoutError:
            return PromptResponse(stop_reason="end_turn")
        return PromptResponse(stop_reason="cancelled")

    async def _permission(self, session_id: str, rest: str) -> PromptResponse:
        options = [
            PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
            PermissionOption(option_id="reject_once", name="Reject", kind="reject_once"),
        ]
        tool_call = ToolCallUpdate(tool_call_id="call_1", title="Run `true`", kind="execute", status="pending")
        try:
            response = await self.conn.request_permission(session_id=session_id, tool_call=tool_call, options=options)
            outcome = response.outcome.model_dump(by_alias=True, exclude_none=True)
            await self.say(session_id, "permission: " + json.dumps(outcome, sort_keys=True))
        except RequestError as exc:
            await self.say(session_id, f"permission error: {exc.code}")
        return PromptResponse(stop_reason="end_turn")

    async def _read(self, session_id: str, rest: str) -> PromptResponse:
        if not self._fs("read_text_file"):
            await self.say(session_id, "no fs.readTextFile")
        else:
            response = await self.conn.read_text_file(session_id=session_id, path=rest.strip())
            await self.say(session_id, "read: " + response.content)
        return PromptResponse(stop_reason="end_turn")

    async def _write(self, session_id: str, rest: str) -> PromptResponse:
        path, _, content = rest.partition(" ")
        if not self._fs("write_text_file"):
            await self.say(session_id, "no fs.writeTextFile")
        else:
            await self.conn.write_text_file(session_id=session_id, path=path, content=content)
            await self.say(session_id, "written")
        return PromptResponse(stop_reason="end_turn")

    async def _ext(self, session_id: str, rest: str) -> PromptResponse:
        params = {"sessionId": session_id, "toolCallId": "call_1", "label": "Edit", "edit": {"documentChanges": []}}
        try:
            result = await self.conn.ext_method("agent_server/apply_workspace_edit", params)
            await self.say(session_id, "ext: " + json.dumps(result, sort_keys=True))
        except RequestError as exc:
            await self.say(session_id, f"ext error: {exc.code}")
        return PromptResponse(stop_reason="end_turn")

    async def _stderr(self, session_id: str, rest: str) -> PromptResponse:
        print(rest, file=sys.stderr, flush=True)
        await self.say(session_id, "logged")
        return PromptResponse(stop_reason="end_turn")

    async def _spawn_child(self, session_id: str, rest: str) -> PromptResponse:
        child = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        await self.say(session_id, f"child {child.pid}")
        return PromptResponse(stop_reason="end_turn")

    async def _exit(self, session_id: str, rest: str) -> PromptResponse:
        await self.say(session_id, "dying")
        print("echo-agent: exiting on request", file=sys.stderr, flush=True)
        os._exit(3)

    async def _tool(self, session_id: str, rest: str) -> PromptResponse:
        await self.conn.session_update(
            session_id=session_id,
            update=acp.start_tool_call("call_1", "Read README.md", kind="read", status="pending"),
        )
        await self.conn.session_update(
            session_id=session_id,
            update=acp.update_tool_call(
                "call_1", status="completed", content=[acp.tool_content(text_block("contents"))]
            ),
        )
        await self.say(session_id, "done")
        return PromptResponse(stop_reason="end_turn")


async def main() -> None:
    """Serve one ACP connection on stdio."""
    print(f"echo-agent: started pid={os.getpid()}", file=sys.stderr, flush=True)
    await acp.run_agent(EchoAgent())


if __name__ == "__main__":
    asyncio.run(main())
