"""A newcomer's path (issue 10 §3): the real ``agent-server`` command, as someone trying it from a
terminal meets it — headless runs, the offline try-out, stored sessions, slash commands, output."""

from __future__ import annotations

import contextlib
import importlib.util

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.sessions import call
from support.timeouts import HANG

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.offline.demo_task import DEMO_TASK_PROMPT, write_project

AGENT = [sys.executable, "-m", "agent_server"]
ROOT = Path(__file__).resolve().parents[2]


def run(env, *args, timeout=HANG, **kw):
    return subprocess.run([*AGENT, "run", *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout, stdin=kw.pop("stdin", subprocess.DEVNULL), **kw)


def agent(env, *args, timeout=HANG):
    return subprocess.run([*AGENT, *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def session_of(stderr):
    return [line for line in stderr.splitlines() if line.startswith("[session ")][0].split()[1].rstrip("]")


class Terminal:
    """``agent-server`` with stdin and stderr on a pseudo-terminal (stdout a pipe)."""

    def __init__(self, argv, env):
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(argv, env={**os.environ, **env}, stdin=slave, stderr=slave,
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        os.close(slave)
        self.seen = ""

    def read_until(self, pattern, timeout=HANG):
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.seen):
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{pattern!r} never appeared on the terminal; saw:\n{self.seen}")
            ready, _, _ = select.select([self.master], [], [], left)
            if ready:
                try:
                    self.seen += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:  # the child closed the terminal
                    raise AssertionError(f"{pattern!r} never appeared; the terminal closed; saw:\n{self.seen}")
        return self.seen

    def type(self, text):
        os.write(self.master, text.encode())

    def finish(self, timeout=HANG):
        out, _ = self.proc.communicate(timeout=timeout)
        try:
            while select.select([self.master], [], [], 0.2)[0]:
                self.seen += os.read(self.master, 65536).decode("utf-8", "replace")
        except OSError:
            pass
        os.close(self.master)
        return out

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


# -- a: why a call failed, and the terminal prompt --------------------------------------------------


def test_headless_run_says_a_call_failed_but_not_why(agent_env, workspace, tmp_path):
    (workspace / "build").mkdir()
    outside = tmp_path / "outside.txt"
    script = [tool_call_stream([call("rm", "bash", command="rm -rf build"),
                                call("out", "write", path=str(outside), content="x")]),
              text_stream("could not")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "clean", "--cwd", str(workspace))
    assert done.returncode == 0, done.stderr
    assert (workspace / "build").is_dir() and not outside.exists()
    lines = done.stderr.splitlines()
    (rm_line,) = [line for line in lines if line.startswith("[tool] Run `rm -rf build`: failed")]
    assert "rerun with `--allow shell`" in rm_line
    (out_line,) = [line for line in lines if line.startswith("[tool] Write") and "failed" in line]
    assert "outside the workspace" in out_line
    with OfflineEndpoint.start_in_thread([tool_call_stream([call("w", "write", path="a.txt", content="x")]),
                                          text_stream("no")]) as ep:
        ro = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "write", "--cwd", str(workspace),
                 "--mode", "read-only")
    (ro_line,) = [line for line in ro.stderr.splitlines() if line.startswith("[tool] Write a.txt: failed")]
    assert "read-only mode" in ro_line


def test_typo_at_the_terminal_permission_prompt_rejects_instead_of_asking_again(agent_env, workspace):
    (workspace / "build").mkdir()
    with OfflineEndpoint.start_in_thread([tool_call_stream([call("rm", "bash", command="rm -rf build")]),
                                          text_stream("cleaned")]) as ep:
        term = Terminal([*AGENT, "run", "-p", "clean", "--cwd", str(workspace)],
                        {**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url})
        try:
            term.read_until(r"allow \[o\]nce.*\? ")
            term.type("y\n")  # not one of the letters
            term.read_until(r"(?s)please type one of.*allow \[o\]nce.*\? ")  # asked again
            term.type("o\n")
            out = term.finish()
        finally:
            term.kill()
    assert term.proc.returncode == 0, term.seen
    assert not (workspace / "build").exists() and out.strip() == "cleaned"


def test_terminal_input_ended_at_the_permission_prompt_is_no_answer_not_the_users_rejection(
        agent_env, workspace, agent_state_dir):
    (workspace / "build").mkdir()
    with OfflineEndpoint.start_in_thread([tool_call_stream([call("rm", "bash", command="rm -rf build")]),
                                          text_stream("could not")]) as ep:
        term = Terminal([*AGENT, "run", "-p", "clean", "--cwd", str(workspace)],
                        {**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url})
        try:
            seen = term.read_until(r"allow \[o\]nce.*\? ")
            term.type("\x04")  # Ctrl-D: the terminal's input ends
            out = term.finish()
        finally:
            term.kill()
    assert (workspace / "build").is_dir() and out.strip() == "could not"
    assert "```" not in seen and "deletes a folder tree" in seen  # the reason on its own line, no markdown fence
    assert re.search(r"\n {4}rm -rf build\r?\n", seen), seen  # the command shown as a block of its own
    sid = re.search(r"\[session (\S+)\]", term.seen).group(1)
    log = [json.loads(line) for line in (agent_state_dir / "sessions" / sid / "events.jsonl").read_text().splitlines()]
    (decision,) = [e["data"] for e in log if e["type"] == "policy/decision"]
    assert decision["outcome"] == "deny" and decision["decided_by"] == "fail-closed:unavailable"
    (result,) = [e["data"] for e in log if e["type"] == "tool/result"]
    assert "no terminal input" in result["content"] and "no answer could be read" in result["content"]
    assert "Rejected by the user" not in result["content"] and "chose" not in result["content"]


# -- b: the offline try-out ------------------------------------------------------------------------


def test_offline_try_out_endpoint_serves_the_demo_task_only_once(agent_env, tmp_path):
    first = tmp_path / "first"
    proc = subprocess.Popen([sys.executable, "-m", "agent_server.offline", "--script", "demo-task",
                             "--project", str(first)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), proc.stderr.read()
        env = {**agent_env, "AGENT_SERVER_BASE_URL": url, "AGENT_SERVER_MODEL": "offline-demo"}
        second = write_project(tmp_path / "second")
        for project in (first, second):
            done = run(env, "-p", DEMO_TASK_PROMPT, "--cwd", str(project), "--allow", "shell", timeout=120)
            assert done.returncode == 0, done.stderr
            assert "return a + b" in (project / "calc.py").read_text()
            assert subprocess.run([sys.executable, "test_calc.py"], cwd=project).returncode == 0
            assert "Fixed: `add` in calc.py" in done.stdout
    finally:
        proc.terminate()
        proc.wait(timeout=HANG)


def test_offline_project_into_a_folder_with_files_is_refused_and_overwrites_nothing(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "calc.py").write_text("my own work\n")
    done = subprocess.run([sys.executable, "-m", "agent_server.offline", "--script", "demo-task", "--project", str(mine)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not empty" in done.stderr and done.stdout == ""
    assert (mine / "calc.py").read_text() == "my own work\n" and not (mine / "test_calc.py").exists()


def test_demo_started_twice_in_the_same_second_gets_two_workspaces(tmp_path):
    spec = importlib.util.spec_from_file_location("demo_client", ROOT / "scripts" / "demo_client.py")
    demo_client = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo_client)
    first, second = demo_client.fresh_workspace(tmp_path), demo_client.fresh_workspace(tmp_path)
    assert first != second and first.parent == second.parent == tmp_path
    assert first.name[:len("workspace-20261202-")] == second.name[:len("workspace-20261202-")]
    for folder in (first, second):
        assert sorted(p.name for p in folder.iterdir()) == ["calc.py", "test_calc.py"]


# -- c: stored sessions ----------------------------------------------------------------------------


def test_no_way_to_list_sessions_or_replay_one_by_id(agent_env, workspace, agent_state_dir):
    with OfflineEndpoint.start_in_thread([text_stream("hello")]) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "Say hello\nplease",
                   "--cwd", str(workspace))
    sid = session_of(done.stderr)
    listed = agent(agent_env, "sessions")
    assert listed.returncode == 0, listed.stderr
    (row,) = [line for line in listed.stdout.splitlines() if sid in line]
    log = agent_state_dir / "sessions" / sid / "events.jsonl"
    assert "Say hello" in row and str(workspace) in row and str(log) in row and re.search(r"\bago\b|just now", row)
    as_json = json.loads(agent(agent_env, "sessions", "--json").stdout.splitlines()[0])
    assert (as_json["sessionId"], as_json["cwd"], as_json["log"]) == (sid, str(workspace), str(log))
    by_id = agent(agent_env, "replay", sid, "--json")
    by_path = agent(agent_env, "replay", str(log), "--json")
    assert by_id.returncode == 0 and by_id.stdout == by_path.stdout and by_id.stdout.strip()
    assert agent(agent_env, "replay", "sess_missing").returncode == 1


def test_run_failing_before_its_first_model_request_leaves_an_empty_session(agent_env, workspace, agent_state_dir):
    env = {**agent_env, "AGENT_SERVER_MODEL": "", "AGENT_SERVER_BASE_URL": "", "AGENT_SERVER_PROFILE": "custom"}
    done = run(env, "-p", "hi", "--cwd", str(workspace))
    assert done.returncode == 1 and "no model endpoint configured" in done.stderr
    assert list((agent_state_dir / "sessions").glob("*/events.jsonl")) == []
    assert "no stored session" in agent(agent_env, "sessions").stdout.lower()


# -- d: started on a terminal ----------------------------------------------------------------------


def test_server_started_on_a_terminal_waits_without_a_word(agent_env):
    term = Terminal(AGENT, agent_env)
    try:
        seen = term.read_until(r"run -p")
        assert "waiting for an ACP client" in seen
        term.type("\x04")  # end of input: the server exits
        term.finish()
    finally:
        term.kill()


# -- e: slash commands -----------------------------------------------------------------------------


def test_compact_on_a_short_session_reports_a_context_window_error(agent_env, workspace):
    with OfflineEndpoint.start_in_thread([]) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "/compact", "--cwd", str(workspace))
        assert ep.requests == []
    assert done.returncode == 0, done.stderr
    assert "Nothing to compact yet" in done.stdout and "too large" not in done.stdout


def test_unknown_slash_command_goes_to_the_model(agent_env, workspace):
    with OfflineEndpoint.start_in_thread([]) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "/compcat", "--cwd", str(workspace))
        assert ep.requests == []
    assert done.returncode == 0, done.stderr
    assert "Unknown command /compcat" in done.stdout
    assert all(f"/{name}" in done.stdout for name in ("mode", "model", "usage", "init", "compact"))
    with OfflineEndpoint.start_in_thread([text_stream("it is a file")]) as ep:  # a path is still a prompt
        path = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "/etc/hosts: what is it?",
                   "--cwd", str(workspace))
        assert len(ep.requests) == 1 and path.stdout.strip() == "it is a file"


