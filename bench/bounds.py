#!/usr/bin/env python3
"""Four old bounds the tests check structurally only, measured against a floor of the same run.

Role: the figures of the wall-clock asserts ecf6b6f took out of the tests (``< 4 s`` in
tests/e2e/test_edit_proposals.py, ``< 10 s`` in test_headless.py, ``< 5 s`` in tests/tools/test_bash.py,
``< 10 s`` in test_context_budget.py); the tests keep what ends the wait, this measures how long it
takes. The real server (or ``agent-server run``) and the offline endpoint in a process of its own.
Scenarios, each ``--runs`` times; every figure has its floor, taken in the same run:

* ``proposal``: ``session/cancel`` while an edit proposal waits for an editor that never answers →
  the prompt's answer. The server withdraws the proposal (``$/cancel_request``) and waits
  ``PROPOSAL_CANCEL_WAIT`` for the editor's real answer. Floor: the same cancel with an editor that
  answers the withdrawal at once (``cancelled``); ratio: figure ÷ (grace + floor).
* ``run_sigint``: SIGINT to ``agent-server run`` once its ``bash`` call's command runs → the
  process's exit (status 130). Floor: SIGINT while the answer streams (no tool to stop).
* ``bash_timeout``: a ``bash`` call with ``timeout_ms`` whose command exits on SIGTERM, and one
  whose tree ignores it (then SIGKILL after ``KILL_GRACE_SECONDS``): the ``tool_call`` → its
  ``failed`` update. Floor: ``true`` the same way; ratio: figure ÷ (timeout [+ grace] + floor).
* ``overflow``: a prompt that alone overflows the context window (4,000 tokens) → its
  ``CONTEXT_WINDOW_EXCEEDED`` error; no model request is sent. Floor: a short prompt → its model
  request arriving at the endpoint, in the same agent.

Median, p90 and max in ms; the load average before and after.

    .venv/bin/python bench/bounds.py [--runs 5] [--json]

Must never: judge a figure (a benchmark measures; it does not pass or fail).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._peer import AgentProcess, Endpoint, agent_env, compile_package  # noqa: E402
from bench.cancel_latency import _floor, _is, _prompt, _start, _summary  # noqa: E402
from bench.run import AGENT, INIT  # noqa: E402

WINDOW = "4000"
TIMEOUT_MS = 500
STUBBORN = "trap '' TERM; (trap '' TERM; sleep {m}) & sleep {m} & wait"
EXTENSION_INIT = {**INIT, "clientCapabilities": {
    **INIT["clientCapabilities"],
    "_meta": {"agentServer": {"version": 1, "bufferVersions": True, "applyWorkspaceEdit": True,
                              "positionEncodings": ["utf-16", "utf-8"]}}}}


def _calls(*calls: tuple[str, str, dict[str, Any]]) -> dict[str, Any]:
    from agent_server.offline import tool_call_stream
    return tool_call_stream([(cid, name, json.dumps(args)) for cid, name, args in calls])


def _text(text: str, **kw: Any) -> dict[str, Any]:
    from agent_server.offline import text_stream
    return text_stream(text, **kw)


def _timed_prompt(agent: AgentProcess, sid: str, text: str) -> tuple[int, int, float]:
    """``(request id, index of the next stdout line, time written)`` of a ``session/prompt``."""
    start = len(agent.lines)
    rid, sent = agent.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    return rid, start, sent


def _answer(agent: AgentProcess, rid: int, start: int) -> tuple[float, dict[str, Any]]:
    """Arrival time and message of the answer to ``rid`` (result or error)."""
    def is_it(raw: bytes) -> bool:
        if f'"id":{rid}'.encode() not in raw.replace(b": ", b":"):
            return False
        message = json.loads(raw)
        return message.get("id") == rid and "method" not in message
    _, arrived, message = agent.wait(is_it, start)
    return arrived, message


# -- proposal ----------------------------------------------------------------------------------------

def proposal(runs: int, state: Path) -> dict[str, list[float]]:
    from agent_server.server.acp.editor_files import PROPOSAL_CANCEL_WAIT

    script = []
    for i in range(2 * runs):
        script.append(_calls((f"r{i}", "read", {"path": f"z{i}.txt"}),
                             (f"e{i}", "edit", {"path": f"z{i}.txt", "old_string": "zero", "new_string": "one"})))
    agent, endpoint, sid, ws = _start(script, state, init=EXTENSION_INIT)
    out: dict[str, list[float]] = {"never": [], "answered": [], "floor_rtt": [], "grace_ms": [PROPOSAL_CANCEL_WAIT * 1000]}
    try:
        for i in range(2 * runs):
            (ws / f"z{i}.txt").write_text("zero\n")
            answers = i % 2 == 1  # alternated: the editor that answers the withdrawal, the one that never does
            rid, start = _prompt(agent, sid, "edit it")
            index, _, ask = agent.wait(_is("_agent_server/apply_workspace_edit"), start)
            _, sent = agent.send("session/cancel", {"sessionId": sid}, notify=True)
            if answers:
                agent.wait(_is("$/cancel_request"), index)
                agent.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": ask["id"],
                                                    "result": {"outcome": "cancelled"}}) + "\n").encode())
                agent.proc.stdin.flush()
            arrived, message = _answer(agent, rid, start)
            assert message["result"]["stopReason"] == "cancelled", message
            assert (ws / f"z{i}.txt").read_text() == "zero\n"
            out["answered" if answers else "never"].append((arrived - sent) * 1000)
            out["floor_rtt"].append(_floor(agent))
    finally:
        agent.close()
        endpoint.finish()
    return out


# -- run_sigint --------------------------------------------------------------------------------------

def _command_running(marker: str) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def _run_once(state: Path, script: list[dict[str, Any]], ready: Any) -> float:
    """Spawn ``agent-server run``, wait for ``ready(proc)``, SIGINT it: ms to its exit (status 130)."""
    state.mkdir(parents=True)
    endpoint = Endpoint(script)
    ws = Path(tempfile.mkdtemp(prefix="ws-", dir=state))
    env = agent_env(str(state), endpoint.base_url)
    proc = subprocess.Popen([*AGENT, "run", "-p", "wait", "--cwd", str(ws)], env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ready(proc)
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        exited = _exited(proc, 60)
        status = proc.wait(timeout=60)
        if status != 130:
            raise RuntimeError(f"agent-server run exited {status} after SIGINT, not 130")
        return (exited - sent) * 1000
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()
        endpoint.finish()


def _exited(proc: subprocess.Popen, timeout: float) -> float:
    """When ``proc`` ended (``time.time()``), seen through a pidfd as it happens (Linux ≥ 5.3);
    elsewhere by ``Popen.wait``, whose polling sleeps up to 50 ms between looks (what this bench
    measured with before 2026-12-06 19:45: its figures carry that)."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        proc.wait(timeout=timeout)
        return time.time()
    try:
        if not select.select([fd], [], [], timeout)[0]:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        return time.time()
    finally:
        os.close(fd)


