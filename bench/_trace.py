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

_stamps: list[tuple[str, float, float, int, float]] = []
_state = {"on": False, "done": False, "requests": 0}


def stamp(name: str, *, always: bool = False) -> None:
    """Record ``name`` now, while the first prompt is being traced (``always``: before it too)."""
    if _state["on"] or (always and not _state["done"]):
        _stamps.append((name, time.time(), time.thread_time(), threading.get_ident(), time.process_time()))


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

    async def run_request(self: Any, handler: Any, params: Any, context: Any) -> Any:
        try:
            return await original_run_request(self, handler, params, context)
        finally:
            if context.method == "session/load":
                stamp("load answered, after() done", always=True)

    server.AcpServer.load = load
    jsonrpc.Connection._run_request = run_request

    async def handle_line(self: Any, line: bytes) -> Any:
        if not _state["done"] and not _state["on"] and b'"session/prompt"' in line:
            _state["on"] = True
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
    for name in ("_send_unsent",):
        original_send = getattr(_transport.SocketStream, name)

        async def send(self: Any, timeout: Any, _original: Any = original_send) -> Any:
            stamp("sendmsg>")
            try:
                return await _original(self, timeout)
            finally:
                stamp("sendmsg<")
                _state["sends"] = _state.get("sends", 0) + 1
                if _state["on"] and (_state["sends"] >= 2 or not _state.get("held")):
                    _state["on"], _state["done"] = False, True

        setattr(_transport.SocketStream, name, send)


def _dump(path: str) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for name, wall, cpu, thread, process in _stamps:
            fh.write(json.dumps({"stage": name, "time": wall, "cpu": cpu, "thread": thread, "process": process}) + "\n")


def stages(path: Path, sent: float, received: float) -> list[dict[str, Any]]:
    """The stamps of ``path`` as stages: each stamp of the thread that read the prompt with the CPU
    (ms) and wall time (ms) since the one before it; ``sent``/``received``: the bench's write of the
    prompt and the endpoint's receipt of the request (``time.time()``), as the first and last."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not rows:
        return []
    start = next(i for i, row in enumerate(rows) if row["stage"] == "prompt line read")
    main = rows[start]["thread"]
    out = [{"stage": f"(since the prompt was written) {row['stage']}",
            "cpu_ms": round((row["process"] - rows[i - 1]["process"]) * 1000, 3) if i else None,
            "wall_ms": round((row["time"] - sent) * 1000, 3)} for i, row in enumerate(rows[:start])]
    if start:
        out.append({"stage": "(server process CPU between the load's end and the prompt line)",
                    "cpu_ms": round((rows[start]["process"] - rows[start - 1]["process"]) * 1000, 3), "wall_ms": None})
    out.append({"stage": "prompt written → line read", "cpu_ms": None, "wall_ms": round((rows[start]["time"] - sent) * 1000, 3)})
    last = rows[start]
    for row in rows[start + 1:]:
        if row["thread"] != main:
            out.append({"stage": f"(thread) {row['stage']}", "cpu_ms": None,
                        "wall_ms": round((row["time"] - last["time"]) * 1000, 3)})
            continue
        out.append({"stage": row["stage"], "cpu_ms": round((row["cpu"] - last["cpu"]) * 1000, 3),
                    "wall_ms": round((row["time"] - last["time"]) * 1000, 3)})
        last = row
    out.append({"stage": "→ endpoint has the request", "cpu_ms": None, "wall_ms": round((received - last["time"]) * 1000, 3)})
    return out


def main() -> int:
    path = os.environ.get(TRACE_ENV)
    if path:
        install(path)
    from agent_server.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
