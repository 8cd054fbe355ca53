"""``bench/run.py --quick`` runs end to end, so the benchmark cannot rot (figures are not judged
here: timing goals belong to the benchmark, not to tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIGURES = {"initialize", "library_imports", "session_new", "first_request", "first_request_paused",
           "spawn_to_first_request", "read_total", "read_total_paused", "idle_rss",
           "read_total_zero_latency", "stream_paced", "stream_burst", "log_parse", "log_request", "load", "shell",
           "concurrent", "lsp_initialize", "lsp_first_code_action"}


def test_bench_quick_measures_every_figure(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--quick", "--runs", "1",
                           "--json", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert set(report["figures"]) == FIGURES
    for key, figure in report["figures"].items():
        assert figure["median"] > 0, key
    for key in ("initialize", "library_imports", "session_new", "first_request", "read_total", "read_total_paused",
                "shell", "lsp_initialize"):
        assert report["figures"][key]["floor_median"] > 0, key
    # every figure is cold (no warm spare): the prompt sent at once is a stretch row, not a goal
    assert report["figures"]["spawn_to_first_request"]["goal"].startswith("stretch")
    assert report["figures"]["first_request"]["goal"] == ""
    # the streamed text arrived whole (run.py raises otherwise) in at least one notification
    assert report["figures"]["stream_burst"]["notifications"] >= 1
    assert "| figure |" in proc.stdout