def run_sigint(runs: int, state: Path) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"tool": [], "stream": []}
    for i in range(runs):
        marker = f"{uuid.uuid4().int % 10**6 + 10**6}.1875"  # a sleep only the interruption ends

        def tool_runs(proc: subprocess.Popen, marker: str = marker) -> None:
            deadline = time.monotonic() + 60
            while not _command_running(marker):
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the command never started")
                time.sleep(0.005)

        def streams(proc: subprocess.Popen) -> None:
            if not proc.stdout.read(1):
                raise RuntimeError("the answer never began")

        out["tool"].append(_run_once(state / f"tool-{i}", [_calls(("c1", "bash", {"command": f"sleep {marker}"}))],
                                     tool_runs))
        out["stream"].append(_run_once(state / f"stream-{i}", [_text("slow " * 4000, chunk_size=5, delay=0.02)],
                                       streams))
    return out


def _update(raw: bytes) -> str | None:
    """The ``sessionUpdate`` kind of a ``session/update`` line, else ``None``."""
    if b'"session/update"' not in raw:
        return None
    return json.loads(raw)["params"]["update"].get("sessionUpdate")


# -- bash_timeout ------------------------------------------------------------------------------------

def bash_timeout(runs: int, state: Path) -> dict[str, list[float]]:
    from agent_server.tools.procs import KILL_GRACE_SECONDS

    config = state / "full-access.toml"
    state.mkdir(parents=True, exist_ok=True)
    config.write_text('[policy]\ndefault_mode = "danger-full-access"\n')
    kinds = ("floor", "polite", "stubborn")
    plan = [("warm-up", 0)] + [(kind, i) for i in range(runs) for kind in kinds]  # the launcher starts first
    script = []
    for kind, i in plan:
        marker = f"{uuid.uuid4().int % 10**6 + 10**6}.25"
        command = {"polite": f"sleep {marker}", "stubborn": STUBBORN.format(m=marker)}.get(kind, "true")
        args: dict[str, Any] = {"command": command}
        if kind in ("polite", "stubborn"):
            args["timeout_ms"] = TIMEOUT_MS
        script += [_calls((f"{kind}{i}", "bash", args)), _text("ok")]
    agent, endpoint, sid, _ = _start(script, state, {"AGENT_SERVER_CONFIG": str(config)})
    out: dict[str, list[float]] = {k: [] for k in kinds}
    out["grace_ms"] = [KILL_GRACE_SECONDS * 1000]
    try:
        for kind, i in plan:
            rid, start = _prompt(agent, sid, "run it")
            index, called, message = agent.wait(lambda raw: _update(raw) == "tool_call", start)
            cid = message["params"]["update"]["toolCallId"]
            want = "failed" if kind in ("polite", "stubborn") else "completed"

            def ended_as_wanted(raw: bytes, cid: str = cid, want: str = want) -> bool:
                if _update(raw) != "tool_call_update":
                    return False
                update = json.loads(raw)["params"]["update"]
                return update["toolCallId"] == cid and update.get("status") == want
            _, ended, _ = agent.wait(ended_as_wanted, index)
            _answer(agent, rid, start)
            if kind in out:
                out[kind].append((ended - called) * 1000)
    finally:
        agent.close()
        endpoint.finish()
    return out


