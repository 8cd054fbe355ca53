"""``bash scripts/try-neovim.sh --check``: headless Neovim with the plugin runs the demo task against
the offline endpoint (no model configured) to the end, and the fix lands."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODEL_VARIABLES = ("AGENT_SERVER_API_KEY", "AGENT_SERVER_BASE_URL", "AGENT_SERVER_MODEL", "AGENT_SERVER_PROFILE",
                   "DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


def test_try_neovim_check_runs_the_demo_task_offline_to_the_end(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES}
    env.update(AGENT_SERVER_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "config"))
    run = subprocess.run(["bash", "scripts/try-neovim.sh", "--check"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=600)
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "OFFLINE DEMO" in out and "It is NOT a model" in out  # said on screen
    assert "## You\nThe tests in this project fail." in out  # the chat is printed
    assert "✓ Edit calc.py" in out and "Edit calc.py: applied and saved" in out
    assert "    return a + b" in out and "calc.py saved: true" in out
    assert "_— stop: end_turn —_" in out and "try-neovim --check: PASS" in out
    (workspace,) = (tmp_path / "state").glob("nvim-workspace-*")
    assert "return a + b" in (workspace / "calc.py").read_text()
