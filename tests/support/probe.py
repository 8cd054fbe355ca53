"""The sandbox probe held back, and ACP handlers called as the connection calls them (tests that
check what waits for the probe: ``session/new``, ``session/load``, their first turns)."""

from __future__ import annotations

import asyncio

import pytest

from agent_server.policy.sandbox import confiner as sandbox
from agent_server.server.acp.server import AcpServer
from agent_server.server.rpc.jsonrpc import RequestContext

from .timeouts import HANG


@pytest.fixture
def held_probe(monkeypatch):
    """``(gate, started, forget)``: probes of the test start their child process only once the
    ``asyncio.Event`` ``gate`` is set (nothing is probed yet in this process); ``started`` lists
    their arguments; ``forget()`` drops what was probed, as a new process would."""
    gate = asyncio.Event()
    started: list[tuple] = []
    spawn = asyncio.create_subprocess_exec

    async def held(*args, **kwargs):
        if "--probe" in args:
            started.append(args)
            await gate.wait()
        return await spawn(*args, **kwargs)

    def forget():
        monkeypatch.setattr(sandbox, "_PROBED", {})
        monkeypatch.setattr(sandbox, "_PROBING", {}, raising=False)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", held)
    forget()
    return gate, started, forget


async def answered(server: AcpServer, method: str, params: dict, request_id: int) -> dict:
    """Call the handler as the connection does: the result, then the after-response callbacks."""
    if not server.initialized:  # as the client's initialize request would (nothing is served before it)
        server.remember_initialize({"protocolVersion": 1, "clientCapabilities": {}})
    ctx = RequestContext(request_id, method)
    result = await asyncio.wait_for(server.request_handlers()[method](params, ctx), timeout=HANG)
    for callback in ctx._after:
        await callback()
    return result
