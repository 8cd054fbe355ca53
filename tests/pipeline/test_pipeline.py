"""The tool pipeline: logging before running, ordered commits, barriers, pool, cancel, guards."""

import asyncio
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from agent_server.policy import Denial
from agent_server.session import EventLog
from agent_server.tools.base import Tool, ToolArgs, ToolContext, ToolResult
from agent_server.tools import pipeline
from agent_server.tools.pipeline import POOL_LIMIT, ToolRunner
from support.timeouts import until


class SleepArgs(ToolArgs):
    label: str
    seconds: float = 0.0
    size: int = 0


class Probe:
    """Shared record of what the test tools did, in order."""

    def __init__(self):
        self.events = []
        self.running = 0
        self.peak = 0
        self.release = {}

    def gate(self, label):
        return self.release.setdefault(label, asyncio.Event())


class SleepTool(Tool):
    name = "nap"
    description = "Sleeps, then reports."
    Args = SleepArgs
    kind = "read"
    concurrency_safe = True
    default_timeout = 30.0

    def __init__(self, probe, log=None):
        self.probe = probe
        self.log = log

    def title(self, args, ctx):
        return f"Nap {args.label}"

    async def execute(self, args, ctx):
        p = self.probe
        if self.log is not None:  # invariant 1: our tool/call is on disk before we run
            assert any(e.type == "tool/call" and args.label in e.data["arguments"] for e in self.log.events)
        p.events.append(("start", args.label))
        p.running += 1
        p.peak = max(p.peak, p.running)
        try:
            if args.seconds < 0:
                await p.gate(args.label).wait()
            else:
                await asyncio.sleep(args.seconds)
        finally:
            p.running -= 1
        p.events.append(("end", args.label))
        return ToolResult(("x" * args.size) if args.size else f"slept {args.label}")


class BarrierTool(SleepTool):
    name = "chore"
    kind = "execute"
    concurrency_safe = False


@dataclass
class Call:
    id: str
    name: str
    arguments: str


def call(name, label, **kw):
    return Call(f"call_{label}", name, json.dumps({"label": label, **kw}))


@pytest.fixture
def setup(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {})
    probe = Probe()
    updates = []

    async def emit(update):
        updates.append(update)

    tools = {"nap": SleepTool(probe, log), "chore": BarrierTool(probe, log)}
    runner = ToolRunner(log, ToolContext.on_disk(tmp_path, session_dir=log.path.parent), emit, tools)
    return log, probe, updates, runner


def results(log):
    return [e.data for e in log.events if e.type == "tool/result"]


def final_updates(updates):
    return [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call_update"
            and u["status"] in ("completed", "failed")]


async def test_slow_first_safe_call_still_commits_before_the_fast_second(setup):
    log, probe, updates, runner = setup
    await runner.run_batch(1, [call("nap", "slow", seconds=0.3), call("nap", "fast", seconds=0.0)])
    assert probe.events[:2] == [("start", "slow"), ("start", "fast")]  # in parallel
    assert probe.events.index(("end", "fast")) < probe.events.index(("end", "slow"))
    assert [r["call_id"] for r in results(log)] == ["call_slow", "call_fast"]
    announced = [u["toolCallId"] for u in updates if u["sessionUpdate"] == "tool_call"]
    assert final_updates(updates) == announced
    # every tool/call precedes every tool/result, and ids are unique in the session
    types = [e.type for e in log.events if e.type.startswith("tool/")]
    assert types == ["tool/call", "tool/call", "tool/result", "tool/result"]
    assert len(set(announced)) == 2


async def test_an_unsafe_call_is_a_barrier(setup):
    log, probe, updates, runner = setup
    await runner.run_batch(1, [call("nap", "a", seconds=0.05), call("chore", "b"), call("nap", "c")])
    assert probe.events == [("start", "a"), ("end", "a"), ("start", "b"), ("end", "b"), ("start", "c"), ("end", "c")]
    assert [r["call_id"] for r in results(log)] == ["call_a", "call_b", "call_c"]


async def test_safe_calls_run_at_most_four_at_once(setup):
    log, probe, updates, runner = setup
    await runner.run_batch(1, [call("nap", str(i), seconds=0.05) for i in range(7)])
    assert probe.peak == POOL_LIMIT == 4
    assert [r["call_id"] for r in results(log)] == [f"call_{i}" for i in range(7)]


async def test_cancel_mid_parallel_batch_gives_every_call_exactly_one_result(setup):
    log, probe, updates, runner = setup
    calls = [call("nap", "done"), call("nap", "running", seconds=-1), call("chore", "later")]
    task = asyncio.ensure_future(runner.run_batch(1, calls))
    await until(lambda: ("start", "running") in probe.events and results(log), "the running call and a result")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    got = results(log)
    assert [r["call_id"] for r in got] == ["call_done", "call_running", "call_later"]
    assert [r["status"] for r in got] == ["completed", "failed", "failed"]
    assert got[1]["reason"] == "interrupted"
    assert got[2]["reason"] == "aborted" and got[2]["content"].startswith("ABORTED_BEFORE_DISPATCH")
    assert ("start", "later") not in probe.events


async def test_invalid_arguments_are_a_result_the_model_sees_and_nothing_runs(setup):
    log, probe, updates, runner = setup
    await runner.run_batch(1, [Call("c1", "nap", '{"label": 5}'), Call("c2", "nap", "{not json"),
                               Call("c3", "nosuch", "{}")])
    got = results(log)
    assert [r["status"] for r in got] == ["failed"] * 3
    assert "label" in got[0]["content"]
    assert "no tool named 'nosuch'" in got[2]["content"]
    assert probe.events == []


