"""``session/load`` does not wait for the sandbox probe; the loaded session's first turn does
(issue 14: the load's response waited for a probe subprocess before the log was even read).

In process: the real ``AcpServer`` (no connection: its updates are dropped, files go to the disk),
the real offline endpoint, and the real probe held back by a gate the test opens.
"""

from __future__ import annotations

import asyncio
import os

from agent_server.config.load import load_config
from agent_server.offline import OfflineEndpoint, text_stream
from agent_server.server.acp.server import AcpServer
from agent_server.session import SessionStore, read_events
from support.probe import answered, held_probe  # noqa: F401 (a fixture)


async def test_session_load_answers_while_the_probe_runs_and_the_first_turn_waits_for_its_result(
        held_probe, tmp_path):
    gate, started, forget = held_probe
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with OfflineEndpoint() as endpoint:
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                                   "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k"})
        store = SessionStore(tmp_path / "state")
        first = AcpServer(config, store)
        try:
            session_id = (await answered(first, "session/new", {"cwd": str(workspace), "mcpServers": []}, 1))["sessionId"]
        finally:
            gate.set()
            await first.aclose()
        gate.clear()
        forget()  # a new process: nothing probed yet
        before = read_events(store.log_path(session_id))
        endpoint.push(text_stream("done"))  # no shell call: its launcher would outlive the test in this process
        server = AcpServer(config, store)
        try:
            started.clear()
            await answered(server, "session/load", {"sessionId": session_id, "cwd": str(workspace), "mcpServers": []}, 2)
            assert started and not gate.is_set()  # answered with the probe still held
            assert read_events(store.log_path(session_id)) == before  # nothing appended by the load
            prompt = asyncio.ensure_future(answered(server, "session/prompt", {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "say hi"}]}, 3))
            for _ in range(20):
                await asyncio.sleep(0)
            assert not prompt.done() and endpoint.requests == []  # held: nothing reached the model
            gate.set()
            assert (await prompt)["stopReason"] == "end_turn"
        finally:
            gate.set()
            await server.aclose()
    kinds = [e.type for e in read_events(store.log_path(session_id))][len(before):]
    # the probed status is known (logged when it changed) before the turn renders its first request
    assert "sandbox/status" not in kinds or kinds.index("sandbox/status") < kinds.index("turn/start")
    system = endpoint.requests[0].json()["messages"][0]["content"]
    assert "Shell commands run under an OS sandbox" in system or "Shell commands are not sandboxed" in system
