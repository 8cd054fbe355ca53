#!/usr/bin/env python3
"""``session/list`` with thousands of stored sessions, and a request's latency during MCP start-up.

    .venv/bin/python bench/sessions_mcp.py                 # 2,000 sessions, 5 runs
    .venv/bin/python bench/sessions_mcp.py --sessions 500 --runs 2 --json out.json

Figures (issue 31, items 7 and 11; goals in ``bench/README.md``):

* ``list_first_page_cold``: the first ``session/list`` page of a fresh process with no index file
  (every log's head read once, the index written);
* ``list_first_page``: the first page of a fresh process with the index file present;
  (both after the process served a first request: its own start-up is ``startup.py``'s figure)
* ``list_all_pages``: every page (50 a page) of that process, one after the other;
* ``request_no_mcp`` / ``request_during_mcp_start``: a ``session/list`` sent right after a
  ``session/new`` answer, without MCP servers and with one stdio server (``mcp-server-time``) that
  is starting meanwhile. Both processes first serve a warm-up ``session/new`` + ``session/set_mode``,
  so the figure is a served request, not the server's own start.

Floors from the same run, so that a loaded machine's figures can be compared (``--json`` and the
printed ratios): ``floor_rpc``, the round trip of a request the server answers at once (an unknown
method, ``-32601``) in the same process just before each ``list_*`` figure; ``floor_stdlib``, the
work no listing can skip done by this process with the standard library — ``listdir`` of the
sessions folder, a ``stat`` of each log and ``json.loads`` of the index file — just after it.

A benchmark measures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._peer import AgentProcess, agent_env, compile_package  # noqa: E402

PY = sys.executable
AGENT = [str(Path(PY).with_name("agent-server"))] if Path(PY).with_name("agent-server").exists() else [PY, "-m", "agent_server"]
INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
        "clientInfo": {"name": "agent-server-bench", "version": "1"}}


def make_sessions(state: Path, cwd: str, n: int) -> None:
    """``n`` stored sessions with one prompt and answer each (a quarter of them in another folder)."""
    from agent_server.session import SessionStore

    store = SessionStore(state)
    for i in range(n):
        _, log = store.create({"cwd": cwd if i % 4 else cwd + "-other"})
        text = f"session {i}: fix the thing number {i}\nwith details"
        log.append("user", {"turn": 1, "content": text, "blocks": [{"type": "text", "text": text}]})
        log.append("assistant", {"text": "done " * 40})
        log.close()


def start(state: Path, cwd: str) -> AgentProcess:
    """An agent whose full server is up: ``initialize``, then a ``session/new`` (in a folder of its
    own, never prompted: not listed) and a ``session/set_mode`` on it, answered by the full server."""
    agent = AgentProcess(AGENT, agent_env(str(state), "http://127.0.0.1:9/v1"), cwd=cwd)
    agent.request("initialize", INIT)
    warm = Path(state) / "warm-up"
    warm.mkdir(exist_ok=True)
    sid = agent.request("session/new", {"cwd": str(warm), "mcpServers": []})[2]["sessionId"]
    agent.request("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
    return agent


def timed(agent: AgentProcess, method: str, params: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    sent, answered, result = agent.request(method, params)
    return (answered - sent) * 1000, result


def floor_rpc(agent: AgentProcess) -> float:
    """The best of three round trips of a request answered at once (an unknown method: its error)."""
    best = float("inf")
    for _ in range(3):
        start = len(agent.lines)
        request_id, sent = agent.send("_agent_server/bench_floor", {})
        _, arrived, _ = agent.wait(lambda raw: json.loads(raw).get("id") == request_id, start)
        best = min(best, arrived - sent)
    return best * 1000


def floor_stdlib(sessions: Path) -> float:
    """Milliseconds of the listing's unavoidable work with the standard library: ``listdir``, a
    ``stat`` of each log, ``json.loads`` of the index file."""
    import os

    began = time.perf_counter()
    for name in os.listdir(sessions):
        try:
            os.stat(sessions / name / "events.jsonl")
        except OSError:
            pass
    try:
        json.loads((sessions / "index.json").read_bytes())
    except (OSError, ValueError):
        pass
    return (time.perf_counter() - began) * 1000


def all_pages(agent: AgentProcess, cwd: str | None) -> tuple[float, int]:
    total, pages, cursor = 0.0, 0, None
    while True:
        ms, result = timed(agent, "session/list", {**({"cwd": cwd} if cwd else {}), **({"cursor": cursor} if cursor else {})})
        total += ms
        pages += 1
        cursor = result.get("nextCursor")
        if not cursor:
            return total, pages


def listing(tmp: Path, n: int, runs: int) -> dict[str, list[float]]:
    state, cwd = tmp / "state-list", tmp / "ws"
    cwd.mkdir(exist_ok=True)
    make_sessions(state, str(cwd), n)
    out: dict[str, list[float]] = {"list_first_page_cold": [], "list_first_page": [], "list_all_pages": [],
                                   "floor_rpc": [], "floor_stdlib": []}
    for _ in range(runs):
        (state / "sessions" / "index.json").unlink(missing_ok=True)
        agent = start(state, str(cwd))
        try:
            out["floor_rpc"].append(floor_rpc(agent))
            out["list_first_page_cold"].append(timed(agent, "session/list", {})[0])
        finally:
            agent.close()
        agent = start(state, str(cwd))
        try:
            out["floor_rpc"].append(floor_rpc(agent))
            out["list_first_page"].append(timed(agent, "session/list", {})[0])
            out["floor_stdlib"].append(floor_stdlib(state / "sessions"))
            out["list_all_pages"].append(all_pages(agent, None)[0])
        finally:
            agent.close()
    return out


def during_mcp(tmp: Path, runs: int) -> dict[str, list[float]]:
    time_server = Path(PY).with_name("mcp-server-time")
    cwd = tmp / "ws"
    cwd.mkdir(exist_ok=True)
    servers = [{"name": "time", "command": str(time_server), "args": ["--local-timezone", "UTC"], "env": []}]
    out: dict[str, list[float]] = {"request_no_mcp": [], "request_during_mcp_start": []}
    for _ in range(runs):
        for key, mcp in (("request_no_mcp", []), ("request_during_mcp_start", servers)):
            state = Path(tempfile.mkdtemp(dir=tmp, prefix="state-"))
            agent = start(state, str(cwd))
            try:
                agent.request("session/new", {"cwd": str(cwd), "mcpServers": mcp})
                out[key].append(timed(agent, "session/list", {})[0])
            finally:
                agent.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    compile_package()
    tmp = Path(tempfile.mkdtemp(prefix="agent-server-bench-"))
    try:
        figures = {**listing(tmp, args.sessions, args.runs), **during_mcp(tmp, args.runs)}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {k: {"median_ms": round(statistics.median(v), 1), "min_ms": round(min(v), 1), "max_ms": round(max(v), 1),
                   "values": [round(x, 1) for x in v]} for k, v in figures.items()}
    for key, entry in summary.items():
        print(f"{key}: median {entry['median_ms']} ms (min {entry['min_ms']}, max {entry['max_ms']})")
    floors = {k: summary[k]["median_ms"] for k in ("floor_rpc", "floor_stdlib") if k in summary}
    for key in ("list_first_page_cold", "list_first_page", "list_all_pages"):
        if key in summary:
            ratios = ", ".join(f"{summary[key]['median_ms'] / v:.1f} × {k}" for k, v in floors.items() if v > 0)
            print(f"{key}: {ratios}")
    if args.json:
        Path(args.json).write_text(json.dumps({"sessions": args.sessions, "runs": args.runs, "figures": summary,
                                               "time": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
