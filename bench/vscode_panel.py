"""The VS Code panel under a 2 MB answer (issue 30, item 1): driven by the code-server harness of
the end-to-end tests (clients/vscode/test/e2e/run.mjs, scenario ``stream_bench``), a real
agent-server, the model played by the offline endpoint.

Figures (goals in bench/README.md):
* lag: the panel shows the answer's last words this long after the server logged the step's end
  (the ``assistant`` event, written when the model's stream ended — the server sent its last chunk
  then);
* cancel: a click on Stop halfway through a second long answer → ``session/cancel`` arriving on the
  server's stdin (a tap between the extension and the server records the time);
* memory: the growth of the Chromium renderers' private memory (``/proc/<pid>/smaps_rollup``,
  Private_Clean + Private_Dirty) from before the answer to after it, the largest of the renderers.

With ``--burst KB`` instead (newcomer 3, finding 4): one answer of KB kilobytes of markdown paragraphs
sent by the model at once (4 KiB deltas, no pause, as a fast provider or a ``session/load`` replay
delivers it) — the longest stretch the webview's main thread was blocked while it rendered (a 10 ms
interval timer in the webview: the longest gap between ticks − 10 ms), and when its last words showed
after the prompt was sent.

With ``--code LINES`` instead (newcomer 6, finding 8): the same for an answer that is one fenced code
block of LINES lines, closed only at its end (a model printing a big file).

With ``--replay CARDS`` instead: a ``session/load`` replay of a session with CARDS tool cards (a step
of ~4 KB of markdown paragraphs and 3 ``read`` calls, CARDS / 3 steps) opened from the session picker —
the longest stretch the webview's main thread was blocked from the choice until the replay's last
words were drawn and nothing was left queued, as a ratio to the floor measured in the same run: the
same figure for the replay of a one-prompt session (its answer a line); the idle timer's own longest
gap (2 s, nothing happening) is reported beside it.

With ``--replay-mb MB`` instead (newcomer 4, finding 1): the same for a session whose one answer is MB
megabytes of one-line paragraphs, a prompt sent right after the choice — when the answer's last line and the
prompt's bubble were shown.

Needs ``bash scripts/setup-vscode.sh``. Usage: ``.venv/bin/python bench/vscode_panel.py [--mb 2 | --burst 750 | --code 30000 | --replay 300 | --replay-mb 2] [--json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTENSION = REPO / "clients" / "vscode"
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from agent_server.offline import OfflineEndpoint, ThreadedEndpoint, text_stream, tool_call_stream  # noqa: E402
from support.long_answer import markdown_lines  # noqa: E402  (the e2e test's long answer)

TAP = '''import os, subprocess, sys, threading, time
log = open(sys.argv[1], "a", buffering=1)
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=sys.stdout.buffer, stderr=sys.stderr)
for line in sys.stdin.buffer:
    if b'"session/cancel"' in line:
        log.write(f"{time.time()}\\n")
    child.stdin.write(line)
    child.stdin.flush()
child.stdin.close()
sys.exit(child.wait())
'''


def part(step: int, size: int) -> str:
    out, i, n = [], 0, 0
    while n < size:
        p = (f"Paragraph {step}.{i}: the answer goes on with **bold {step}.{i}** words and `code_{step}_{i}` "
             f"and more plain words to fill the line, as a long explanation from a model would.\n\n")
        out.append(p)
        n += len(p)
        i += 1
    return "".join(out)


def tools() -> dict[str, str]:
    env = Path(os.environ.get("AGENT_SERVER_TOOLS") or Path.home() / ".cache" / "agent-server-vscode") / "env.sh"
    values = {k: (shlex.split(v) or [""])[0] for k, v in (line.split("=", 1) for line in env.read_text().splitlines() if "=" in line)}
    values["VSIX"] = str(EXTENSION / "dist" / "agent-server-vscode.vsix")
    return values


def folders(prefix: str) -> tuple[Path, Path]:
    """A new temporary folder for one run, and the (empty) workspace folder in it."""
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    workspace = tmp / "workspace"
    workspace.mkdir()
    return tmp, workspace


def run_scenario(t: dict[str, str], tmp: Path, scenario: dict, server: Path, endpoint: ThreadedEndpoint,
                 state: Path, env: dict[str, str] | None = None) -> dict | None:
    """Run the code-server harness (run.mjs) on ``scenario`` in ``tmp``'s workspace, the panel's
    server started as ``server`` with its state in ``state`` (and ``env`` besides) and the model
    played by ``endpoint`` (stopped after); the scenario's results, or ``None`` (said on stderr) when it failed."""
    config = {
        "node": t["NODE24"], "codeServerEntry": t["CODE_SERVER_ENTRY"], "chromium": t["CHROMIUM"], "vsix": t["VSIX"],
        "workspace": str(tmp / "workspace"), "artifacts": str(tmp / "artifacts"), "tmp": str(tmp),
        "results": str(tmp / "results.json"), "stopOnFailure": True,
        "scenarios": [scenario],
        "settings": {"agentServer.path": str(server), "agentServer.baseUrl": endpoint.base_url},
        "env": {"AGENT_SERVER_STATE_DIR": str(state), "AGENT_SERVER_SANDBOX": "off",
                "AGENT_SERVER_API_KEY": "offline-bench-key", "AGENT_SERVER_MODEL": "offline-model",
                "AGENT_SERVER_CONTEXT_WINDOW": "100000000", **(env or {})},
    }
    (tmp / "config.json").write_text(json.dumps(config))
    try:
        proc = subprocess.run([t["NODE24"], str(EXTENSION / "test" / "e2e" / "run.mjs"), str(tmp / "config.json")],
                              cwd=REPO, capture_output=True, text=True, timeout=3600)
    finally:
        endpoint.stop()
    results = json.loads((tmp / "results.json").read_text())
    got = results["scenarios"].get(scenario["name"], {})
    if not got.get("ok"):
        print(f"the bench scenario failed: {got.get('error') or results.get('error')}\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    return got


def commit() -> str:
    """The short id of the commit measured."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=2.0, help="size of each long answer in MB (default 2)")
    ap.add_argument("--burst", type=float, default=0, metavar="KB",
                    help="instead: one answer of KB kilobytes sent at once; the webview's longest blocked stretch")
    ap.add_argument("--code", type=int, default=0, metavar="LINES",
                    help="instead: one answer that is one fenced code block of LINES lines, streamed; the webview's longest blocked stretch")
    ap.add_argument("--replay", type=int, default=0, metavar="CARDS",
                    help="instead: a session/load replay of a session with CARDS tool cards; the webview's longest blocked stretch")
    ap.add_argument("--replay-mb", type=float, default=0, metavar="MB",
                    help="instead: a session/load replay of one MB-megabyte answer, a prompt sent right after the choice")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.burst or args.code:
        return burst(args)
    if args.replay or args.replay_mb:
        return replay(args)
    t = tools()
    steps, tool_calls_per_step = 20, 3
    per_step = int(args.mb * 1_000_000 / steps)
    tmp, workspace = folders("vscode-bench-")
    for name in ("a.py", "b.py", "c.py"):
        (workspace / name).write_text(f"# {name}\n")
    end = "BENCH-ANSWER-END"

    def answer(prefix: str) -> list[dict]:
        return [*(tool_call_stream([(f"{prefix}{k}.{j}", "read", json.dumps({"path": n}))
                                    for j, n in enumerate(("a.py", "b.py", "c.py"))], text=part(k, per_step))
                  for k in range(steps)),
                text_stream(f"{end} {prefix}")]

    endpoint = ThreadedEndpoint(OfflineEndpoint())
    for response in answer("x") + answer("y"):
        endpoint.push(response)
    server = REPO / ".venv" / "bin" / "agent-server"
    tap_log = tmp / "cancel-times.txt"
    (tmp / "tap.py").write_text(TAP)
    wrapper = tmp / "agent-server-tap"
    wrapper.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(tmp / 'tap.py'))} "
                       f"{shlex.quote(str(tap_log))} {shlex.quote(str(server))} \"$@\"\n")
    wrapper.chmod(0o755)
    state = tmp / "state"
    got = run_scenario(t, tmp, {"name": "stream_bench", "prompt": "Explain at length", "answer": f"{end} x",
                                "stopPrompt": "Explain again", "stopAtTools": steps * tool_calls_per_step * 3 // 2},
                       wrapper, endpoint, state)
    if got is None:
        return 1
    # the first turn's last step: the server logged its end when the model's stream ended
    events = [json.loads(line) for f in state.glob("sessions/*/events.jsonl") for line in f.read_text().splitlines()]
    first_turn_end = max(e["time"] for e in events if e["type"] == "assistant" and e["data"].get("turn", 1) == 1
                         and any(end in str(b) for b in [e["data"]]))
    lag = got["lastShownAt"] / 1000 - first_turn_end
    cancels = [float(x) for x in tap_log.read_text().split()]
    cancel = min(c for c in cancels if c >= got["stopClickedAt"] / 1000 - 0.5) - got["stopClickedAt"] / 1000
    idle, after = got["memory"]["idle"], got["memory"]["after"]
    growth = max(after.get(pid, 0) - idle.get(pid, 0) for pid in after) / 1024
    figures = {"mb": args.mb, "tool_calls": steps * tool_calls_per_step, "last_chunk_lag_s": round(lag, 3),
               "stop_to_cancel_ms": round(cancel * 1000, 1), "renderer_private_growth_mib": round(growth, 1),
               "first_answer_s": None, "commit": commit()}
    turn_start = min(e["time"] for e in events if e["type"] == "turn/start")
    figures["first_answer_s"] = round(got["lastShownAt"] / 1000 - turn_start, 1)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{args.mb} MB answer, {figures['tool_calls']} tool calls: the panel showed the last chunk "
              f"{figures['last_chunk_lag_s']} s after the server sent it (turn {figures['first_answer_s']} s); "
              f"Stop → session/cancel {figures['stop_to_cancel_ms']} ms; renderer private memory "
              f"+{figures['renderer_private_growth_mib']} MiB")
    return 0


def burst(args: argparse.Namespace) -> int:
    """``--burst KB``: one answer of KB kilobytes at once; how long the webview was blocked."""
    t = tools()
    tmp, _ = folders("vscode-burst-")
    end = "BURST-ANSWER-END"
    if args.code:  # newcomer 6 finding 8: a model printing a big file — one block, closed only at the end
        lines = "".join(f"def f{n}(x):  return x * {n} + len('<b>{n}</b>')  # c\n" for n in range(args.code))
        text = f"Here:\n\n```python\n{lines}```\n\n{end}"
    else:
        text = part(0, int(args.burst * 1000)) + end
    endpoint = ThreadedEndpoint(OfflineEndpoint())
    endpoint.push(text_stream(text, chunk_size=4096))
    got = run_scenario(t, tmp, {"name": "burst_bench", "prompt": "Explain at once", "answer": end},
                       REPO / ".venv" / "bin" / "agent-server", endpoint, tmp / "state")
    if got is None:
        return 1
    figures = {"kb": args.burst or round(len(text) / 1000), "code_lines": args.code, "max_blocked_ms": round(got["maxBlockedMs"], 1), "p95_blocked_ms": round(got["p95BlockedMs"], 1),
               "shown_after_s": round((got["lastShownAt"] - got["sentAt"]) / 1000, 2), "load": round(os.getloadavg()[0], 1),
               "commit": commit()}
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{figures['kb']:g} KB answer at once{f' (one code block of {args.code} lines)' if args.code else ''}: the webview was blocked at most {figures['max_blocked_ms']} ms "
              f"(p95 {figures['p95_blocked_ms']} ms); last words shown {figures['shown_after_s']} s after the prompt "
              f"(load {figures['load']})")
    return 0


def replay(args: argparse.Namespace) -> int:
    """``--replay CARDS``: the replay of a session with CARDS tool cards, against a one-prompt session's."""
    t = tools()
    tmp, workspace = folders("vscode-replay-")
    for name in ("a.py", "b.py", "c.py"):
        (workspace / name).write_text(f"# {name}\n")
    steps = max(1, args.replay // 3) if not args.replay_mb else 0
    end, short_end, during_end = "REPLAY-ANSWER-END", "SHORT-ANSWER-END", "DURING-ANSWER-END"
    endpoint = ThreadedEndpoint(OfflineEndpoint())
    endpoint.push(text_stream(f"Hello. {short_end}"))
    for k in range(steps):
        endpoint.push(tool_call_stream([(f"r{k}.{j}", "read", json.dumps({"path": n})) for j, n in enumerate(("a.py", "b.py", "c.py"))],
                                       text=part(k, 4000), args_chunk_size=64))
    if args.replay_mb:  # newcomer 4, finding 1: one long answer of short paragraphs and a heading every 50
        endpoint.push(text_stream(markdown_lines(int(args.replay_mb * 1_000_000)) + end, chunk_size=1400))
        endpoint.push(text_stream(f"Answered during the replay. {during_end}"))
    else:
        endpoint.push(text_stream(part(steps, 4000) + end, chunk_size=4096))
    (tmp / "config.toml").write_text(f"[agent]\nmax_steps_per_turn = {steps + 10}\n")
    scenario = {"name": "replay_bench", "shortPrompt": "Say hello", "shortAnswer": short_end,
                "prompt": "Read everything and explain", "answer": end}
    if args.replay_mb:
        scenario |= {"during": "Sent during the replay", "duringAnswer": during_end}
    got = run_scenario(t, tmp, scenario, REPO / ".venv" / "bin" / "agent-server", endpoint, tmp / "state",
                       {"AGENT_SERVER_CONFIG": str(tmp / "config.toml")})
    if got is None:
        return 1
    floor = max(got["short"]["maxBlockedMs"], 1.0)
    figures = {"cards": steps * 3, "answer_mb": args.replay_mb, "during_prompt_shown_s": None if got["long"].get("duringShownMs") is None
               else round(got["long"]["duringShownMs"] / 1000, 2), "max_blocked_ms": round(got["long"]["maxBlockedMs"], 1),
               "p95_blocked_ms": round(got["long"]["p95BlockedMs"], 1), "replay_drawn_s": round(got["long"]["tookMs"] / 1000, 2),
               "floor_ms": round(got["short"]["maxBlockedMs"], 1), "ratio": round(got["long"]["maxBlockedMs"] / floor, 2),
               "idle_max_gap_ms": round(got["idle"]["maxBlockedMs"], 1), "cards_in_dom": got["cards"],
               "load": round(os.getloadavg()[0], 1), "commit": commit()}
    if args.json:
        print(json.dumps(figures))
    else:
        what = f"a {args.replay_mb:g} MB answer" if args.replay_mb else f"{figures['cards']} tool cards"
        during = f"; the prompt sent at the choice shown after {figures['during_prompt_shown_s']} s" if args.replay_mb else ""
        print(f"session/load of {what}: the webview was blocked at most {figures['max_blocked_ms']} ms "
              f"(p95 {figures['p95_blocked_ms']} ms), {figures['ratio']} x the one-prompt replay's {figures['floor_ms']} ms "
              f"(idle: {figures['idle_max_gap_ms']} ms); drawn {figures['replay_drawn_s']} s after the choice{during} (load {figures['load']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
