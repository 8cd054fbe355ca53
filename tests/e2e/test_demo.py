"""The README's main job: the demo client runs the small real task offline (no key) and says so."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_demo_without_a_key_runs_offline_and_announces_it(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_SERVER_", "OPENAI_", "DEEPSEEK_"))}
    env["AGENT_SERVER_STATE_DIR"] = str(tmp_path / "state")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_client.py")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "OFFLINE DEMO" in out and "NOT a model" in out
    assert "stopReason: end_turn" in out
    workspace = Path([line for line in out.splitlines() if line.startswith("workspace: ")][0].split()[1])
    assert "    return a + b\n" in (workspace / "calc.py").read_text()  # the task really got done
    assert "[tool] Run the tests: failed" in out and "[tool] Run the tests: completed" in out
    log_line = [line for line in out.splitlines() if line.startswith("session log: ")][0]
    log = Path(log_line.split(": ", 1)[1])
    assert log.is_file() and '"type":"turn/end"' in log.read_text()
