"""The update gate: a replay goes out whole, then the live updates, nothing doubled or lost."""

import asyncio

from agent_server.host.gate import UpdateGate, without_waiting
from support.timeouts import HANG


def chunk(text):
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


async def test_live_updates_wait_for_the_replay_and_the_waiting_delta_is_not_replayed():
    sent = []
    release = asyncio.Event()

    async def send(update):
        if update["content"].get("text") == "Hel" and not release.is_set():
            await release.wait()  # a slow client while a live delta is written
        sent.append(update)

    gate = UpdateGate(send)
    streamed = ["Hel"]
    seen = {}

    def build(waiting):
        seen["waiting"] = waiting
        text = without_waiting("".join(streamed), waiting, "agent_message_chunk")
        return [{"sessionUpdate": "user_message_chunk", "content": {}, "replay": True},
                {**chunk(text), "replay": True}]

    first = asyncio.ensure_future(gate.emit(chunk("Hel")))
    await asyncio.sleep(0.01)
    replay = asyncio.ensure_future(gate.replay(build))  # a load arrives while "Hel" is being sent
    await asyncio.sleep(0.01)
    streamed.append("lo")  # the stream goes on: added to the partial text, then emitted
    live = asyncio.ensure_future(gate.emit(chunk("lo")))
    await asyncio.sleep(0.01)
    assert sent == []
    release.set()
    await asyncio.gather(first, replay, live)
    assert [u.get("replay", False) for u in sent] == [False, True, True, False]
    assert [u["content"]["text"] for u in seen["waiting"]] == ["lo"]
    assert sent[2]["content"]["text"] + sent[3]["content"]["text"] == "Hello"  # replayed part, then the live rest


def test_without_waiting_cuts_only_a_matching_suffix():
    assert without_waiting("abcdef", [chunk("ef")], "agent_message_chunk") == "abcd"
    assert without_waiting("abcdef", [chunk("xx")], "agent_message_chunk") == "abcdef"
    assert without_waiting("abcdef", [chunk("ef")], "agent_thought_chunk") == "abcdef"


# -- coalescing (issue 14): no timing goals here; a gate with an hour-long interval never sends
# held text by its clock, so what leaves when is decided by the rules alone ------------------------

HOUR = 3600.0


def thought(text):
    return {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}}


def tool_call(call_id):
    return {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": "Run `ls`", "kind": "execute",
            "status": "pending"}


def recorder():
    sent = []

    async def send(update):
        sent.append(update)
    return sent, send


def texts(sent):
    return [(u["sessionUpdate"], u["content"]["text"]) if "content" in u else (u["sessionUpdate"], u.get("toolCallId"))
            for u in sent]


async def test_first_chunk_is_sent_before_emit_returns():
    sent, send = recorder()
    gate = UpdateGate(send, interval=HOUR)
    await gate.emit(chunk("H"))
    assert texts(sent) == [("agent_message_chunk", "H")]


async def test_chunks_inside_the_interval_are_held_and_sent_joined_in_order():
    sent, send = recorder()
    gate = UpdateGate(send, interval=HOUR)
    answer = "Hello, world — ✓ 日本\r\n"
    for ch in answer:
        await gate.emit(chunk(ch))
    assert texts(sent) == [("agent_message_chunk", "H")]  # the rest is held, not lost
    await gate.flush()
    assert texts(sent) == [("agent_message_chunk", "H"), ("agent_message_chunk", answer[1:])]
    assert "".join(u["content"]["text"] for u in sent) == answer


async def test_tool_update_sends_the_held_text_first_and_is_not_held_itself():
    sent, send = recorder()
    gate = UpdateGate(send, interval=HOUR)
    for ch in "abc":
        await gate.emit(chunk(ch))
    await gate.emit(tool_call("c1"))
    assert texts(sent) == [("agent_message_chunk", "a"), ("agent_message_chunk", "bc"), ("tool_call", "c1")]
    terminal = {"sessionUpdate": "tool_call_update", "toolCallId": "c1",
                "_meta": {"terminal_output_delta": {"terminal_id": "c1", "data": "out\n"}}}
    await gate.emit(chunk("d"))  # the first chunk after another update leaves at once
    await gate.emit(chunk("e"))
    await gate.emit(terminal)
    assert texts(sent)[3:] == [("agent_message_chunk", "d"), ("agent_message_chunk", "e"), ("tool_call_update", "c1")]
    assert sent[-1] is terminal


async def test_a_change_of_kind_starts_a_new_notification_and_keeps_the_order():
    sent, send = recorder()
    gate = UpdateGate(send, interval=HOUR)
    for update in (thought("t1"), thought("t2"), thought("t3"), chunk("m1"), chunk("m2"), thought("t4")):
        await gate.emit(update)
    await gate.flush()
    assert texts(sent) == [("agent_thought_chunk", "t1"), ("agent_thought_chunk", "t2t3"),
                           ("agent_message_chunk", "m1m2"), ("agent_thought_chunk", "t4")]


async def test_a_chunk_with_more_than_text_is_sent_as_it_is_after_the_held_text():
    sent, send = recorder()
    gate = UpdateGate(send, interval=HOUR)
    await gate.emit(chunk("a"))
    await gate.emit(chunk("b"))
    annotated = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "c"}, "_meta": {"x": 1}}
    await gate.emit(annotated)
    assert texts(sent) == [("agent_message_chunk", "a"), ("agent_message_chunk", "b"), ("agent_message_chunk", "c")]
    assert sent[-1] is annotated


