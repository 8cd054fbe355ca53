#!/usr/bin/env python3
"""Issue 33's figures: how much of each request a provider's prefix cache can serve, and long
sessions after a load.

    .venv/bin/python bench/prompt_cache.py session      # the 50-turn scripted session
    .venv/bin/python bench/prompt_cache.py load         # session/load of a 100k-event log, then a prompt
    .venv/bin/python bench/prompt_cache.py --quick all  # small sizes (the test suite runs this)

``session``: the real ``agent-server`` and the offline endpoint play 50 turns, each a ``read`` of a
2 KB file and an answer, with two mode switches, an ``AGENTS.md`` edit, a ``/model`` switch within
the profile, an MCP server's tool-list change (``tests/mcp/changing_server.py``) and one
``/compact``; ``agent.prefix.prefix_report`` of the log then counts the breaks (each planned one
named, goal 0 unplanned) and the share of input bytes that repeat the previous request's start;
every body the endpoint received is checked against ``agent-server replay``'s rebuild.

``load``: a log of many small turns (grown from a real one, ``bench._logs.grow_log``) is loaded by
a fresh server (``session/load``) and prompted once; the load is compared with a stdlib parse of the
same lines (``json.loads`` of each), and the time from the prompt to its first model request with
the time to encode that request's body. The same for the log with the compactions the agent would
have made (``with_compactions``). Figures and goals: ``bench/README.md``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._logs import grow_log  # noqa: E402
from bench._trace import TRACE_ENV, stages, wall_split  # noqa: E402
from bench._peer import ROOT, AgentProcess, Endpoint, agent_env, compile_package  # noqa: E402

PY = sys.executable
AGENT = [str(Path(PY).with_name("agent-server"))] if Path(PY).with_name("agent-server").exists() else [PY, "-m", "agent_server"]
CHANGING = ROOT / "tests" / "mcp" / "changing_server.py"
INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
        "clientInfo": {"name": "agent-server-bench", "version": "1"}}
USAGE = {"prompt_tokens": 0, "completion_tokens": 8, "total_tokens": 8}


def _text(text: str) -> dict[str, Any]:
    from agent_server.offline import text_stream
    return text_stream(text, chunk_size=64, usage=USAGE)


def _call(call_id: str, name: str, **args: Any) -> dict[str, Any]:
    from agent_server.offline import tool_call_stream
    return tool_call_stream([(call_id, name, json.dumps(args))], usage=USAGE)


def _prompt(agent: AgentProcess, sid: str, text: str) -> dict[str, Any]:
    """Send a prompt and wait for its answer; a permission question is answered ``allow_once``."""
    start = len(agent.lines)
    request_id, _ = agent.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    index = start
    while True:
        index, _, message = agent.wait(lambda raw: b'"id"' in raw, index, timeout=120)
        index += 1
        if message.get("method") == "session/request_permission":
            option = next(o for o in message["params"]["options"] if o["kind"] == "allow_once")
            reply = {"jsonrpc": "2.0", "id": message["id"],
                     "result": {"outcome": {"outcome": "selected", "optionId": option["optionId"]}}}
            agent.proc.stdin.write((json.dumps(reply) + "\n").encode())
            agent.proc.stdin.flush()
        elif message.get("id") == request_id and "method" not in message:
            if "error" in message:
                raise RuntimeError(f"prompt {text!r} failed: {message['error']}")
            return message["result"]


def scripted_session(tmp: Path, turns: int = 50) -> dict[str, Any]:
    """The 50-turn session (see the module docstring); returns its figures."""
    from agent_server.agent.prefix import prefix_report
    from agent_server.agent.replay import logged_requests
    from agent_server.session import read_events

    ws = Path(tempfile.mkdtemp(dir=tmp, prefix="ws-"))
    for i in range(10):  # tool outputs of about 2 KB
        (ws / f"f{i}.txt").write_text("".join(f"{i}.{n}: the quick brown fox jumps over the lazy dog\n"
                                              for n in range(40)))
    (ws / "AGENTS.md").write_text("Run the tests before you say a task is done.\n")
    at = {"mode1": turns // 5, "agents": 2 * turns // 5, "mcp": turns // 2, "mode2": 3 * turns // 5,
          "model": 7 * turns // 10, "compact": 9 * turns // 10}
    script: list[dict[str, Any]] = []
    for turn in range(1, turns + 1):
        if turn == at["compact"]:
            script.append(_text("Summary: files f0–f9 were read, each has 40 numbered lines."))
        if turn == at["mcp"]:
            script.append(_call(f"g{turn}", "mcp__changing__grow"))
        script += [_call(f"r{turn}", "read", path=f"f{turn % 10}.txt"), _text(f"Answer {turn}: 40 lines.")]
    state = Path(tempfile.mkdtemp(dir=tmp, prefix="state-"))
    endpoint = Endpoint(script, PY)
    env = agent_env(str(state), endpoint.base_url, {"AGENT_SERVER_SANDBOX": "off",
                                                     "AGENT_SERVER_CONTEXT_WINDOW": "1000000"})  # one compaction: /compact
    Path(env["AGENT_SERVER_CONFIG"]).write_text(
        'model = "offline-model"\n[[models]]\nid = "offline-model"\n[[models]]\nid = "offline-model-2"\n'
        '[policy]\nmcp_trusted = ["changing"]\n')
    agent = AgentProcess(AGENT, env)
    started = time.perf_counter()
    try:
        agent.request("initialize", INIT)
        servers = [{"name": "changing", "command": PY, "args": [str(CHANGING), "modern"], "env": []}]
        sid = agent.request("session/new", {"cwd": str(ws), "mcpServers": servers})[2]["sessionId"]
        for turn in range(1, turns + 1):
            if turn == at["mode1"]:
                agent.request("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
            if turn == at["mode2"]:
                agent.request("session/set_mode", {"sessionId": sid, "modeId": "workspace-write"})
            if turn == at["agents"]:
                (ws / "AGENTS.md").write_text("Run the tests before you say a task is done. Indent with tabs.\n")
            if turn == at["model"]:
                _prompt(agent, sid, "/model offline-model-2")
            if turn == at["compact"]:
                _prompt(agent, sid, "/compact")
            if turn == at["mcp"]:
                answer = _prompt(agent, sid, "Grow the tool list, then read the next file.")
            else:
                answer = _prompt(agent, sid, f"Read the next file ({turn}).")
            if answer.get("stopReason") != "end_turn":
                raise AssertionError(f"turn {turn}: {answer}")
    finally:
        agent.close()
        report = endpoint.finish()
    took = time.perf_counter() - started
    log = next(state.glob("sessions/*/events.jsonl"))
    events = read_events(log)
    received = [hashlib.sha256(r["body"].encode("utf-8")).hexdigest() for r in report["requests"]]
    rebuilt = [r.sha256 for r in logged_requests(events)]
    if received != rebuilt:
        raise AssertionError("the requests the endpoint received are not those replay rebuilds from the log")
    prefix = prefix_report(events)
    compaction = prefix.compactions[0] if prefix.compactions else {"bytes": 0, "shared": 0}
    return {"turns": turns, "requests": len(received), "seconds": round(took, 1), "breaks": prefix.breaks,
            "unplanned": prefix.unplanned, "share": round(prefix.share, 4),
            "compaction_share": round(compaction["shared"] / compaction["bytes"], 4) if compaction["bytes"] else None,
            "input_megabytes": round(sum(r["bytes"] for r in prefix.requests) / 1e6, 2)}


def _endpoint_of(log: Path) -> str:
    """The redacted base URL of the first ``request/context`` of ``log``."""
    with log.open(encoding="utf-8") as fh:
        for line in fh:
            event = json.loads(line)
            if event["type"] == "request/context":
                return str(event["data"].get("base_url") or "")
    return ""


def _template(tmp: Path, window: int | None = None) -> Path:
    """A real log of one small turn (a read and an answer), written by the server."""
    ws = Path(tempfile.mkdtemp(dir=tmp, prefix="ws-"))
    (ws / "notes.txt").write_text("".join(f"line {i}: the quick brown fox\n" for i in range(40)))
    state = Path(tempfile.mkdtemp(dir=tmp, prefix="state-"))
    answer = [_call("call_1", "read", path="notes.txt"), _text("The file has 40 lines.")]
    endpoint = Endpoint(answer + answer, PY)
    agent = AgentProcess(AGENT, agent_env(str(state), endpoint.base_url,
                                          {"AGENT_SERVER_CONTEXT_WINDOW": str(window)} if window else None))
    try:
        agent.request("initialize", INIT)
        sid = agent.request("session/new", {"cwd": str(ws), "mcpServers": []})[2]["sessionId"]
        _prompt(agent, sid, "How long is notes.txt?")
        _prompt(agent, sid, "And now?")  # the turn repeated: the first logged the request header
    finally:
        agent.close()
        endpoint.finish()
    return next(state.glob("sessions/*/events.jsonl"))


def add_compactions(path: Path, window_chars: int) -> int:
    """Rewrite the log at ``path`` with the compactions the agent would have made: whenever the
    history since the last checkpoint passes 0.8 × ``window_chars``, a ``compaction/start``,
    ``compaction/summary`` and ``compaction/end`` replacing all but its last turn (seq renumbered).
    Returns how many."""
    events = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    out: list[dict[str, Any]] = []
    since, first, count = 0, None, 0
    for event in events:
        out.append(event)
        if first is None and event["type"] == "user":
            first = len(out)  # the seq the first replaced message will have (after renumbering)
        since += len(json.dumps(event["data"])) if event["type"] in ("user", "assistant", "tool/result") else 0
        if event["type"] == "turn/end" and since > 0.8 * window_chars and first is not None:
            last = len(out)
            count += 1
            model = "offline-model"
            out.append({"type": "compaction/start", "data": {
                "turn": event["data"].get("turn"), "step": 1, "reason": "threshold", "estimate": since // 4,
                "window": window_chars // 4, "first_seq": first, "last_seq": last, "kept_messages": 0,
                "system": "Summarise.", "instruction": "Summarise this transcript:", "model": model, "params": {},
                "max_transcript_chars": 2000}})
            out.append({"type": "compaction/summary", "data": {"text": "Files were read.", "usage": None,
                                                               "finish_reason": "stop", "model": model}})
            out.append({"type": "compaction/end", "data": {
                "first_seq": first, "last_seq": last,
                "message": f"[agent-server checkpoint] Compaction {count}: files were read.",
                "estimate_before": since // 4}})
            since = 0
    with path.open("w", encoding="utf-8") as fh:
        for seq, event in enumerate(out, 1):
            fh.write(json.dumps({"type": event["type"], "seq": seq, "time": event.get("time", 0.0),
                                 "data": event["data"]}, ensure_ascii=False, separators=(",", ":")) + "\n")
    return count


def load_after(tmp: Path, events: int, runs: int, compactions: bool, server_path: str | None = None,
               trace: bool = False) -> dict[str, Any]:
    """``session/load`` of a grown log and its first prompt, against their floors; ``trace``: the
    server run by ``bench/_trace.py``, the first prompt's stages timed (``stages``: the median CPU
    and wall time of each over the runs)."""
    from agent_server.llm import encode_body

    window = 128_000  # tokens: the log outgrows it many times over, as a long real session would
    template = _template(tmp, window)
    loads, parses, firsts, encodes, kinds, fsyncs, traces, cpus = [], [], [], [], [], [], [], []
    load_cpus, parse_cpus, encode_cpus = [], [], []
    made = size = 0
    averages = [os.getloadavg()[0]]
    for _ in range(runs):
        ws = Path(tempfile.mkdtemp(dir=tmp, prefix="ws-"))
        (ws / "notes.txt").write_text("x\n")
        state = Path(tempfile.mkdtemp(dir=tmp, prefix="state-"))
        endpoint = Endpoint([_text("Summary: files were read."), _text("Go on.")], PY)
        # the session as loaded against the endpoint it talked to
        sid, path = grow_log(template, state, events=events, cwd=str(ws), repeat_from=2,
                             replace={_endpoint_of(template): endpoint.base_url})
        size = path.stat().st_size
        if compactions:
            made = add_compactions(path, window * 4)
        _on_disk(path)  # a real log is on disk: the first append's fsync must not write the grown 30 MB
        start, cpu = time.perf_counter(), time.process_time()
        with path.open("rb") as fh:
            [json.loads(line) for line in fh]
        parses.append((time.perf_counter() - start) * 1000)
        parse_cpus.append((time.process_time() - cpu) * 1000)
        traced = state / "trace.jsonl"
        env = agent_env(str(state), endpoint.base_url, {"AGENT_SERVER_CONTEXT_WINDOW": str(window),
                                                         **({"PYTHONPATH": server_path} if server_path else {}),
                                                         **({TRACE_ENV: str(traced)} if trace else {})})
        agent = AgentProcess([PY, str(ROOT / "bench" / "_trace.py")] if trace else AGENT, env)
        try:
            agent.request("initialize", INIT)
            before = _cpu_ms(agent.server_pid())
            sent, answered, _ = agent.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []},
                                              timeout=300)
            load_cpus.append(_cpu_ms(agent.server_pid()) - before)  # (read once the answer is in: its after-work too)
            loads.append((answered - sent) * 1000)
            # the answer is looked for after the prompt: from line 0 the replay's 31k lines (20 MB) were
            # searched again, 45-60 ms of the bench's CPU on one of two cores while the step it times ran
            start = len(agent.lines)
            request_id, prompted = agent.send("session/prompt", {"sessionId": sid,
                                                                 "prompt": [{"type": "text", "text": "Go on."}]})
            agent.response(request_id, start, timeout=300)
        finally:
            agent.close()
            report = endpoint.finish()
        first = report["requests"][0]
        firsts.append((first["time"] - prompted) * 1000)
        if trace and traced.exists():
            traces.append(stages(traced, prompted, first["time"], report.get("reads")))
            cpus.append(sum(row["cpu_ms"] for row in traces[-1] if row["cpu_ms"] is not None
                            and not row["stage"].startswith("(")))
        body = json.loads(first["body"])
        kinds.append("compaction" if body["messages"][0]["content"].startswith("You summarise") else "step")
        # the floor is the work of the server's own encoder on this request: the same bytes
        if encode_body(body) != first["body"].encode("utf-8"):
            raise AssertionError("encode_body of the request the endpoint received is not its bytes: not the floor")
        del report, first
        gc.collect()  # the replay's 100k lines just freed: no collection of them inside the timer
        took, took_cpu = [], []
        for _ in range(10):  # the best of ten, warm (the first above): the floor, not the machine's pauses
            start, cpu = time.perf_counter(), time.thread_time()
            encode_body(body)
            took.append((time.perf_counter() - start) * 1000)
            took_cpu.append((time.thread_time() - cpu) * 1000)
        encodes.append(min(took))
        encode_cpus.append(min(took_cpu))
        fsyncs.append(_fsync_ms(path))
        shutil.rmtree(state, ignore_errors=True)
    load_ratios = [a / b for a, b in zip(loads, parses)]
    first_ratios = [a / max(b, 0.01) for a, b in zip(firsts, encodes)]
    durable_ratios = [a / max(b + c, 0.01) for a, b, c in zip(firsts, encodes, fsyncs)]
    return {"events": events, "compactions_in_log": made, "megabytes": round(size / 1e6, 1),
            "load_ms": round(statistics.median(loads), 1), "parse_ms": round(statistics.median(parses), 1),
            "load_ratio": round(statistics.median(load_ratios), 2),
            "load_ratio_range": [round(min(load_ratios), 2), round(max(load_ratios), 2)],
            "first_request_ms": round(statistics.median(firsts), 1),
            "encode_ms": round(statistics.median(encodes), 2),
            "encode_ms_range": [round(min(encodes), 2), round(max(encodes), 2)],
            "encode_cpu_ms": [round(c, 3) for c in encode_cpus],
            "first_request_ms_range": [round(min(firsts), 1), round(max(firsts), 1)],
            "first_request_ratio": round(statistics.median(first_ratios), 1),
            "first_request_ratio_range": [round(min(first_ratios), 1), round(max(first_ratios), 1)],
            "fsync_ms": round(statistics.median(fsyncs), 2),
            "fsync_ms_range": [round(min(fsyncs), 2), round(max(fsyncs), 2)],
            "first_request_ratio_with_fsync": round(statistics.median(durable_ratios), 1),
            "first_request_ratio_with_fsync_range": [round(min(durable_ratios), 1), round(max(durable_ratios), 1)],
            "first_request_kind": kinds[0], "runs": runs,
            # CPU, which a loaded machine inflates less than wall time: the served process's for the load
            # (every thread: the parse, the memo, the replay) against the bench's for the stdlib parse
            "load_cpu_ms": [round(c, 1) for c in load_cpus], "parse_cpu_ms": [round(c, 1) for c in parse_cpus],
            "load_cpu_ratio": [round(a / b, 2) for a, b in zip(load_cpus, parse_cpus)],
            **({"stages": _median_stages(traces),
                # each run's timeline: [stage, CPU ms, wall ms, run-queue wait ms, ms since the prompt was written]
                "stage_runs": [[[r["stage"], r["cpu_ms"], r["wall_ms"], r["runq_ms"], r["at_ms"]] for r in t]
                               for t in traces],
                "wall_split": [wall_split(t) for t in traces],
                # the loop thread's, from the prompt's line read to the request's last byte sent (the tracer's
                # stamps included: ~25 of a few µs)
                "server_cpu_ms": [round(c, 3) for c in cpus],
                "server_cpu_ratio": [round(c / max(e, 0.01), 2) for c, e in zip(cpus, encode_cpus)]} if trace else {}),
            "load_average": [round(averages[0], 1), round(os.getloadavg()[0], 1)]}  # at the start, at the end


def _median_stages(traces: list[list[dict[str, Any]]]) -> list[list[Any]]:
    """``[stage, median CPU ms, median wall ms, median run-queue wait ms]`` over the runs' traces (a stage by its name and
    its occurrence among the stamps of that name)."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for trace in traces:
        seen: dict[str, int] = {}
        for row in trace:
            if row["stage"].startswith(("loop ", "(endpoint)")):
                continue  # their number differs between runs: in ``stage_runs`` only
            n = seen[row["stage"]] = seen.get(row["stage"], 0) + 1
            rows.setdefault(row["stage"] + (f" #{n}" if n > 1 else ""), []).append(row)

    def median(values: list[Any]) -> Any:
        values = [v for v in values if v is not None]
        return round(statistics.median(values), 3) if values else None
    return [[name, median([r["cpu_ms"] for r in got]), median([r["wall_ms"] for r in got]),
             median([r.get("runq_ms") for r in got])] for name, got in rows.items()]


