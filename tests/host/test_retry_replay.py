"""A load of a running session right after a failed try: its retry notice is shown once.

The notice is emitted right after its ``assistant/attempt`` event is logged; a load whose replay
took the gate before the notice's send did sees both — the event in the log and the notice waiting
at the gate — and must leave the notice out of the replay (it follows, live), as it does a waiting
``tool_call``. The gate and ``continuity.replay`` are the real ones; the host around them is the
least they read.
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from agent_server.agent.step import retry_notice
from agent_server.host import continuity
from agent_server.host.gate import UpdateGate
from agent_server.session import EventLog

NOTICE = "\n\n[agent-server] The model's answer broke off (the stream closed); retrying now (attempt 2 of 4)…\n\n"


def _session(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    log.append("turn/start", {"turn": 1})
    log.append("user", {"turn": 1, "content": "go", "blocks": [{"type": "text", "text": "go"}]})
    log.append("step/start", {"turn": 1, "step": 1})
    return SimpleNamespace(id="s1", log=log, partial=None)


async def test_a_retry_notice_waiting_at_the_gate_is_not_replayed_twice(tmp_path):
    sent: list[dict] = []
    release = asyncio.Event()

    async def send(update):
        if update.get("slow") and not release.is_set():
            await release.wait()  # a slow client: the gate is busy when the load comes
        sent.append(update)

    gate = UpdateGate(send)
    session = _session(tmp_path)
    host = SimpleNamespace(gates={"s1": gate}, frontend=None)
    busy = asyncio.ensure_future(gate.emit({"sessionUpdate": "usage_update", "used": 1, "size": 9, "slow": True}))
    await asyncio.sleep(0.01)
    replay = asyncio.ensure_future(continuity.replay(host, session, str(tmp_path)))  # waits for the gate
    await asyncio.sleep(0.01)
    event = session.log.append("assistant/attempt", {
        "turn": 1, "step": 1, "attempt": 1, "status": None, "text": "partial ",
        "error": {"code": "STREAM_CLOSED", "message": "closed", "retryable": True},
        "retry": {"delay": 0.0, "notice": NOTICE}})
    notice = retry_notice(event)
    live = asyncio.ensure_future(gate.emit(notice))  # as stream_step does, right after the append
    await asyncio.sleep(0.01)
    release.set()
    await asyncio.gather(busy, replay, live)
    texts = [u["content"]["text"] for u in sent if "content" in u]
    assert texts == ["go", "partial ", NOTICE]  # the replay (prompt, dead text), then the notice, once
    assert sent[-1] is notice


def test_the_notice_is_made_from_the_event_alone(tmp_path):
    session = _session(tmp_path)
    failed = session.log.append("assistant/attempt", {
        "turn": 1, "step": 1, "attempt": 2, "status": 429,
        "error": {"code": "RATE_LIMIT", "message": "HTTP 429", "retryable": True},
        "retry": {"delay": 2.71828, "notice": NOTICE}})
    last = session.log.append("assistant/attempt", {
        "turn": 1, "step": 1, "attempt": 3, "status": None,
        "error": {"code": "STREAM_CLOSED", "message": "closed", "retryable": True}, "text": "x"})
    assert retry_notice(failed) == {
        "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": NOTICE},
        "_meta": {"agentServer": {"retry": {"seq": failed.seq, "attempt": 2, "code": "RATE_LIMIT",
                                            "delaySeconds": 2.718}}}}
    assert retry_notice(last) is None  # no retry followed it
