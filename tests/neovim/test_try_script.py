"""``bash scripts/try-neovim.sh --check``: headless Neovim with the plugin runs the demo task against
the offline endpoint (no model configured) to the end, and the fix lands; the endpoint it starts serves
a second ask too."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from support.timeouts import HANG

from agent_server.offline.demo_task import demo_task_script

ROOT = Path(__file__).resolve().parents[2]
MODEL_VARIABLES = ("AGENT_SERVER_API_KEY", "AGENT_SERVER_BASE_URL", "AGENT_SERVER_MODEL", "AGENT_SERVER_PROFILE",
                   "DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


def try_env(tmp_path: Path) -> dict[str, str]:
    """No model configured; the runs' folders, Neovim's socket folder and the config under ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if k not in MODEL_VARIABLES}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env.update(XDG_CONFIG_HOME=str(tmp_path / "config"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               TMPDIR=str(tmp_path / "tmp"), AGENT_SERVER_STATE_DIR=str(tmp_path / "state"))  # the state: as before
    return env


def runs(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "cache" / "agent-server" / "try-neovim").glob("neovim-*"))


def socket_folders_left(tmp_path: Path) -> list[str]:
    """What Neovim left in ``$TMPDIR``: its per-user folder holds a folder per instance, with its socket."""
    return sorted(str(p) for p in (tmp_path / "tmp").glob("nvim.*/*"))


def test_try_neovim_check_runs_the_demo_task_offline_to_the_end_with_each_message_on_its_own_line(tmp_path):
    env = try_env(tmp_path)
    run = subprocess.run(["bash", "scripts/try-neovim.sh", "--check"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=600)  # as a terminal shows both
    out = run.stdout
    assert run.returncode == 0, out
    # the diff view's hint was glued to the chat's header: "…]h [h<!-- agent-server · idle …"
    assert "\n<!-- agent-server · " in out and "[h<!--" not in out, out[:3000]
    assert "OFFLINE DEMO" in out and "It is NOT a model" in out  # said on screen
    assert "## You\nThe tests in this project fail." in out  # the chat is printed
    assert "✓ Edit calc.py" in out and "Edit calc.py: applied and saved" in out
    assert "    return a + b" in out and "calc.py saved: true" in out
    assert "_— stop: end_turn —_" in out and "try-neovim --check: PASS" in out
    assert "(--check typed the prompt in the chat's prompt area and pressed <CR>)" in out
    assert "calc.py on disk: one BOM, kept" in out
    (folder,) = runs(tmp_path)
    workspace = folder / "workspace"
    assert "return a + b" in (workspace / "calc.py").read_text()
    assert (workspace / "calc.py").read_bytes().startswith(b"\xef\xbb\xbf\"\"\"A tiny")  # one BOM, before the text


def test_try_neovim_left_its_run_in_the_clone_and_neovims_socket_folder_behind(tmp_path):
    """Each ``try-neovim.sh`` run left a workspace copy and its sessions in the clone's ``.demo-state``
    (never removed, and inside the clone's Git work tree), and ``--check`` left the folder Neovim makes
    for its socket in ``$TMPDIR`` (it ended with ``os.exit()``). A run's folder is made outside the
    clone and the earlier ones are pruned (``--clean``: all); Neovim exits as Neovim does."""
    demo_state = ROOT / ".demo-state"
    load_prune().prune_old_demo_state(demo_state)  # what older runs left there goes (as the run does)
    before = sorted(demo_state.iterdir()) if demo_state.is_dir() else []
    env = try_env(tmp_path)
    run = subprocess.run(["bash", "scripts/try-neovim.sh", "--check"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, timeout=600)
    assert run.returncode == 0, run.stdout
    assert (sorted(demo_state.iterdir()) if demo_state.is_dir() else []) == before
    assert socket_folders_left(tmp_path) == [], run.stdout
    (folder,) = runs(tmp_path)
    assert f"This run's folder (workspace copy, state): {folder}" in run.stdout
    assert list((folder / "state" / "sessions").glob("sess_*/events.jsonl"))  # the run's sessions are its own
    clean = subprocess.run(["bash", "scripts/try-neovim.sh", "--clean"], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=600)
    assert clean.returncode == 0, clean.stderr
    assert runs(tmp_path) == [] and "Removed 1 earlier run folder(s)" in clean.stdout, clean.stdout


def test_try_neovim_stopped_by_sigterm_left_neovim_and_the_offline_endpoint_running(tmp_path):
    """``kill`` of the script (or its terminal closed) ended the Python driver alone: the headless
    Neovim, the offline endpoint and the agent-server went on running. Every process of the run
    stops with it (a subreaper catches any left), and Neovim removes its socket folder."""
    env = try_env(tmp_path)
    report = tmp_path / "left.json"
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "support" / "subreaper.py"), str(report), "--",
                             "bash", "scripts/try-neovim.sh", "--check"], cwd=ROOT, env={**env, "SUBREAPER_WITHIN": "10"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 300
        # the turn has started once its session's log exists (in the run's folder, or the old shared state)
        while not [*(tmp_path / "cache").glob("**/sessions/sess_*/events.jsonl"),
                   *(tmp_path / "state").glob("sessions/sess_*/events.jsonl")]:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
            time.sleep(0.05)
        (driver,) = [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == proc.pid]
        os.kill(driver, signal.SIGTERM)
        out, _ = proc.communicate(timeout=HANG + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads(report.read_text()) == [], out
    assert proc.returncode == 128 + signal.SIGTERM, out
    assert socket_folders_left(tmp_path) == [], out


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2:].split()[1])


