"""``bash scripts/try-vscode.sh --check``: code-server starts with the extension on a copy of the demo
project, the extension activates, and its panel runs the whole demo task to its final answer with the
fix on disk (offline endpoint, no model configured)."""

from __future__ import annotations

import os
import signal
import subprocess

import pytest
from support.procs import descendants, pid_alive, wait_gone
from support.vscode_tools import REPO, find_tools


def test_try_vscode_check_fails_unless_the_demo_task_runs_to_its_final_answer_with_the_fix_on_disk():
    find_tools()
    env = {k: v for k, v in os.environ.items()
           if k not in ("AGENT_SERVER_BASE_URL", "AGENT_SERVER_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY")}
    proc = subprocess.run(["bash", "scripts/try-vscode.sh", "--check"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    assert "OFFLINE" in out  # said so
    assert "the extension activated" in out and "the panel answered" in out
    assert "the demo task ran to its end" in out  # a cancelled or half-done turn fails the check


@pytest.mark.parametrize("how", ["sighup", "driver_killed"])
def test_closing_the_terminal_of_try_vscode_left_code_server_running(how):
    """SIGHUP to the script's process group (what closing its terminal sends) stops code-server too,
    which runs in a process group of its own — and so does the script when its node driver dies
    before it could stop it (``kill -9`` of the driver)."""
    find_tools()
    env = {k: v for k, v in os.environ.items()
           if k not in ("AGENT_SERVER_BASE_URL", "AGENT_SERVER_API_KEY", "DEEPSEEK_API_KEY", "OPENAI_API_KEY")}
    proc = subprocess.Popen(["bash", "scripts/try-vscode.sh"], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    started: list[int] = []
    try:
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if "VS Code (code-server) with the agent-server extension:" in line:
                break
        else:
            raise AssertionError("try-vscode.sh ended before serving:\n" + "".join(seen)[-3000:])
        started = descendants(proc.pid)
        assert any("code-server" in _cmdline(pid) for pid in started), "no code-server among the script's children"
        if how == "sighup":
            os.killpg(proc.pid, signal.SIGHUP)
        else:
            (driver,) = [pid for pid in started if "serve.mjs" in _cmdline(pid)]
            os.kill(driver, signal.SIGKILL)
        proc.wait(timeout=60)
        if not wait_gone(started, 30):
            left = [pid for pid in started if pid_alive(pid)]
            raise AssertionError([(pid, _cmdline(pid)) for pid in left])
    finally:
        for pid in set(started) | set(descendants(proc.pid)):
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.stdout.close()


def _cmdline(pid: int) -> str:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