async def test_flush_waits_for_every_earlier_send():
    release = asyncio.Event()
    sent = []

    async def send(update):
        if update.get("sessionUpdate") == "tool_call":
            await release.wait()  # a slow client
        sent.append(update)

    gate = UpdateGate(send, interval=HOUR)
    first = asyncio.ensure_future(gate.emit(tool_call("c1")))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(gate.emit(chunk("a")))  # taken for sending behind the tool call
    await asyncio.sleep(0)
    flushed = asyncio.ensure_future(gate.flush())
    await asyncio.sleep(0.01)
    assert not flushed.done() and sent == []
    release.set()
    await flushed
    assert texts(sent) == [("tool_call", "c1"), ("agent_message_chunk", "a")]
    await asyncio.gather(first, second)


async def test_held_text_leaves_by_the_clock_without_another_update():
    sent, send = recorder()
    gate = UpdateGate(send, interval=0.001)
    for ch in "abcdef":
        await gate.emit(chunk(ch))
    await asyncio.wait_for(_until(lambda: "".join(u["content"]["text"] for u in sent) == "abcdef"), HANG)


async def _until(predicate):
    while not predicate():
        await asyncio.sleep(0.001)


async def test_cancelled_emitter_loses_nothing_it_took_with_it():
    release = asyncio.Event()
    sent = []

    async def send(update):
        if update.get("toolCallId") == "slow":
            await release.wait()
        sent.append(update)

    gate = UpdateGate(send, interval=HOUR)
    blocker = asyncio.ensure_future(gate.emit(tool_call("slow")))
    await asyncio.sleep(0)
    first = asyncio.ensure_future(gate.emit(chunk("a")))  # sent at once: waits behind the slow one
    await asyncio.sleep(0)
    await gate.emit(chunk("b"))  # held
    cancelled = asyncio.ensure_future(gate.emit(tool_call("c2")))  # takes "b" with it, then waits
    await asyncio.sleep(0.01)
    cancelled.cancel()  # the turn is cancelled while its update waits for the client
    release.set()
    await asyncio.gather(blocker, first)
    await gate.flush()
    assert texts(sent) == [("tool_call", "slow"), ("agent_message_chunk", "a"), ("agent_message_chunk", "b"),
                           ("tool_call", "c2")]


async def test_replay_leaves_out_held_text_which_follows_it():
    sent, send = recorder()
    gate = UpdateGate(send, interval=HOUR)
    streamed = []
    for ch in "Hello":
        streamed.append(ch)
        await gate.emit(chunk(ch))
    seen = {}

    def build(waiting):
        seen["waiting"] = texts(waiting)
        return [{**chunk(without_waiting("".join(streamed), waiting, "agent_message_chunk")), "replay": True}]

    assert await gate.replay(build) == 1
    await gate.flush()
    assert seen["waiting"] == [("agent_message_chunk", "ello")]
    assert [(u.get("replay", False), u["content"]["text"]) for u in sent] == [(False, "H"), (True, "H"), (False, "ello")]


async def test_after_a_flush_the_next_chunk_leaves_at_once():
    sent, send = recorder()
    gate = UpdateGate(send, interval=HOUR)
    for ch in "ab":
        await gate.emit(chunk(ch))
    await gate.flush()  # the end of a step
    await gate.emit(chunk("c"))  # the next step's first chunk
    assert texts(sent) == [("agent_message_chunk", "a"), ("agent_message_chunk", "b"), ("agent_message_chunk", "c")]
    await gate.emit(chunk("d"))
    assert len(sent) == 3  # and the one after it is held again


async def test_a_replay_in_batches_sends_what_one_by_one_sends_then_the_live_updates(monkeypatch):
    """A replay through ``send_many`` (one write per batch, issue 14: one system call per replayed
    update) delivers the same updates in the same order as ``send`` one by one, in batches of at
    most ``REPLAY_BATCH``, a batch cut where the replay gives the loop back; live updates follow it."""
    from agent_server.host import gate as gate_module
    history = [{"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": str(i)}} for i in range(150)]
    one_by_one, send = recorder()
    assert await UpdateGate(send).replay(lambda waiting: iter(history)) == 150

    clock = iter(range(10**6))
    monkeypatch.setattr(gate_module.time, "monotonic", lambda: next(clock) * 0.001)  # 1 ms per update
    batched, batches, live = [], [], []

    async def send_many(updates):
        batches.append(len(updates))
        batched.extend(updates)

    async def send_live(update):
        live.append((len(batched), update))

    gate = UpdateGate(send_live, send_many=send_many)
    replay = asyncio.ensure_future(gate.replay(lambda waiting: iter(history)))
    await asyncio.sleep(0)
    emitted = asyncio.ensure_future(gate.emit({"sessionUpdate": "plan", "entries": []}))
    assert await replay == 150
    await emitted
    assert batched == one_by_one == history
    assert max(batches) <= gate_module.REPLAY_BATCH and len(batches) > 150 // gate_module.REPLAY_BATCH
    assert live == [(150, {"sessionUpdate": "plan", "entries": []})]