def test_try_neovim_offline_endpoint_answers_a_second_ask_instead_of_http_500(tmp_path):
    spec = importlib.util.spec_from_file_location("try_neovim", ROOT / "scripts" / "try_neovim.py")
    try_neovim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(try_neovim)
    proc, url = try_neovim.start_offline_endpoint(tmp_path)
    try:
        body = json.dumps({"model": "offline-demo", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
        statuses = []
        for _ in range(len(demo_task_script()) + 1):  # the whole demo task, then the first step of a second ask
            request = urllib.request.Request(url + "/chat/completions", data=body.encode(),
                                             headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
                    statuses.append(response.status)
            except urllib.error.HTTPError as exc:
                statuses.append(exc.code)
        assert statuses == [200] * len(statuses)
    finally:
        proc.kill()
        proc.wait()


def test_try_scripts_demo_restarts_from_its_first_step_after_a_cancelled_turn(tmp_path):
    """try-neovim and try-vscode's offline demo is answered by step: the ask after a turn cancelled
    (or a server killed) mid-task starts the demo task again; with "loop" it went on mid-script."""
    spec = importlib.util.spec_from_file_location("try_neovim", ROOT / "scripts" / "try_neovim.py")
    try_neovim = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(try_neovim)
    assert "write_demo_script(" in (ROOT / "scripts" / "try-vscode.sh").read_text()  # the same script
    proc, url = try_neovim.start_offline_endpoint(tmp_path)

    def ask(messages):
        body = json.dumps({"model": "offline-demo", "stream": True, "messages": messages}).encode()
        request = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()

    try:
        user = {"role": "user", "content": "fix the tests"}
        first = ask([user])
        call = {"role": "assistant", "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}]}
        second = ask([user, call, {"role": "tool", "tool_call_id": "c1", "content": "..."}])
        assert second != first
        # the user cancels here; the next ask is a new turn
        again = ask([user, call, {"role": "tool", "tool_call_id": "c1", "content": "cancelled"},
                     {"role": "user", "content": "try again"}])
        assert again == first
    finally:
        proc.kill()
        proc.wait()


def load_prune():
    spec = importlib.util.spec_from_file_location("prune_try_runs", ROOT / "scripts" / "prune_try_runs.py")
    prune = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(prune)
    return prune


def old_run(demo_state: Path, name: str) -> Path:
    """A workspace copy as a ``try-neovim.sh`` run before e9cf9e6 made it in ``.demo-state``."""
    from agent_server.offline.demo_task import write_project

    return write_project(demo_state / name)


def test_try_neovim_left_the_demo_state_folders_of_its_older_runs_in_the_clone(tmp_path):
    """Runs before e9cf9e6 made a workspace copy per run (``nvim-workspace-<date>-<time>-<pid>``) and
    its sessions in the clone's ``.demo-state``; the runs since never removed them. They go now —
    theirs only: the demo client's copies and sessions, a folder that only looks like one, a copy in
    use, a session whose log is open, and the shared offline script stay."""
    from agent_server.session.store import SessionStore

    prune = load_prune()
    demo_state = (tmp_path / ".demo-state").resolve()
    first = old_run(demo_state, "nvim-workspace-20261130-101500-4242")
    second = old_run(demo_state, "nvim-workspace-20261201-080000-77")
    busy = old_run(demo_state, "nvim-workspace-20261202-090000-78")
    lookalike = demo_state / "nvim-workspace-20261203-090000-79"  # not the demo project: not a run's
    lookalike.mkdir()
    (lookalike / "notes.txt").write_text("mine")
    client_copy = old_run(demo_state, "workspace-20261201-080000-abcd")  # demo_client.py's
    outside = old_run(tmp_path, "elsewhere")
    (demo_state / "nvim-workspace-20261204-090000-80").symlink_to(outside)  # a link: never followed
    (demo_state / "offline-demo-task-script.json").write_text("{}")  # demo_client.py writes it too
    (demo_state / "try-neovim.json").write_text(json.dumps({"plugin": "/p", "workspace": str(second)}))
    store = SessionStore(demo_state)
    sessions = {}
    for name, cwd in [("first", first), ("second", second), ("busy", busy), ("client", client_copy),
                      ("gone_earlier", demo_state / "nvim-workspace-20261101-000000-1"), ("open", first)]:
        sid, log = store.create({"cwd": str(cwd)})
        if name != "open":
            log.close()
        else:
            held = log  # another agent-server still serving it
        sessions[name] = demo_state / "sessions" / sid
    holder = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], cwd=busy, stdin=subprocess.PIPE)
    try:
        removed, in_use = prune.prune_old_demo_state(demo_state)
    finally:
        holder.communicate(b"")
        held.close()
    assert in_use == [busy] and busy.is_dir()
    assert not first.exists() and not second.exists()
    assert not sessions["first"].exists() and not sessions["second"].exists()
    assert not sessions["gone_earlier"].exists()  # its copy was removed by hand earlier: recognisably theirs
    assert not (demo_state / "try-neovim.json").exists()
    assert set(removed) == {first, second, sessions["first"], sessions["second"], sessions["gone_earlier"],
                            demo_state / "try-neovim.json"}
    # everything else is still there, as it was
    assert sessions["busy"].is_dir() and sessions["client"].is_dir() and sessions["open"].is_dir()
    assert (lookalike / "notes.txt").read_text() == "mine" and (client_copy / "calc.py").is_file()
    assert (demo_state / "nvim-workspace-20261204-090000-80").is_symlink() and (outside / "calc.py").is_file()
    assert (demo_state / "offline-demo-task-script.json").read_text() == "{}"
    assert sorted(e.session_id for e in store.listing()) == sorted(
        p.name for p in (sessions["busy"], sessions["client"], sessions["open"]))


def test_try_neovim_clean_removes_an_older_runs_copy_from_the_clones_demo_state(tmp_path):
    """The script itself does it (a run, or ``--clean``), in the clone's own ``.demo-state``."""
    demo_state = ROOT / ".demo-state"
    made = not demo_state.exists()
    before = sorted(demo_state.iterdir()) if demo_state.is_dir() else []
    folder = old_run(demo_state, f"nvim-workspace-19990101-000000-{os.getpid()}")
    try:
        clean = subprocess.run([sys.executable, "scripts/try_neovim.py", "--clean"], cwd=ROOT, env=try_env(tmp_path),
                               capture_output=True, text=True, timeout=600)
        assert clean.returncode == 0, clean.stderr
        assert not folder.exists() and "earlier try-neovim runs left in" in clean.stdout, clean.stdout
        assert sorted(demo_state.iterdir()) == [p for p in before if p.exists()]
    finally:
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        if made and demo_state.is_dir() and not any(demo_state.iterdir()):
            demo_state.rmdir()
