"""bench/startup.py runs end to end against an ACP agent and reports sane figures."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "startup.py"


def test_startup_bench_json_summary(echo_agent_command):
    done = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "2", "--warmup", "0", "--json", "--", *echo_agent_command],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["runs"] == 2 and summary["command"] == echo_agent_command
    assert 0 < summary["min_ms"] <= summary["p10_ms"] <= summary["median_ms"] <= summary["p90_ms"] <= summary["max_ms"]


def test_startup_bench_reports_a_dead_agent(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--runs",
            "1",
            "--warmup",
            "0",
            "--timeout",
            "10",
            "--",
            sys.executable,
            "-c",
            "import sys; sys.stderr.write('boom'); sys.exit(4)",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "closed stdout" in done.stderr and "boom" in done.stderr