def test_mode_bogus_is_answered_as_a_success(agent_env, workspace):
    done = run(agent_env, "-p", "/mode bogus", "--cwd", str(workspace))
    assert done.returncode == 2
    assert "bogus" in done.stderr and "read-only" in done.stderr


# -- f: the README tells the truth -----------------------------------------------------------------


def test_readme_config_file_order_differs_from_the_code(agent_env, workspace, tmp_path):
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`--config PATH`, else `AGENT_SERVER_CONFIG`, else `$XDG_CONFIG_HOME/agent-server/config.toml`" in readme
    xdg = tmp_path / "xdg"
    (xdg / "agent-server").mkdir(parents=True)
    (xdg / "agent-server" / "config.toml").write_text("bad = 1\n")
    named = tmp_path / "named.toml"
    named.write_text("worse = 1\n")
    given = tmp_path / "given.toml"
    given.write_text("worst = 1\n")
    env = {**agent_env, "XDG_CONFIG_HOME": str(xdg)}
    assert "config.toml: unknown keys ['bad']" in run(env, "-p", "x", "--cwd", str(workspace)).stderr
    env["AGENT_SERVER_CONFIG"] = str(named)
    assert "named.toml: unknown keys ['worse']" in run(env, "-p", "x", "--cwd", str(workspace)).stderr
    done = run(env, "-p", "x", "--cwd", str(workspace), "--config", str(given))
    assert done.returncode == 2 and "given.toml: unknown keys ['worst']" in done.stderr


