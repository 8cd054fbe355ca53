"""The update gate: a replay goes out whole, then the live updates, nothing doubled or lost."""

import asyncio

from agent_server.host.gate import UpdateGate, without_waiting


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
