"""``tools.live.LiveOutput``: the live stream of a command's output for a terminal client —
coalesced, capped, redacted like the final result, nothing after the end. No timing is asserted:
pieces fed without yielding to the event loop must leave together, whatever the clock says."""

from __future__ import annotations

import asyncio

from agent_server.tools.live import LiveOutput, capped_notice

SECRET = "sk-live-0123456789abcdef"
KEY = "terminal_output_delta"


class Sink:
    def __init__(self) -> None:
        self.updates: list[dict] = []

    async def __call__(self, update: dict) -> None:
        self.updates.append(update)

    @property
    def data(self) -> list[str]:
        return [u["_meta"][KEY]["data"] for u in self.updates]


async def settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def stream(sink: Sink, **kw) -> LiveOutput:
    return LiveOutput(sink, "tc-7", KEY, kw.pop("secrets", (SECRET, "short")), **kw)


async def test_the_first_output_leaves_at_once_in_the_conventions_shape():
    sink = Sink()
    live = stream(sink)
    live.feed(b"first\n")
    await settle()
    assert sink.updates == [{"sessionUpdate": "tool_call_update", "toolCallId": "tc-7",
                             "_meta": {KEY: {"terminal_id": "tc-7", "data": "first\n"}}}]


async def test_pieces_fed_before_the_loop_runs_again_leave_as_one_update_in_order():
    sink = Sink()
    live = stream(sink)
    for i in range(1000):
        live.feed(f"{i},".encode())
    await live.close()
    assert len(sink.updates) == 1 and sink.data[0] == "".join(f"{i}," for i in range(1000))


async def test_a_secret_split_across_two_pieces_is_redacted_and_its_start_waits():
    sink = Sink()
    live = stream(sink)
    live.feed(b"token: " + SECRET[:9].encode())
    await settle()
    assert sink.data == ["token: "]  # "sk-live-0" could be the key's start: it waits
    live.feed(SECRET[9:].encode() + b" end\n")
    await live.close()
    assert "".join(sink.data) == "token: <redacted> end\n"


async def test_an_end_that_is_not_a_secret_after_all_still_leaves_at_the_close():
    sink = Sink()
    live = stream(sink)
    live.feed(b"sk-live-")
    await settle()
    assert sink.data == []
    await live.close()
    assert sink.data == ["sk-live-"]


async def test_a_utf8_character_split_across_reads_arrives_whole():
    sink = Sink()
    live = stream(sink, secrets=())
    data = "naïve ✓\n".encode()
    live.feed(data[:3])
    await settle()
    live.feed(data[3:])
    await live.close()
    assert "".join(sink.data) == "naïve ✓\n"


async def test_output_past_the_limit_is_dropped_once_said_and_nothing_follows():
    sink = Sink()
    live = stream(sink, limit=1000, secrets=())
    for _ in range(50):
        live.feed(b"y\n" * 100)
        await settle()
    await live.close()
    joined = "".join(sink.data)
    assert joined == "y\n" * 500 + capped_notice(1000) and live.capped
    assert joined.count("live output stopped") == 1


async def test_nothing_is_sent_after_close_or_abort():
    sink = Sink()
    live = stream(sink)
    live.feed(b"a\n")
    await live.close()
    live.feed(b"late\n")
    await settle()
    assert sink.data == ["a\n"]
    other = Sink()
    aborted = stream(other, interval=10.0)
    aborted.feed(b"one\n")
    await settle()
    aborted.feed(b"two\n")  # waits for the interval
    aborted.abort()
    await settle()
    assert other.data == ["one\n"]