def test_readme_does_not_say_which_key_variable_picks_which_profile():
    readme = (ROOT / "README.md").read_text()
    for variable in ("DEEPSEEK_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "AGENT_SERVER_PROFILE"):
        assert variable in readme.split("## Configuration")[1].split("```toml")[0], variable
    assert "agent-server sessions" in readme and "user state folder" in readme and "--script demo-task" in readme
    assert "session_info_update = false" in readme


def _readme_offline_run_block() -> str:
    """The README's "Try `agent-server run` offline" commands, as a user pastes them."""
    lines = (ROOT / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "-m agent_server.offline --port" in line)
    while start > 0 and lines[start - 1].startswith("    "):
        start -= 1  # the block's first line
    end = start
    while end < len(lines) and lines[end].startswith("    "):
        end += 1
    return "\n".join(line[4:] for line in lines[start:end]) + "\n"


def _paste_readme_offline_run_block(tmp_path: Path) -> subprocess.Popen:
    block = _readme_offline_run_block().replace(".venv/bin/", str(Path(sys.executable).parent) + "/")  # this checkout's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SERVER_", "DEEPSEEK_", "OPENAI_"))}
    env.update(AGENT_SERVER_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "cfg"),
               TMPDIR=str(tmp_path))
    return subprocess.Popen(["bash", "-c", block + "wait\n"], env=env, cwd=str(ROOT), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


def _finished_paste(proc: subprocess.Popen) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=HANG)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # nothing the block started outlives it
    return proc.returncode, out


