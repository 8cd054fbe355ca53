#!/usr/bin/env python3
"""Every performance figure of agent-server in one run, each against its floor.

    .venv/bin/python bench/run.py            # full run (a few minutes on 2 cores)
    .venv/bin/python bench/run.py --quick    # small sizes, 2 runs each (CI runs this)
    .venv/bin/python bench/run.py --json out.json

Peers: the real ``agent-server`` (this venv's), the bundled offline endpoint in its own process
playing fixed provider paces, and the floors measured in the same run — ``python -c pass`` (the
venv's interpreter) and ``bench/forwarder.py``, a stdlib-only 100-line agent. Figures, their goals
and how each is taken are in ``bench/README.md``. A benchmark measures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._logs import grow_log  # noqa: E402
from bench._lsp import LspProcess, first_code_action  # noqa: E402
from bench._peer import ROOT, AgentProcess, Endpoint, agent_env, compile_package  # noqa: E402

PY = sys.executable
AGENT = [str(Path(PY).with_name("agent-server"))] if Path(PY).with_name("agent-server").exists() else [PY, "-m", "agent_server"]
FORWARDER = [PY, str(ROOT / "bench" / "forwarder.py")]
LIBRARIES = "import asyncio, httpx, httpx_sse, pydantic; pydantic.create_model('M', x=(int, 0))"
"""What any agent built on this stack pays before it can serve a prompt: the libraries the
server runs on (``python -c`` of this, spawn → exit; a first model class built, as pydantic defers
its core until then)."""
READ_LATENCY = 0.03
"""Seconds the endpoint waits before each answer of the read scenario (a provider's time to first
byte). The issue's own measurement of this scenario, with its scripted model, had the forwarder at
66 ms for 2 model calls: ≈ 30 ms each. The same scenario against an endpoint that answers at once
is reported too (``read_total_zero_latency``)."""
INIT = {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
        "clientInfo": {"name": "agent-server-bench", "version": "1"}}


def text_answer(text: str, chunk: int = 64) -> dict[str, Any]:
    from agent_server.offline import text_stream
    return text_stream(text, chunk_size=chunk)


def read_call(call_id: str, path: str) -> dict[str, Any]:
    from agent_server.offline import tool_call_stream
    return tool_call_stream([(call_id, "read", json.dumps({"path": path}))])


def bash_call(call_id: str, command: str) -> dict[str, Any]:
    from agent_server.offline import tool_call_stream
    return tool_call_stream([(call_id, "bash", json.dumps({"command": command}))])


def one_char_stream(n: int, per_write: int, delay: float) -> dict[str, Any]:
    """``n`` one-character content deltas, ``per_write`` frames per TCP write, ``delay`` s apart."""
    def frame(obj: dict[str, Any]) -> str:
        return "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n"
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "offline-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
    frames = [frame(chunk({"content": alphabet[i % len(alphabet)]})) for i in range(n)]
    writes = [{"text": frame(chunk({"role": "assistant", "content": ""})), "delay": 0}]
    for i in range(0, n, per_write):
        writes.append({"text": "".join(frames[i:i + per_write]), "delay": delay})
    writes.append({"text": frame(chunk({}, "stop")) + "data: [DONE]\n\n", "delay": 0})
    return {"kind": "raw", "status": 200, "headers": {"Content-Type": "text/event-stream"},
            "writes": writes, "framing": "chunked"}


def expected_text(n: int) -> str:
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789 "
    return "".join(alphabet[i % len(alphabet)] for i in range(n))


class Bench:
    """One benchmark run: a temporary workspace and state folder per scenario, figures collected."""

    def __init__(self, runs: int, quick: bool) -> None:
        self.runs = runs
        self.quick = quick
        self.tmp = Path(tempfile.mkdtemp(prefix="agent-server-bench-"))
        self.figures: dict[str, dict[str, Any]] = {}
        self.template_log: Path | None = None

    def workspace(self) -> Path:
        ws = Path(tempfile.mkdtemp(dir=self.tmp, prefix="ws-"))
        (ws / "notes.txt").write_text("".join(f"line {i}: the quick brown fox\n" for i in range(40)))
        return ws

    def record(self, key: str, label: str, values: list[float], unit: str = "ms", *,
               floor: list[float] | None = None, goal: str = "", extra: dict[str, Any] | None = None) -> None:
        entry: dict[str, Any] = {"label": label, "unit": unit, "values": [round(v, 3) for v in values],
                                 "median": round(statistics.median(values), 3),
                                 "min": round(min(values), 3), "max": round(max(values), 3), "goal": goal}
        if floor:
            entry["floor_median"] = round(statistics.median(floor), 3)
            entry["ratio"] = round(entry["median"] / entry["floor_median"], 2) if entry["floor_median"] else None
        entry.update(extra or {})
        self.figures[key] = entry
        print(f"  {label}: {entry['median']} {unit}" + (f" (floor {entry['floor_median']}, ×{entry['ratio']})" if floor else ""),
              file=sys.stderr, flush=True)

    def agent(self, command: list[str], script: list[dict[str, Any]], extra_env: dict[str, str] | None = None
              ) -> tuple[AgentProcess, Endpoint, Path]:
        endpoint = Endpoint(script, PY)
        state = Path(tempfile.mkdtemp(dir=self.tmp, prefix="state-"))
        env = agent_env(str(state), endpoint.base_url)
        env.update(extra_env or {})
        return AgentProcess(command, env), endpoint, state

    # -- figures ---------------------------------------------------------------------------------

    def startup(self) -> None:
        """spawn → initialize response; floor: spawn → exit of ``python -c pass``."""
        def init_once(command: list[str]) -> float:
            agent, endpoint, _ = self.agent(command, [])
            try:
                sent, answered, _ = agent.request("initialize", INIT)
                return (answered - agent.spawned) * 1000
            finally:
                agent.close()
                endpoint.finish()
        def bare() -> float:
            start = time.time()
            subprocess.run([PY, "-c", "pass"], check=True)
            return (time.time() - start) * 1000
        def libraries() -> float:
            start = time.time()
            subprocess.run([PY, "-c", LIBRARIES], check=True)
            return (time.time() - start) * 1000
        init_once(AGENT)  # warm the page cache and bytecode
        bare_ms = [bare() for _ in range(self.runs)]
        self.record("initialize", "initialize (spawn → response)", [init_once(AGENT) for _ in range(self.runs)],
                    floor=bare_ms, goal="≤ 1.3 × python -c pass")
        self.record("library_imports", "python importing asyncio, httpx, httpx_sse, pydantic (spawn → exit)",
                    [libraries() for _ in range(self.runs)], floor=bare_ms,
                    extra={"over_floor_ms": round(statistics.median([libraries() for _ in range(self.runs)])
                                                  - statistics.median(bare_ms), 1)})

    def lsp(self) -> None:
        """``agent-server lsp``: spawn → ``initialize`` answer against the ACP server's (runs
        alternated), and spawn → the first ``textDocument/codeAction`` answer of an editor that opens
        a document and asks for code actions as soon as ``initialize`` is answered. No model is
        contacted."""
        acp_ms, init_ms, action_ms = [], [], []
        for i in range(self.runs + 1):  # the first pair warms the page cache
            env = agent_env(tempfile.mkdtemp(dir=self.tmp, prefix="state-"), "http://127.0.0.1:9/v1")
            agent = AgentProcess(AGENT, env)
            try:
                _, answered, _ = agent.request("initialize", INIT)
                acp = (answered - agent.spawned) * 1000
            finally:
                agent.close()
            ws = self.workspace()
            server = LspProcess([*AGENT, "lsp"], env, cwd=str(ws))
            try:
                times = first_code_action(server, str(ws), str(ws / "notes.txt"), (ws / "notes.txt").read_text())
            finally:
                server.close()
            if i:
                acp_ms.append(acp)
                init_ms.append(times["initialize"])
                action_ms.append(times["code_action"])
        self.record("lsp_initialize", "agent-server lsp: initialize (spawn → response)", init_ms,
                    floor=acp_ms, goal="≤ 2 × ACP initialize (floor)")
        self.record("lsp_first_code_action", "agent-server lsp: spawn → first textDocument/codeAction answer",
                    action_ms)

    def session_and_first_prompt(self) -> None:
        """``session/new`` right after ``initialize``; first prompt → first model request (no pause
        and after 1 s); the read scenario's prompt total; idle RSS."""
        new_ms: dict[str, list[float]] = {"agent": [], "floor": []}
        first_ms: dict[str, list[float]] = {"agent": [], "floor": [], "agent_paused": []}
        spawn_ms: dict[str, list[float]] = {"agent": [], "floor": []}
        total_ms: dict[str, list[float]] = {k: [] for k in ("agent", "floor", "agent_paused", "floor_paused",
                                                             "agent_zero", "floor_zero")}
        rss: list[float] = []
        for _ in range(self.runs):
            for who, command in (("agent", AGENT), ("floor", FORWARDER)):
                for pause, latency in ((0.0, READ_LATENCY), (1.0, READ_LATENCY), (0.0, 0.0)):
                    ws = self.workspace()
                    script = [{**read_call("call_1", "notes.txt"), "latency": latency},
                              {**text_answer("The file has 40 lines."), "latency": latency}]
                    agent, endpoint, state = self.agent(command, script)
                    try:
                        agent.request("initialize", INIT)
                        sent, answered, result = agent.request("session/new", {"cwd": str(ws), "mcpServers": []})
                        if pause == 0.0:
                            new_ms[who].append((answered - sent) * 1000)
                        else:
                            time.sleep(pause)
                        psent, pdone, presult = agent.request(
                            "session/prompt", {"sessionId": result["sessionId"],
                                               "prompt": [{"type": "text", "text": "How long is notes.txt?"}]})
                        assert presult.get("stopReason") == "end_turn", presult
                        if who == "agent" and pause == 0.0:
                            rss.append(agent.memory_kib("VmRSS") / 1024)
                    finally:
                        agent.close()
                        report = endpoint.finish()
                    first = (report["requests"][0]["time"] - psent) * 1000
                    if not latency:
                        total_ms[f"{who}_zero"].append((pdone - psent) * 1000)
                        continue
                    if pause:
                        total_ms[f"{who}_paused"].append((pdone - psent) * 1000)
                        if who == "agent":
                            first_ms["agent_paused"].append(first)
                        continue
                    first_ms[who].append(first)
                    spawn_ms[who].append((report["requests"][0]["time"] - agent.spawned) * 1000)
                    total_ms[who].append((pdone - psent) * 1000)
                    if who == "agent" and self.template_log is None:
                        self.template_log = next(state.glob("sessions/*/events.jsonl"))
                        keep = self.tmp / "template.jsonl"
                        shutil.copy(self.template_log, keep)
                        self.template_log = keep
        self.record("session_new", "session/new right after initialize", new_ms["agent"], floor=new_ms["floor"],
                    goal="≤ 15 ms")
        self.record("first_request", "first prompt right after session/new → first model request", first_ms["agent"],
                    floor=first_ms["floor"])
        self.record("first_request_paused", "same, 1 s after session/new", first_ms["agent_paused"])
        self.record("spawn_to_first_request", "spawn → first model request, the prompt sent at once", spawn_ms["agent"],
                    floor=spawn_ms["floor"], goal="stretch: codex-acp's 192–244 ms")
        self.record("read_total", f"read scenario: prompt total (2 model calls of {READ_LATENCY * 1000:.0f} ms "
                    "+ 1 tool)", total_ms["agent"], floor=total_ms["floor"], goal="≤ 1.3 × forwarder")
        self.record("read_total_paused", "read scenario, 1 s after session/new", total_ms["agent_paused"],
                    floor=total_ms["floor_paused"])
        self.record("read_total_zero_latency", "read scenario, endpoint answering at once",
                    total_ms["agent_zero"], floor=total_ms["floor_zero"])
        self.record("idle_rss", "RSS after one turn", rss, unit="MiB", goal="≤ 45 MiB")

    def streaming(self) -> None:
        """200 KB (``--quick``: 20 KB) in 1-character deltas, paced at 20,000 deltas/s and all at
        once: last chunk at the client − the provider's last byte; first chunk − the provider's first text write;
        notifications; CPU seconds."""
        n = 20_000 if self.quick else 200_000
        for pace, (per_write, delay) in (("paced", (100, 0.005)), ("burst", (n, 0.0))):
            lags: list[float] = []
            firsts: list[float] = []
            counts: list[float] = []
            cpu: list[float] = []
            for _ in range(max(1, self.runs // 2) if not self.quick else 1):
                ws = self.workspace()
                agent, endpoint, _ = self.agent(AGENT, [one_char_stream(n, per_write, delay)])
                try:
                    agent.request("initialize", INIT)
                    _, _, result = agent.request("session/new", {"cwd": str(ws), "mcpServers": []})
                    before = agent.cpu_seconds()
                    start = len(agent.lines)
                    psent, pdone, presult = agent.request(
                        "session/prompt", {"sessionId": result["sessionId"],
                                           "prompt": [{"type": "text", "text": "stream"}]}, timeout=300)
                    cpu.append(agent.cpu_seconds() - before)
                    chunks = [(t, json.loads(raw)) for t, raw in agent.lines[start:] if b"agent_message_chunk" in raw]
                finally:
                    agent.close()
                    report = endpoint.finish()
                text = "".join(m["params"]["update"]["content"]["text"] for _, m in chunks)
                if text != expected_text(n):
                    raise AssertionError(f"streamed text differs from what the provider sent ({len(text)} of {n} chars)")
                lags.append((chunks[-1][0] - report["done"][0]) * 1000)
                firsts.append((chunks[0][0] - report["first_content"][0]) * 1000)
                counts.append(len(chunks))
                del presult, psent, pdone
            self.record(f"stream_{pace}", f"{n // 1000} KB in 1-char deltas ({pace}): last chunk lag", lags,
                        goal="≤ 50 ms", extra={"first_chunk_ms": round(statistics.median(firsts), 3),
                                                "notifications": statistics.median(counts),
                                                "cpu_seconds": round(statistics.median(cpu), 3)})

    def long_logs(self) -> None:
        """A request built from a 100k-event log, parsing it, and ``session/load`` of a 10 MB log."""
        from agent_server.agent import request_body, step_starts
        from agent_server.agent.request_memo import RequestMemo
        from agent_server.llm import encode_body
        from agent_server.session import read_events
        assert self.template_log is not None, "run session_and_first_prompt first"
        count = 20_000 if self.quick else 100_000
        _, path = grow_log(self.template_log, self.tmp / "long", events=count)
        parse, build, scratch = [], [], []
        events = memo = body = None
        for _ in range(self.runs):
            events = memo = body = None  # the previous run's 100k events are freed here, not inside the timing
            start = time.perf_counter()
            events = read_events(path)
            parse.append((time.perf_counter() - start) * 1000)
            *_, previous, last = step_starts(events)
            memo = RequestMemo()  # as in a live session: it built the previous request already
            memo.request(events, previous)
            start = time.perf_counter()
            body = memo.request(events, last)
            build.append((time.perf_counter() - start) * 1000)
            start = time.perf_counter()
            assert encode_body(request_body(events, last)) == body
            scratch.append((time.perf_counter() - start) * 1000)
        self.record("log_parse", f"parse a {len(events) // 1000}k-event log", parse, goal="≤ 300 ms (100k)",
                    extra={"megabytes": round(path.stat().st_size / 1e6, 1)})
        self.record("log_request", f"a request built from a {len(events) // 1000}k-event log", build,
                    goal="≤ 20 ms (100k)", extra={"from_scratch_ms": round(statistics.median(scratch), 1),
                                                  "body_megabytes": round(len(body) / 1e6, 1)})
        size = 2_000_000 if self.quick else 10_000_000
        loads, peaks, updates = [], [], []
        for _ in range(self.runs):
            ws = self.workspace()
            state = Path(tempfile.mkdtemp(dir=self.tmp, prefix="state-"))
            session_id, _ = grow_log(self.template_log, state, size=size, cwd=str(ws))
            endpoint = Endpoint([], PY)
            agent = AgentProcess(AGENT, agent_env(str(state), endpoint.base_url))
            try:
                agent.request("initialize", INIT)
                start = len(agent.lines)
                sent, answered, _ = agent.request("session/load", {"sessionId": session_id, "cwd": str(ws),
                                                                   "mcpServers": []}, timeout=120)
                loads.append((answered - sent) * 1000)
                peaks.append(agent.memory_kib("VmHWM") / 1024)
                updates.append(sum(1 for _, raw in agent.lines[start:] if b"session/update" in raw))
            finally:
                agent.close()
                endpoint.finish()
        self.record("load", f"session/load of a {size // 1_000_000} MB log", loads, goal="≤ 250 ms",
                    extra={"peak_rss_mib": round(statistics.median(peaks), 1), "updates": statistics.median(updates)})

    def shell(self) -> None:
        """A confined ``cat`` of a small file, ``tool_call`` → its completed update, against a bare
        ``bash -c`` spawned by this process. One unmeasured call first (it starts the shell
        launcher; its time is reported as ``first_call_ms``). CPU per call: the agent's process
        tree (the agent, its launcher, their reaped children) against the bare runs'."""
        agent_ms, bare_ms = [], []
        ws = self.workspace()
        script = []
        for i in range(self.runs + 1):
            script += [bash_call(f"call_{i}", "cat notes.txt"), text_answer("ok")]
        agent, endpoint, _ = self.agent(AGENT, script)
        try:
            agent.request("initialize", INIT)
            _, _, result = agent.request("session/new", {"cwd": str(ws), "mcpServers": []})
            for i in range(self.runs + 1):
                if i == 1:
                    cpu_before = tree_cpu_ms(agent.server_pid())
                start = len(agent.lines)
                agent.request("session/prompt", {"sessionId": result["sessionId"],
                                                 "prompt": [{"type": "text", "text": "cat it"}]})
                updates = [(t, json.loads(raw)["params"]["update"]) for t, raw in agent.lines[start:]
                           if b"tool_call" in raw and b"session/update" in raw]
                pending = next(t for t, u in updates if u.get("sessionUpdate") == "tool_call")
                done = next(t for t, u in updates if u.get("status") in ("completed", "failed"))
                agent_ms.append((done - pending) * 1000)
            cpu_ms = (tree_cpu_ms(agent.server_pid()) - cpu_before) / self.runs
        finally:
            agent.close()
            endpoint.finish()
        first, agent_ms = agent_ms[0], agent_ms[1:]
        bare_cpu = _children_cpu_ms()
        for _ in range(self.runs):
            start = time.time()
            subprocess.run(["bash", "-c", "cat notes.txt"], cwd=ws, check=True, capture_output=True)
            bare_ms.append((time.time() - start) * 1000)
        bare_cpu = (_children_cpu_ms() - bare_cpu) / self.runs
        self.record("shell", "confined `cat` (call → result)", agent_ms, floor=bare_ms, goal="≤ bare + 15 ms",
                    extra={"first_call_ms": round(first, 1), "cpu_ms_per_prompt": round(cpu_ms, 1),
                           "floor_cpu_ms": round(bare_cpu, 1)})

    def concurrent(self) -> None:
        """20 sessions of one server prompted at once: all end ``end_turn``."""
        n = 5 if self.quick else 20
        ws = self.workspace()
        agent, endpoint, _ = self.agent(AGENT, [text_answer(f"answer {i}") for i in range(n)])
        try:
            agent.request("initialize", INIT)
            ids = [agent.request("session/new", {"cwd": str(ws), "mcpServers": []})[2]["sessionId"] for _ in range(n)]
            start = time.time()
            sent = [agent.send("session/prompt", {"sessionId": s, "prompt": [{"type": "text", "text": "hi"}]})[0]
                    for s in ids]
            reasons = [agent.response(r, 0, timeout=120)[2]["result"]["stopReason"] for r in sent]
            took = (time.time() - start) * 1000
        finally:
            agent.close()
            endpoint.finish()
        if reasons != ["end_turn"] * n:
            raise AssertionError(f"concurrent sessions did not all end cleanly: {reasons}")
        self.record("concurrent", f"{n} concurrent sessions, one prompt each (all end_turn)", [took])


def tree_cpu_ms(pid: int) -> float:
    """CPU milliseconds of ``pid`` and its live descendants, each with its reaped children's
    (``/proc``: utime + stime + cutime + cstime)."""
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text()
            except OSError:
                continue
            stats[int(entry.name)] = text[text.rfind(")") + 2:].split()
    tree, frontier = set(), [pid]
    while frontier:
        current = frontier.pop()
        tree.add(current)
        frontier += [p for p, f in stats.items() if int(f[1]) == current and p not in tree]
    ticks = sum(sum(int(x) for x in stats[p][11:15]) for p in tree if p in stats)
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def _children_cpu_ms() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (usage.ru_utime + usage.ru_stime) * 1000


def table(figures: dict[str, dict[str, Any]]) -> str:
    """A Markdown table of the figures: median, range, floor, ratio, goal."""
    rows = ["| figure | median | range | floor | ratio | goal | notes |", "|---|---|---|---|---|---|---|"]
    for entry in figures.values():
        notes = ", ".join(f"{k} {v}" for k, v in entry.items()
                          if k in ("first_chunk_ms", "notifications", "cpu_seconds", "peak_rss_mib", "updates",
                                    "first_call_ms", "cpu_ms_per_prompt", "floor_cpu_ms", "over_floor_ms"))
        rows.append(f"| {entry['label']} | {entry['median']} {entry['unit']} | {entry['min']}–{entry['max']} "
                    f"| {entry.get('floor_median', '')} | {entry.get('ratio', '') or ''} | {entry['goal']} | {notes} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, 2 runs (CI)")
    parser.add_argument("--runs", type=int, default=None, help="runs per figure (default 5; 2 with --quick)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON to FILE ('-': stdout)")
    parser.add_argument("--only", action="append", default=None,
                        help="run only these groups (startup, session, streaming, logs, shell, concurrent, lsp)")
    args = parser.parse_args(argv)
    compile_package()  # measure the agent as installed: with its bytecode
    bench = Bench(args.runs or (2 if args.quick else 5), args.quick)
    groups: dict[str, Callable[[], None]] = {
        "startup": bench.startup, "session": bench.session_and_first_prompt, "streaming": bench.streaming,
        "logs": bench.long_logs, "shell": bench.shell, "concurrent": bench.concurrent, "lsp": bench.lsp}
    wanted = args.only or list(groups)
    if "logs" in wanted and "session" not in wanted:
        wanted.insert(0, "session")  # the long logs grow from the read scenario's real log
    try:
        for name in wanted:
            print(f"{name} …", file=sys.stderr, flush=True)
            groups[name]()
    finally:
        shutil.rmtree(bench.tmp, ignore_errors=True)
    meta = {"python": sys.version.split()[0], "cores": os.cpu_count(), "quick": args.quick, "runs": bench.runs,
            "bytecode": "compiled first (bench/_peer.compile_package)",
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                     text=True).stdout.strip()}
    print(table(bench.figures))
    if args.json:
        payload = json.dumps({"meta": meta, "figures": bench.figures}, indent=2)
        if args.json == "-":
            print(payload)
        else:
            Path(args.json).write_text(payload + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
