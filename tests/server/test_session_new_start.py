"""``session/new`` does not wait for the sandbox probe; the first turn does (issue 14).

In process: the real ``AcpServer`` (no connection: its updates are dropped, files go to the disk),
the real offline endpoint, and the real probe held back by a gate the test opens.
"""

from __future__ import annotations

import asyncio
import json
import os

from agent_server.config.load import load_config
from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.server.acp.server import AcpServer
from agent_server.session import SessionStore, read_events
from support.probe import answered, held_probe  # noqa: F401 (a fixture)


async def test_session_new_answers_while_the_probe_runs_and_the_first_turn_waits_for_its_result(
        held_probe, tmp_path):
    gate, started, _ = held_probe
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with OfflineEndpoint() as endpoint:
        endpoint.push(tool_call_stream([("c1", "bash", json.dumps({"command": "echo hi"}))]))
        endpoint.push(text_stream("done"))
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                                   "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k"})
        store = SessionStore(tmp_path / "state")
        server = AcpServer(config, store)
        try:
            result = await answered(server, "session/new", {"cwd": str(workspace), "mcpServers": []}, 1)
            session_id = result["sessionId"]
            # answered with the probe still held: its header is on disk, its sandbox status is not
            assert started and not gate.is_set()
            logged = read_events(store.log_path(session_id))
            assert logged[0].type == "session/header" and logged[0].data["cwd"] == str(workspace)
            assert "sandbox/status" not in [e.type for e in logged]
            # the warm-up already made the endpoint's client, before any prompt
            assert list(server.host.pool._clients) == [(endpoint.base_url, "k")]

            prompt = asyncio.ensure_future(answered(server, "session/prompt", {
                "sessionId": session_id, "prompt": [{"type": "text", "text": "say hi"}]}, 2))
            for _ in range(20):
                await asyncio.sleep(0)
            assert not prompt.done() and endpoint.requests == []  # held: nothing reached the model
            gate.set()
            assert (await prompt)["stopReason"] == "end_turn"
        finally:
            await server.aclose()
    kinds = [e.type for e in read_events(store.log_path(session_id))]
    # the probed status is logged before the turn renders its first request or runs the shell
    assert kinds.index("sandbox/status") < kinds.index("turn/start") < kinds.index("tool/call")
    system = endpoint.requests[0].json()["messages"][0]["content"]
    assert "Shell commands run under an OS sandbox" in system or "Shell commands are not sandboxed" in system


async def test_the_warm_up_starts_the_loops_worker_thread_before_the_first_file_read(held_probe, tmp_path):
    """The file tools read and write in the loop's default executor; made by the first call, its
    thread start and the import of ``concurrent.futures.thread`` fell inside a warm session's
    first turn (1–3 ms between the read's policy decision and its result). (The probe stays held:
    no child process outlives the test.)"""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with OfflineEndpoint() as endpoint:
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                                   "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k"})
        server = AcpServer(config, SessionStore(tmp_path / "state"))
        loop = asyncio.get_running_loop()
        try:
            assert loop._default_executor is None  # a fresh loop: nothing made it yet
            await answered(server, "session/new", {"cwd": str(workspace), "mcpServers": []}, 1)
            executor = loop._default_executor  # what asyncio.to_thread submits to
            assert executor is not None and len(executor._threads) == 1
        finally:
            await server.aclose()