def _cpu_ms(pid: int) -> float:
    """User + system CPU of process ``pid`` so far, every thread (``/proc/<pid>/stat``), in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _fsync_ms(log: Path) -> float:
    """The best of three appends of a prompt-sized line to the session's log itself (the run's: 30 MB,
    the server gone), each ``fsync``\\ed: what the server must do before any request a prompt makes
    (a ``user`` event is durable). The log is deleted after it."""
    took = []
    with log.open("ab") as fh:
        for _ in range(3):
            start = time.perf_counter()
            fh.write(b'{"type":"user","seq":1,"time":0.0,"data":{"turn":1,"content":"Go on."}}\n')
            fh.flush()
            os.fsync(fh.fileno())
            took.append((time.perf_counter() - start) * 1000)
    return min(took)


def _on_disk(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["session", "load", "all"])
    parser.add_argument("--quick", action="store_true", help="small sizes")
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--events", type=int, default=None, help="events of the grown log (default 100,000)")
    parser.add_argument("--server-path", default=None,
                        help="load: run the server from this source tree (e.g. `git archive <commit> agent_server`"
                             " unpacked), to compare another commit at the same machine load")
    parser.add_argument("--trace", action="store_true",
                        help="load: time the first prompt's stages in the server (bench/_trace.py)")
    parser.add_argument("--step-only", action="store_true",
                        help="load: only the log with compactions (its first request is a step)")
    args = parser.parse_args(argv)
    compile_package()
    tmp = Path(tempfile.mkdtemp(prefix="agent-server-bench-cache-"))
    figures: dict[str, Any] = {}
    try:
        if args.what in ("session", "all"):
            figures["session"] = scripted_session(tmp, 12 if args.quick else 50)
        if args.what in ("load", "all"):
            events = args.events or (5_000 if args.quick else 100_000)
            runs = args.runs or (1 if args.quick else 3)
            if not args.step_only:
                figures["load"] = load_after(tmp, events, runs, compactions=False, server_path=args.server_path,
                                             trace=args.trace)
            figures["load_compacted"] = load_after(tmp, events, runs, compactions=True, server_path=args.server_path,
                                                   trace=args.trace)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta = {"python": sys.version.split()[0], "commit": subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()}
    print(json.dumps({"meta": meta, **figures}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