def test_the_readmes_offline_run_example_failed_the_second_time_it_was_pasted(tmp_path):
    # Finding 14 of the third newcomer: the block wrote the project into a fixed /tmp/demo; pasted a
    # second time, the endpoint refused the folder (not empty) and `run` failed with NETWORK.
    for paste in (1, 2):
        code, out = _finished_paste(_paste_readme_offline_run_block(tmp_path))
        assert code == 0, f"paste {paste}:\n{out}"
        assert "python3 test_calc.py` prints ok" in out, f"paste {paste}:\n{out}"


def test_the_readmes_offline_run_example_pasted_in_two_terminals_at_once_shared_one_endpoint(tmp_path):
    # Newcomer 4, finding 8: the block's fixed port 8765: the second paste's endpoint could not bind
    # it, its `run` talked to the first paste's endpoint and failed with NETWORK once that one stopped.
    pastes = [_paste_readme_offline_run_block(tmp_path) for _ in range(2)]
    for paste, proc in enumerate(pastes, 1):
        code, out = _finished_paste(proc)
        assert code == 0, f"paste {paste}:\n{out}"
        assert "python3 test_calc.py` prints ok" in out and "Address already in use" not in out, f"paste {paste}:\n{out}"


def test_demo_does_not_say_which_endpoint_and_model_it_uses(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_SERVER_", "DEEPSEEK_", "OPENAI_"))}
    env.update(AGENT_SERVER_STATE_DIR=str(tmp_path / "state"), XDG_CONFIG_HOME=str(tmp_path / "cfg"))
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "demo_client.py"), "--cwd",
                           str(write_project(tmp_path / "w"))], env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^endpoint: http://127\.0\.0\.1:\d+/v1 \(the bundled offline endpoint", done.stdout, re.M)
    assert re.search(r"^model: offline-demo$", done.stdout, re.M)


# -- g: text output --------------------------------------------------------------------------------


def test_text_output_runs_thinking_into_the_answer_without_a_final_newline(agent_env, workspace):
    with OfflineEndpoint.start_in_thread([text_stream("The answer.", reasoning="Let me think.")]) as ep:
        done = subprocess.run([*AGENT, "run", "-p", "q", "--cwd", str(workspace)], text=True, timeout=60,
                              env={**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url},
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert done.returncode == 0
    assert re.search(r"\[thinking\]\nLet me think\.\n(\n|.)*The answer\.\n$", done.stdout), done.stdout


def test_cancelled_run_has_no_closing_line(agent_env, workspace, agent_state_dir):
    with OfflineEndpoint.start_in_thread([text_stream("slow " * 400, chunk_size=5, delay=0.02)]) as ep:
        proc = subprocess.Popen([*AGENT, "run", "-p", "wait", "--cwd", str(workspace)], text=True,
                                env={**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        ready, _, _ = select.select([proc.stdout], [], [], HANG)  # the answer is streaming: the turn runs
        assert ready, "the answer never began on stdout"
        first = os.read(proc.stdout.fileno(), 1).decode()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG)
        out = first + out
    assert proc.returncode == 130
    assert out.endswith("\n") and err.rstrip("\n").splitlines()[-1] == "[cancelled]"


def test_one_attempt_is_reported_as_1_attempts(agent_env, workspace, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text("[agent]\nmax_attempts = 1\n")
    with OfflineEndpoint.start_in_thread([{"kind": "error", "status": 503, "json": {"error": {"message": "busy"}}}]) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_CONFIG": str(config)},
                   "-p", "hi", "--cwd", str(workspace))
    assert done.returncode == 1
    assert "gave up after 1 attempt)" in done.stderr and "1 attempts" not in done.stderr


def test_bad_default_mode_is_a_multi_line_pydantic_dump(agent_env, workspace, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[policy]\ndefault_mode = "yolo"\n')
    done = run({**agent_env, "AGENT_SERVER_CONFIG": str(config)}, "-p", "hi", "--cwd", str(workspace))
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert "[policy] default_mode" in line and "'yolo'" in line and "read-only" in line


def test_config_option_before_run_was_an_unknown_argument(agent_env, workspace, tmp_path):
    """`agent-server --config X run …` (the top-level usage puts --config first) said
    "unknown argument 'run'"; it now means `agent-server run --config X …`."""
    given = tmp_path / "given.toml"
    given.write_text("worst = 1\n")
    done = agent(agent_env, "--config", str(given), "run", "-p", "x", "--cwd", str(workspace))
    assert "unknown argument" not in done.stderr
    assert done.returncode == 2 and "given.toml: unknown keys ['worst']" in done.stderr
