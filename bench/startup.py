#!/usr/bin/env python3
"""Startup benchmark: time from spawning the agent to reading its ``initialize`` response.

Role: track how fast an editor gets a usable agent. Each run starts the agent fresh (own process
group, fresh temporary ``AGENT_SERVER_STATE_DIR``), writes one real ACP ``initialize`` request
(protocolVersion 1, fs capabilities and the ``_meta.agentServer`` extension block of docs/protocol.md)
and measures from just before ``Popen`` to the moment the response line (same id) is read from
stdout. Then it closes stdin and kills the process group. Prints median, p10 and p90 (ms).

    python bench/startup.py                       # 20 runs of `agent-server`
    python bench/startup.py --runs 50 -- python -m agent_server
    python bench/startup.py --json                # machine-readable summary

This is a benchmark, not a test: it has no pass/fail threshold.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": 1,
        "clientCapabilities": {
            "fs": {"readTextFile": True, "writeTextFile": True},
            "terminal": False,
            "_meta": {
                "agentServer": {
                    "version": 1,
                    "bufferVersions": True,
                    "applyWorkspaceEdit": True,
                    "positionEncodings": ["utf-16", "utf-8"],
                }
            },
        },
        "clientInfo": {"name": "agent-server-startup-bench", "version": "0.1.0"},
    },
}
INIT_LINE = (json.dumps(INITIALIZE, separators=(",", ":")) + "\n").encode()


def default_command() -> list[str]:
    """``agent-server`` from this interpreter's environment or PATH, else ``python -m agent_server``."""
    script = Path(sys.executable).with_name("agent-server")
    if script.exists():
        return [str(script)]
    found = shutil.which("agent-server")
    return [found] if found else [sys.executable, "-m", "agent_server"]


def bench_env(state_dir: str) -> dict[str, str]:
    """The agent's environment: ours, with a fresh state dir and (if unset) dummy model settings."""
    env = dict(os.environ)
    env["AGENT_SERVER_STATE_DIR"] = state_dir
    env.setdefault("AGENT_SERVER_BASE_URL", "http://127.0.0.1:9/v1")
    env.setdefault("AGENT_SERVER_API_KEY", "bench")
    env.setdefault("AGENT_SERVER_MODEL", "bench-model")
    return env


def kill_group(pid: int) -> None:
    """SIGKILL the agent's whole process group (ignore if already gone)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_response(proc: subprocess.Popen[bytes], deadline: float) -> tuple[float, dict]:
    """Read stdout lines until the response with id 1; returns (perf_counter at read, message)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buffer = b""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            raise TimeoutError("no initialize response before the timeout")
        ready, _, _ = select.select([fd], [], [], remaining)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            raise EOFError(f"agent closed stdout (exit status {proc.poll()})")
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            now = time.perf_counter()
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not protocol output; a conformance problem, but not this benchmark's
            if isinstance(message, dict) and message.get("id") == 1 and "method" not in message:
                return now, message


def one_run(command: list[str], timeout: float) -> float:
    """Seconds from just before Popen to the initialize response line; raises on failure."""
    with tempfile.TemporaryDirectory(prefix="agent-server-bench-") as tmp:
        state_dir = Path(tmp) / "state"
        state_dir.mkdir()
        env = bench_env(str(state_dir))
        stderr_path = Path(tmp) / "stderr.log"
        with stderr_path.open("wb") as stderr:
            start = time.perf_counter()
            proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=env,
                start_new_session=True,
            )
            try:
                assert proc.stdin is not None
                proc.stdin.write(INIT_LINE)
                proc.stdin.flush()
                end, message = read_response(proc, start + timeout)
                if "result" not in message:
                    raise RuntimeError(f"initialize failed: {message}")
                return end - start
            except (OSError, EOFError, TimeoutError, RuntimeError) as exc:
                tail = stderr_path.read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{command}: {exc}\n--- agent stderr (tail) ---\n{tail}") from exc
            finally:
                try:
                    proc.stdin.close()  # type: ignore[union-attr]
                except OSError:
                    pass
                try:
                    proc.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
                kill_group(proc.pid)
                proc.wait()


def percentile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 1]) of already sorted values."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    low = int(pos)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (pos - low)


def summarize(samples: list[float]) -> dict[str, float]:
    """Median, p10, p90, min, max and mean in milliseconds."""
    ordered = sorted(s * 1000 for s in samples)
    return {
        "runs": len(ordered),
        "median_ms": statistics.median(ordered),
        "p10_ms": percentile(ordered, 0.10),
        "p90_ms": percentile(ordered, 0.90),
        "min_ms": ordered[0],
        "max_ms": ordered[-1],
        "mean_ms": statistics.fmean(ordered),
    }


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="measured runs (default 20)")
    parser.add_argument("--warmup", type=int, default=1, help="unmeasured runs first (default 1: bytecode/page cache)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds allowed per run (default 30)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("command", nargs="*", help="agent command (after --); default: agent-server")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    command = args.command or default_command()

    samples = []
    try:
        for _ in range(args.warmup):
            one_run(command, args.timeout)
        for i in range(args.runs):
            samples.append(one_run(command, args.timeout))
            if not args.json:
                print(f"run {i + 1:2d}/{args.runs}: {samples[-1] * 1000:8.1f} ms", file=sys.stderr)
    except RuntimeError as exc:
        print(f"startup.py: {exc}", file=sys.stderr)
        return 1
    summary = summarize(samples)
    if args.json:
        print(json.dumps({"command": command, "warmup": args.warmup, **summary}))
    else:
        print(f"command: {' '.join(command)}")
        print(
            f"spawn -> initialize response over {summary['runs']} runs (after {args.warmup} warmup): "
            f"median {summary['median_ms']:.1f} ms, p10 {summary['p10_ms']:.1f} ms, p90 {summary['p90_ms']:.1f} ms "
            f"(min {summary['min_ms']:.1f}, max {summary['max_ms']:.1f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
