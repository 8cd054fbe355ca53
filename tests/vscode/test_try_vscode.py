"""``bash scripts/try-vscode.sh --check``: code-server starts with the extension on a copy of the demo
project, the extension activates, its panel answers a prompt (offline endpoint, no model configured)."""

from __future__ import annotations

import os
import subprocess

from support.vscode_tools import REPO, find_tools


def test_try_vscode_check_activates_the_extension_and_the_panel_answers():
    find_tools()
    env = {k: v for k, v in os.environ.items()
           if k not in ("AGENT_SERVER_BASE_URL", "AGENT_SERVER_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY")}
    proc = subprocess.run(["bash", "scripts/try-vscode.sh", "--check"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "OFFLINE" in out  # said so
    assert "the extension activated" in out and "the panel answered" in out