async def test_guard_denial_is_the_result_and_a_guard_cannot_rewrite_arguments(setup):
    log, probe, updates, runner = setup
    seen = []

    async def guard(prepared):
        seen.append(prepared)
        with pytest.raises(Exception):
            prepared.raw_arguments = "{}"  # frozen
        if prepared.args.label == "no":
            return Denial("not today")
        return None

    runner.guards = [guard]
    await runner.run_batch(1, [call("nap", "no"), call("nap", "yes")])
    got = results(log)
    assert got[0]["content"] == "not today" and got[0]["reason"] == "denied"
    assert got[1]["status"] == "completed"
    assert probe.events == [("start", "yes"), ("end", "yes")]


async def test_timeout_is_enforced_by_the_pipeline_backstop(setup, monkeypatch):
    log, probe, updates, runner = setup
    monkeypatch.setattr("agent_server.tools.pipeline.TIMEOUT_GRACE", 0.0)
    monkeypatch.setattr(SleepTool, "default_timeout", 0.1)
    await runner.run_batch(1, [call("nap", "stuck", seconds=-1)])
    (got,) = results(log)
    assert got["status"] == "failed" and "timed out" in got["content"]
    assert probe.running == 0


async def test_oversized_result_is_trimmed_with_a_notice_and_spilled_in_full(setup):
    log, probe, updates, runner = setup
    await runner.run_batch(1, [call("nap", "mid", size=20_000), call("nap", "huge", size=60_000)])
    mid, huge = results(log)
    assert len(mid["content"]) < 8192 + 400 and mid["cut_chars"] > 0
    assert "cut" in mid["content"] and "spill" not in mid
    spilled = huge["spill"]
    assert spilled in huge["content"]
    with open(spilled) as f:
        assert f.read() == "x" * 60_000

    assert "(60,000 bytes) is saved in" in huge["content"]  # the spill notice counts bytes


async def test_a_result_the_sessions_spill_budget_has_no_room_for_is_trimmed_but_not_spilled(setup):
    log, probe, updates, runner = setup
    runner.context.max_session_spill_bytes = 100_000
    await runner.run_batch(1, [call("nap", "first", size=60_000), call("nap", "second", size=60_000)])
    first, second = results(log)
    assert "spill" in first and "spill" not in second and second["cut_chars"] > 0
    assert "narrow the request" in second["content"]
    assert [p.stat().st_size for p in (log.path.parent / "spill").iterdir()] == [60_000]


async def test_small_context_window_bounds_every_result_further(setup):
    log, probe, updates, runner = setup
    runner.result_budget = 3_000
    await runner.run_batch(1, [call("nap", "big", size=20_000)])
    (got,) = results(log)
    assert len(got["content"]) <= 3_000 + 400 and got["cut_chars"] > 15_000


# -- issue 32 §7: 10,000 tool calls in one model answer took 658 s (and ``session/list`` 7.8 s
# meanwhile): per call, the pipeline walked the turn's log (the repeat reminder) and the batch (its
# grouping and the parallel group's end). Work per call is now bounded; it is counted here (events
# read, safety checks), never timed.


class CountingEvents(Sequence):
    """The log's events, counting every event handed out."""

    def __init__(self, events: Sequence, counter: list[int]) -> None:
        self.inner, self.counter = events, counter

    def __len__(self) -> int:
        return len(self.inner)

    def __getitem__(self, index):
        item = self.inner[index]
        self.counter[0] += len(item) if isinstance(index, slice) else 1
        return item

    def __iter__(self) -> Iterator:
        for event in self.inner:
            self.counter[0] += 1
            yield event

    def __reversed__(self) -> Iterator:
        for event in reversed(self.inner):
            self.counter[0] += 1
            yield event


class CountingLog:
    def __init__(self, log: EventLog) -> None:
        self.log, self.read = log, [0]

    @property
    def events(self) -> CountingEvents:
        return CountingEvents(self.log.events, self.read)

    def __getattr__(self, name):
        return getattr(self.log, name)


async def work_of_a_batch(tmp_path, n: int, monkeypatch) -> tuple[int, int]:
    """(events read, safety checks) while one answer's ``n`` calls run."""
    log = EventLog.create(tmp_path / f"s{n}" / "events.jsonl", {})
    log.append("turn/start", {"turn": 1})
    counting = CountingLog(log)

    async def emit(update):
        pass

    checks = [0]
    safe = pipeline._safe

    def counted_safe(slot):
        checks[0] += 1
        return safe(slot)

    monkeypatch.setattr(pipeline, "_safe", counted_safe)
    runner = ToolRunner(counting, ToolContext.on_disk(tmp_path), emit, {"nap": SleepTool(Probe())})  # type: ignore[arg-type]
    # the same call again and again (the repeat reminder's case), and distinct ones
    calls = [Call(f"c{i}", "nap", json.dumps({"label": "same" if i % 2 else f"x{i}"})) for i in range(n)]
    await runner.run_batch(1, calls)
    results = [e for e in log.events if e.type == "tool/result"]
    assert len(results) == n
    assert "call number 3 of nap" in results[5].data["content"]  # the reminders still come, from the log's count
    assert "call number 5 of nap" in results[9].data["content"] and "call number" not in results[11].data["content"]
    return counting.read[0], checks[0]


@pytest.mark.parametrize("n", [400])
async def test_10000_tool_calls_in_one_answer_took_quadratic_time(tmp_path, monkeypatch, n):
    read, checks = await work_of_a_batch(tmp_path, n, monkeypatch)
    # the log holds about 2n events: one walk of the turn, not one per call (that read n²/2 ≈ 80,000)
    assert read <= 4 * n, read
    assert checks <= 4 * n, checks  # grouping and the parallel group's end: not the group per call
