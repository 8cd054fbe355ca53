"""``bench/http_layers.py`` runs end to end (a few requests), so the HTTP layers' comparison cannot
rot. Its timings are not judged here: each layer's figures are there and positive."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_bench_http_layers_runs_every_layer_on_a_kept_connection():
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "http_layers.py"), "--requests", "3", "--rounds", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    layers = report["layers (min, median, max over rounds)"]
    assert set(layers) == {"chat_client", "httpx", "httpcore", "h11"}
    assert all(0 < v["to_send_ms"][0] <= v["whole_ms"][0] for v in layers.values()), layers