# -- overflow ----------------------------------------------------------------------------------------

def overflow(runs: int, state: Path) -> dict[str, list[float]]:
    agent, endpoint, sid, _ = _start([_text("ok") for _ in range(runs + 1)], state,
                                     {"AGENT_SERVER_CONTEXT_WINDOW": WINDOW})
    big = "Summarise this:\n" + "0123456789 abcdefghij\n" * 1000
    out: dict[str, list[float]] = {"overflow": [], "floor": []}
    sent_floor = []
    try:
        rid, start, _ = _timed_prompt(agent, sid, "warm up")  # the first prompt waits for the imports
        _answer(agent, rid, start)
        for _ in range(runs):
            rid, start, sent = _timed_prompt(agent, sid, big)
            arrived, message = _answer(agent, rid, start)
            if message.get("error", {}).get("data", {}).get("code") != "CONTEXT_WINDOW_EXCEEDED":
                raise RuntimeError(f"not the overflow error: {message}")
            out["overflow"].append((arrived - sent) * 1000)
            rid, start, sent = _timed_prompt(agent, sid, "a short question")
            sent_floor.append(sent)
            _answer(agent, rid, start)
    finally:
        agent.close()
        report = endpoint.finish()
    if len(report["requests"]) != runs + 1:
        raise RuntimeError(f"{len(report['requests'])} model requests for {runs + 1} short prompts: an overflow sent one")
    out["floor"] = [(q["time"] - s) * 1000 for q, s in zip(report["requests"][1:], sent_floor)]
    return out


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--only", choices=("proposal", "run_sigint", "bash_timeout", "overflow"),
                        help="measure this bound alone (printed as JSON)")
    args = parser.parse_args()
    compile_package()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    out: dict[str, Any] = {"runs": args.runs, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                           "commit": commit, "load_before": _load()}
    with tempfile.TemporaryDirectory(prefix="agent-server-bounds-bench-") as base:
        for name, measure in (("proposal", proposal), ("run_sigint", run_sigint), ("bash_timeout", bash_timeout),
                              ("overflow", overflow)):
            if args.only in (None, name):
                out[name] = {k: _summary(v) for k, v in measure(args.runs, Path(base) / name).items()}
    out["load_after"] = _load()
    if args.only:
        print(json.dumps(out))
        return
    p, r, b, o = out["proposal"], out["run_sigint"], out["bash_timeout"], out["overflow"]
    grace, kill = p["grace_ms"]["median"], b["grace_ms"]["median"]
    out["rows"] = [
        ("proposal: cancel, the editor never answers → answer", p["never"],
         f"grace {grace:g} + answered {p['answered']['median']}", p["never"]["median"] / (grace + p["answered"]["median"])),
        ("run_sigint: SIGINT during a bash call → exit 130", r["tool"],
         f"SIGINT mid-stream {r['stream']['median']}", r["tool"]["median"] / r["stream"]["median"]),
        (f"bash_timeout: {TIMEOUT_MS} ms, exits on SIGTERM → failed", b["polite"],
         f"{TIMEOUT_MS} + `true` {b['floor']['median']}", b["polite"]["median"] / (TIMEOUT_MS + b["floor"]["median"])),
        (f"bash_timeout: {TIMEOUT_MS} ms, ignores SIGTERM → failed (SIGKILL grace {kill:g})", b["stubborn"],
         f"{TIMEOUT_MS} + `true` {b['floor']['median']}", b["stubborn"]["median"] / (TIMEOUT_MS + b["floor"]["median"])),
        ("overflow: prompt alone over 4,000 tokens → error", o["overflow"],
         f"short prompt → its request {o['floor']['median']}", o["overflow"]["median"] / o["floor"]["median"]),
    ]
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['date']}, {commit}, {os.cpu_count()} cores, load {out['load_before']} → {out['load_after']}, "
          f"{args.runs} runs")
    print("| bound | median (p90, max) ms | floor ms | ratio |")
    print("|---|---|---|---|")
    for what, fig, floor, ratio in out["rows"]:
        print(f"| {what} | {fig['median']} ({fig['p90']}, {fig['max']}) | {floor} | {ratio:.2f} × |")


if __name__ == "__main__":
    main()
