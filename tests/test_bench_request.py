"""``bench/request_cpu.py`` and ``bench/first_request_tls.py`` run end to end with tiny counts, so
they cannot rot (their figures are not judged here: timing goals belong to the benchmark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> dict:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_request_cpu_measures_the_request_against_its_encode():
    report = _run(str(ROOT / "bench" / "request_cpu.py"), "--requests", "3", "--rounds", "1")
    (tree,) = report["trees"].values()
    assert tree["request_ms"][0] > 0 and tree["encode_ms"][0] > 0 and tree["bytes"] > 100_000


def test_first_request_tls_measures_both_with_and_without_the_spare():
    report = _run(str(ROOT / "bench" / "first_request_tls.py"), "--runs", "1", "--latency-ms", "5")
    for level in ("client", "session"):
        assert report[level]["ahead_ms"] > 0 and report[level]["cold_ms"] > 0
