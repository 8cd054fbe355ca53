#!/usr/bin/env python3
"""How long a cancel takes to be answered: ``session/cancel`` (or ``$/cancel_request``, or closing
stdin) → the prompt's answer (or the process's exit), with the real server and the offline endpoint.

Role: the timing goals the e2e tests used to assert as wall-clock bounds (``< 1 s`` in
tests/e2e/test_cancel.py, test_cancel_prompt.py, test_resume.py; ``< 5 s`` for closing stdin in
test_regressions.py); the tests now check that the cancel is what ended the turn, this measures how
fast. Scenarios, each ``--runs`` times in one agent (``stdin``: one agent per run):

* ``shell``: during a danger-full-access shell command whose tree ignores SIGTERM (a subshell and
  two ``sleep 300``), once the whole tree runs;
* ``stream``: during a streamed answer, after its first chunk;
* ``permission``: while a permission question (an unconfined shell command, sandbox off) waits
  for the client, which never answers;
* ``queued``: ``$/cancel_request`` of a prompt queued behind a streaming one → that prompt's answer;
* ``stdin``: closing stdin while a prompt streams and another is queued → the process's exit.

The floor is the round trip of a request the server answers at once (an unknown method's error),
in the same agent, after each run. Median, p90 and max in ms.

    .venv/bin/python bench/cancel_latency.py [--runs 10] [--json]

A benchmark measures; it does not pass or fail.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._peer import AgentProcess, Endpoint, agent_env, compile_package  # noqa: E402
from bench.run import AGENT, INIT, bash_call  # noqa: E402

TREE = ("trap '' TERM; echo $$ > {pids}; "
        "(trap '' TERM; sleep 300 & echo $! >> {pids}; wait) & echo $! >> {pids}; "
        "sleep 300 & echo $! >> {pids}; echo started; wait")
GOALS = {"shell": "≤ 1 s", "stream": "≤ 1 s", "permission": "≤ 1 s", "queued": "≤ 1 s", "stdin": "≤ 5 s"}


def _slow_text() -> dict[str, Any]:
    from agent_server.offline import text_stream

    return text_stream("slow " * 2000, chunk_size=5, delay=0.02)


def _is(method: str, session: str | None = None):
    needle = f'"method":"{method}"'.encode()

    def check(raw: bytes) -> bool:
        if needle not in raw.replace(b": ", b":"):
            return False
        return session is None or session.encode() in raw
    return check


def _start(script: list[dict[str, Any]], state: Path, extra: dict[str, str] | None = None,
           init: dict[str, Any] = INIT) -> tuple[AgentProcess, Endpoint, str, Path]:
    """An agent on ``script``'s endpoint, initialized with ``init``, and a session in a fresh
    workspace: ``(agent, endpoint, session id, workspace)``."""
    state.mkdir(parents=True, exist_ok=True)
    endpoint = Endpoint(script)
    env = agent_env(str(state), endpoint.base_url, extra)
    ws = Path(tempfile.mkdtemp(prefix="ws-", dir=state))
    agent = AgentProcess(AGENT, env, cwd=str(ws))
    agent.request("initialize", init)
    _, _, result = agent.request("session/new", {"cwd": str(ws), "mcpServers": []})
    return agent, endpoint, result["sessionId"], ws


def _prompt(agent: AgentProcess, sid: str, text: str) -> tuple[int, int]:
    start = len(agent.lines)
    rid, _ = agent.send("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": text}]})
    return rid, start


def _floor(agent: AgentProcess) -> float:
    start = len(agent.lines)
    rid, sent = agent.send("agent-server/no-such-method", {})
    _, answered, _ = agent.wait(lambda raw: f'"id":{rid}'.encode() in raw.replace(b": ", b":"), start)
    return (answered - sent) * 1000


def _cancel(agent: AgentProcess, sid: str, rid: int, start: int) -> float:
    _, sent = agent.send("session/cancel", {"sessionId": sid}, notify=True)
    _, answered, message = agent.response(rid, start)
    assert message["result"]["stopReason"] == "cancelled", message
    return (answered - sent) * 1000


def _measure(script: list[dict[str, Any]], state: Path, runs: int, one: Callable[[AgentProcess, str, int], float],
             extra: dict[str, str] | None = None) -> tuple[list[float], list[float]]:
    """``runs`` runs of ``one(agent, session, i)`` in one agent, each followed by a floor round trip."""
    agent, endpoint, sid, _ = _start(script, state, extra)
    times, floor = [], []
    try:
        for i in range(runs):
            times.append(one(agent, sid, i))
            floor.append(_floor(agent))
    finally:
        agent.close()
        endpoint.finish()
    return times, floor


def _first_chunk(agent: AgentProcess, start: int) -> None:
    agent.wait(lambda raw: b"agent_message_chunk" in raw, start)


def shell(runs: int, state: Path) -> tuple[list[float], list[float]]:
    config = state / "full-access.toml"
    config.write_text('[policy]\ndefault_mode = "danger-full-access"\n')
    pid_files = [state / f"pids-{i}" for i in range(runs)]

    def one(agent: AgentProcess, sid: str, i: int) -> float:
        rid, start = _prompt(agent, sid, "run it")
        deadline = time.monotonic() + 60
        while not (pid_files[i].exists() and len(pid_files[i].read_text().split()) == 4):
            if time.monotonic() > deadline:
                raise TimeoutError("the command's tree never came up")
            time.sleep(0.01)
        return _cancel(agent, sid, rid, start)
    script = [bash_call(f"b{i}", TREE.format(pids=p)) for i, p in enumerate(pid_files)]
    return _measure(script, state, runs, one, {"AGENT_SERVER_CONFIG": str(config)})


def stream(runs: int, state: Path) -> tuple[list[float], list[float]]:
    def one(agent: AgentProcess, sid: str, i: int) -> float:
        rid, start = _prompt(agent, sid, "explain")
        _first_chunk(agent, start)
        return _cancel(agent, sid, rid, start)
    return _measure([_slow_text() for _ in range(runs)], state, runs, one)


def permission(runs: int, state: Path) -> tuple[list[float], list[float]]:
    def one(agent: AgentProcess, sid: str, i: int) -> float:
        rid, start = _prompt(agent, sid, "run echo")
        agent.wait(_is("session/request_permission"), start)
        return _cancel(agent, sid, rid, start)
    return _measure([bash_call(f"b{i}", "echo asked") for i in range(runs)], state, runs, one,
                    {"AGENT_SERVER_SANDBOX": "off"})


def queued(runs: int, state: Path) -> tuple[list[float], list[float]]:
    def one(agent: AgentProcess, sid: str, i: int) -> float:
        running, start = _prompt(agent, sid, "one")
        _first_chunk(agent, start)
        waiting, start2 = _prompt(agent, sid, "two")
        _, sent = agent.send("$/cancel_request", {"requestId": waiting}, notify=True)
        _, answered, message = agent.response(waiting, start2)
        assert message["result"]["stopReason"] == "cancelled", message
        _cancel(agent, sid, running, start)
        return (answered - sent) * 1000
    return _measure([_slow_text() for _ in range(runs)], state, runs, one)


def stdin(runs: int, state: Path) -> tuple[list[float], list[float]]:
    times, floor = [], []
    for i in range(runs):
        agent, endpoint, sid, _ = _start([_slow_text(), _slow_text()], state / f"stdin-{i}")
        try:
            _, start = _prompt(agent, sid, "one")
            _prompt(agent, sid, "two")
            _first_chunk(agent, start)
            floor.append(_floor(agent))  # after the first answer: the imports are done
            closed = time.time()
            agent.proc.stdin.close()
            agent.proc.wait(timeout=60)
            times.append((time.time() - closed) * 1000)
        finally:
            agent.close()
            endpoint.finish()
    return times, floor


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median": round(statistics.median(ordered), 1), "p90": round(ordered[(len(ordered) * 9) // 10], 1),
            "max": round(ordered[-1], 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    compile_package()
    out: dict[str, Any] = {"runs": args.runs}
    with tempfile.TemporaryDirectory(prefix="agent-server-cancel-bench-") as base:
        for name, measure in (("shell", shell), ("stream", stream), ("permission", permission),
                              ("queued", queued), ("stdin", stdin)):
            state = Path(base) / name
            state.mkdir()
            times, floor = measure(args.runs, state)
            out[name] = {**_summary(times), "floor": _summary(floor)["median"], "goal": GOALS[name]}
    if args.json:
        print(json.dumps(out))
        return
    for name in GOALS:
        r = out[name]
        print(f"{name:11} median {r['median']:7.1f} ms   p90 {r['p90']:7.1f}   max {r['max']:7.1f}   "
              f"floor {r['floor']:5.1f} ms   goal {r['goal']}")


if __name__ == "__main__":
    main()
