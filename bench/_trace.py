#!/usr/bin/env python3
"""A served ``agent-server`` whose first prompt is timed stage by stage (the bench's tracer).

Role: run as the agent command (``python bench/_trace.py``, the server's own CLI on stdio) with
``AGENT_SERVER_BENCH_TRACE=<file>``: before the server starts, the functions the path from a
``session/prompt`` line to its first model request goes through are wrapped, and each records when
it was entered or left — ``time.time()`` (comparable with the bench's and the endpoint's clocks:
one machine) and the calling thread's CPU clock (``time.thread_time()``: a stage's own work, which
a loaded machine does not inflate as it inflates wall times). The stamps of the first prompt, up to
its request's first ``sendmsg`` and a moment after, are written to the file as JSON lines.
``stages(path)`` reads them back as per-stage CPU and wall times.

Must never: be imported by ``agent_server`` (the server's code carries no timing), or change what
a wrapped function does.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable


TRACE_ENV = "AGENT_SERVER_BENCH_TRACE"

_stamps: list[tuple[str, float, float, int, float, float]] = []
_state: dict[str, Any] = {"on": False, "done": False, "requests": 0, "wake": None}
_schedstat: dict[int, int] = {}  # thread → its open /proc/thread-self/schedstat


def _runq() -> float:
    """Seconds the calling thread has waited on a run queue so far (runnable, not running: the
    scheduler's delay, ``/proc/thread-self/schedstat``'s second field); 0 where there is none, and
    in any thread but the one that installed the tracer (the loop's): the read is a system call,
    which lets go of the interpreter, and a worker that lets go of it while the loop computes gets
    it back only at the loop's next wait — the ``fsync`` worker's stamp before its ``fsync`` made the
    ``fsync`` start at the request's first send."""
    ident = threading.get_ident()
    if ident != _state.get("thread", ident):
        return 0.0
    fd = _schedstat.get(ident)
    try:
        if fd is None:
            fd = _schedstat[ident] = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
        return int(os.pread(fd, 64, 0).split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def _now(name: str) -> tuple[str, float, float, int, float, float]:
    return (name, time.time(), time.thread_time(), threading.get_ident(), time.process_time(), _runq())


def stamp(name: str, *, always: bool = False) -> None:
    """Record ``name`` now, while the first prompt is being traced (``always``: before it too)."""
    if _state["on"] or (always and not _state["done"]):
        _stamps.append(_now(name))


def _wrap(owner: Any, attribute: str, label: str, *, enter: bool = True, leave: bool = True,
          when: Callable[..., bool] | None = None) -> None:
    original = getattr(owner, attribute)
    function = original.__func__ if isinstance(original, (staticmethod, classmethod)) else original
    if inspect.iscoroutinefunction(function):
        @functools.wraps(function)
        async def traced(*args: Any, **kwargs: Any) -> Any:
            on = when is None or when(*args, **kwargs)
            if on and enter:
                stamp(f"{label}>")
            try:
                return await function(*args, **kwargs)
            finally:
                if on and leave:
                    stamp(f"{label}<")
    elif inspect.isasyncgenfunction(function):
        @functools.wraps(function)
        def traced(*args: Any, **kwargs: Any) -> Any:  # the call makes the generator: stamp it
            if enter:
                stamp(f"{label}>")
            return function(*args, **kwargs)
    else:
        @functools.wraps(function)
        def traced(*args: Any, **kwargs: Any) -> Any:
            on = when is None or when(*args, **kwargs)
            if on and enter:
                stamp(f"{label}>")
            try:
                return function(*args, **kwargs)
            finally:
                if on and leave:
                    stamp(f"{label}<")
    setattr(owner, attribute, staticmethod(traced) if isinstance(original, staticmethod) else traced)


def install(path: str) -> None:
    """Wrap the prompt path's functions; the stamps go to ``path``."""
    _state["thread"] = threading.get_ident()  # the loop's (the server's CLI runs it in this thread)
    from agent_server.agent import compaction, session as agent_session, step
    from agent_server.agent.request_memo import RequestMemo
    from agent_server.host import host
    from agent_server.llm import _client, _transport
    from agent_server.server.acp import server
    from agent_server.server.rpc import jsonrpc
    from agent_server.session import events

    original_line = jsonrpc.Connection._handle_line
    original_load = server.AcpServer.load
    original_run_request = jsonrpc.Connection._run_request

    async def load(self: Any, params: Any, ctx: Any) -> Any:
        try:
            return await original_load(self, params, ctx)
        finally:
            stamp("load handled", always=True)
            _state["armed"] = True

    async def run_request(self: Any, handler: Any, params: Any, context: Any) -> Any:
        try:
            return await original_run_request(self, handler, params, context)
        finally:
            if context.method == "session/load":
                stamp("load answered, after() done", always=True)

    server.AcpServer.load = load
    jsonrpc.Connection._run_request = run_request

    import asyncio
    import selectors

    original_select = selectors.EpollSelector.select

    def select(self: Any, timeout: Any = None) -> Any:
        # the event loop's waits: while the prompt is traced each wait and wake-up is a stage; before
        # it only the last wake-up is kept (the one the prompt's bytes caused, stamped when they are read)
        if _state["on"]:
            stamp("loop waits>")
        elif _state.get("armed") and not _state["done"]:
            _state["sleep"] = _now("(before the prompt) loop waits>")
        events = original_select(self, timeout)
        if _state["on"]:
            stamp("loop woke<")
        elif _state.get("armed") and not _state["done"]:
            _state["wake"] = _now("loop woke (the prompt's bytes)")
        return events

    selectors.EpollSelector.select = select
    original_feed = asyncio.StreamReader.feed_data

    def feed_data(self: Any, data: bytes) -> None:
        if not _state["done"] and not _state["on"] and b'"session/prompt"' in data:
            _state["on"] = True
            if _state["wake"] is not None:
                if _state.get("sleep") is not None and _state["sleep"][1] <= _state["wake"][1]:
                    _stamps.append(_state["sleep"])
                _stamps.append(_state["wake"])
            stamp("stdin bytes read")
        return original_feed(self, data)

    asyncio.StreamReader.feed_data = feed_data

    async def handle_line(self: Any, line: bytes) -> Any:
        if not _state["done"] and not _state["on"] and b'"session/prompt"' in line:
            _state["on"] = True
        if _state["on"] and b'"session/prompt"' in line:
            stamp("prompt line read")
        return await original_line(self, line)

    jsonrpc.Connection._handle_line = handle_line
    original_prompt = server.AcpServer.prompt

    async def prompt(self: Any, params: Any, ctx: Any) -> Any:
        stamp("prompt handler>")
        try:
            return await original_prompt(self, params, ctx)
        finally:
            if _state["done"] and _stamps:
                _dump(path)
                _stamps.clear()

    server.AcpServer.prompt = prompt
    _wrap(server, "_parse", "params validated", enter=False)
    _wrap(host.SessionHost, "dispatch", "dispatched", enter=False)
    _wrap(agent_session.AgentSession, "wait_ready", "ready", enter=False)
    _wrap(agent_session.AgentSession, "_run_turn", "turn", leave=False)
    _wrap(agent_session.AgentSession, "_check_head_fits", "head checked", enter=False)
    _wrap(host.SessionHost, "_request_header", "header", enter=False)
    _wrap(host.SessionHost, "_refresh_instructions", "AGENTS.md checked", enter=False)
    _wrap(host.SessionHost, "_client", "client", enter=False)
    if os.environ.get("BENCH_TRACE_SYNC_WINS"):  # (a test's) the fsync ends while the request is made
        asked = threading.Event()
        original_run = agent_session.DurableSync._run

        def run(self: Any) -> None:  # not before the request is made (its last byte would not be held)
            asked.wait(30)
            original_run(self)

        def done_now(self: Any) -> bool:  # asked right before the last byte would be held: done by then
            asked.set()
            while not self._durable._synced:
                time.sleep(0.0005)
            return self._durable.settled_now()

        agent_session.DurableSync._run = run
        agent_session._Settled.done_now = done_now
    if hasattr(agent_session, "DurableSync"):
        _wrap(agent_session.DurableSync, "start", "user fsync handed to a thread", enter=False)
    import concurrent.futures.thread as pool

    _wrap(pool.ThreadPoolExecutor, "_adjust_thread_count", "executor threads checked")
    _wrap(agent_session.AgentSession, "_step", "step", leave=False)
    _wrap(compaction.Compactor, "before_step", "estimate", enter=False)
    _wrap(RequestMemo, "request", "body", enter=False)
    if os.environ.get("BENCH_TRACE_FINE"):  # the estimate's parts
        from agent_server.session.projection import ProjectionMemo

        _wrap(RequestMemo, "_fold", "memo: events folded")
        _wrap(RequestMemo, "_frame", "memo: frame")
        _wrap(RequestMemo, "step_chars", "memo: anchor's step")
        _wrap(ProjectionMemo, "shared", "projection")
    original_stream = _client.ChatClient.stream

    def stream(self: Any, body: bytes, **kwargs: Any) -> Any:
        stamp("stream>")
        if _state["on"]:
            _state["held"] = kwargs.get("ready") is not None  # the request's last byte: a send of its own
        return original_stream(self, body, **kwargs)

    _client.ChatClient.stream = stream
    _wrap(step, "log_request_inputs", "inputs logged", enter=False)

    original_append = events.EventLog.append

    def append(self: Any, type: str, data: Any, **kwargs: Any) -> Any:
        stamp(f"append {type}>")
        try:
            return original_append(self, type, data, **kwargs)
        finally:
            stamp(f"append {type}<")

    events.EventLog.append = append
    original_fsync = os.fsync

    def fsync(fd: int) -> None:
        stamp("fsync>")
        try:
            original_fsync(fd)
        finally:
            stamp("fsync<")

    os.fsync = fsync
    original_kept = _transport.SocketStream.send_kept

    async def send_kept(self: Any, timeout: Any) -> Any:
        if _state["on"]:
            _state["split"] = True  # the last byte waits for the fsync: it leaves in a send of its own
        return await original_kept(self, timeout)

    _transport.SocketStream.send_kept = send_kept
    original_send = _transport.SocketStream._send_unsent

    async def send(self: Any, timeout: Any) -> Any:
        stamp("sendmsg>")
        try:
            return await original_send(self, timeout)
        finally:
            stamp("sendmsg<")
            if _state["on"]:
                _state["sends"] = _state.get("sends", 0) + 1
                # the request is out: in one send (not held, or its fsync was done while it was made)
                # or in two (everything but the last byte, then the last byte after the fsync)
                if _state["sends"] >= 2 or not (_state.get("held") and _state.get("split")):
                    _state["on"], _state["done"] = False, True

    _transport.SocketStream._send_unsent = send


def _dump(path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for name, wall, cpu, thread, process, runq in _stamps:
            fh.write(json.dumps({"stage": name, "time": wall, "cpu": cpu, "thread": thread, "process": process,
                                 "runq": runq}) + "\n")


def stages(path: Path, sent: float, received: float,
           chunks: list[list[float]] | None = None) -> list[dict[str, Any]]:
    """The stamps of ``path`` as stages: each stamp of the thread that read the prompt with the CPU
    (ms), wall time (ms) and run-queue wait (ms: runnable but not running) since the one before it
    on that thread, and ``at_ms``, since the prompt was written; ``sent``/``received``: the bench's
    write of the prompt and the endpoint's receipt of the request (``time.time()``), as the first
    and last; ``chunks``: the endpoint's reads of bytes (``[time, bytes]``), those after ``sent``
    as ``(endpoint) read`` rows in their place."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        return []
    firsts = ("loop woke (the prompt's bytes)", "stdin bytes read", "prompt line read")
    start = next(i for i, row in enumerate(rows) if row["stage"] in firsts)
    main = rows[start]["thread"]

    def at(t: float) -> float:
        return round((t - sent) * 1000, 3)
    out = [{"stage": f"(since the prompt was written) {row['stage']}",
            "cpu_ms": round((row["process"] - rows[i - 1]["process"]) * 1000, 3) if i else None,
            "wall_ms": at(row["time"]), "runq_ms": None, "at_ms": at(row["time"])} for i, row in enumerate(rows[:start])]
    if start:
        out.append({"stage": "(server process CPU between the load's end and the prompt's bytes)",
                    "cpu_ms": round((rows[start]["process"] - rows[start - 1]["process"]) * 1000, 3),
                    "wall_ms": None, "runq_ms": None, "at_ms": None})
    slept = rows[start - 1] if start and rows[start - 1]["stage"] == "(before the prompt) loop waits>" else None
    out.append({"stage": f"prompt written → {rows[start]['stage']}", "cpu_ms": None,
                "wall_ms": at(rows[start]["time"]),
                "runq_ms": round((rows[start]["runq"] - slept["runq"]) * 1000, 3) if slept else None,
                "at_ms": at(rows[start]["time"])})
    reads = [c for c in chunks or () if c[0] >= sent]
    last, previous = rows[start], {main: rows[start]}
    for row in rows[start + 1:]:
        while reads and reads[0][0] < row["time"]:
            when, size, *runq = reads.pop(0)
            out.append({"stage": f"(endpoint) read {size} bytes", "cpu_ms": None, "wall_ms": None,
                        "runq_ms": runq[0] if runq else None, "at_ms": at(when)})
        before = previous.get(row["thread"])
        runq = round((row.get("runq", 0) - before.get("runq", 0)) * 1000, 3) if before else None
        previous[row["thread"]] = row
        if row["thread"] != main:
            out.append({"stage": f"(thread) {row['stage']}", "cpu_ms": None,
                        "wall_ms": round((row["time"] - last["time"]) * 1000, 3), "runq_ms": runq,
                        "at_ms": at(row["time"])})
            continue
        out.append({"stage": row["stage"], "cpu_ms": round((row["cpu"] - last["cpu"]) * 1000, 3),
                    "wall_ms": round((row["time"] - last["time"]) * 1000, 3), "runq_ms": runq, "at_ms": at(row["time"])})
        last = row
    for when, size, *runq in reads:
        out.append({"stage": f"(endpoint) read {size} bytes", "cpu_ms": None, "wall_ms": None,
                    "runq_ms": runq[0] if runq else None, "at_ms": at(when)})
    out.append({"stage": "→ endpoint has the request", "cpu_ms": None,
                "wall_ms": round((received - max(last["time"], reads[-1][0] if reads else 0)) * 1000, 3),
                "runq_ms": None, "at_ms": at(received)})
    return out


def wall_split(trace: list[dict[str, Any]]) -> dict[str, float | None]:
    """Where one traced first request's wall time went (ms), from ``stages``' rows: ``woke``, the
    prompt written → the server's loop woken by it; ``server``, → the request's first ``sendmsg``
    returned, of it ``server_cpu`` the loop thread's CPU and ``server_runq`` its run-queue wait;
    ``held``, → the last byte sent (waiting for the ``user`` event's ``fsync``: 0 when the request
    left in one send); ``endpoint``, → the endpoint has the whole request (its wake-ups and reads)."""
    def first(name: str) -> dict[str, Any] | None:
        return next((r for r in trace if r["stage"] == name), None)
    begin = next((r for r in trace if r["stage"].startswith("prompt written → ")), None)
    sends = [r for r in trace if r["stage"] == "sendmsg<"]
    end = trace[-1] if trace else None
    if begin is None or not sends or end is None:
        return {}
    index = trace.index(begin)
    to_first = trace[index + 1:trace.index(sends[0]) + 1]
    main = [r for r in to_first if r["cpu_ms"] is not None]
    split = {"woke": begin["at_ms"], "server": round(sends[0]["at_ms"] - begin["at_ms"], 3),
             "server_cpu": round(sum(r["cpu_ms"] for r in main), 3),
             "server_runq": round(sum(r["runq_ms"] or 0 for r in main), 3),
             "held": round(sends[-1]["at_ms"] - sends[0]["at_ms"], 3),
             "endpoint": round(end["at_ms"] - sends[-1]["at_ms"], 3), "total": end["at_ms"]}
    fsync = first("(thread) fsync<")
    split["fsync_done"] = fsync["at_ms"] if fsync else None
    return split


def main() -> int:
    path = os.environ.get(TRACE_ENV)
    if path:
        install(path)
    from agent_server.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
