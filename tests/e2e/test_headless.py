"""``agent-server run``: one prompt without an editor, through the same server, sessions and log."""

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
import uuid

import pytest

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.session import read_events
from support.procs import processes_naming, wait_gone
from support.timeouts import HANG

AGENT = [sys.executable, "-m", "agent_server"]


def run(env, *args, timeout=60, **kw):
    return subprocess.run([*AGENT, "run", *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, **kw)


def session_of(stderr):
    return [line for line in stderr.splitlines() if line.startswith("[session ")][0].split()[1].rstrip("]")


def calls_without_results(state_dir, sid):
    events = read_events(state_dir / "sessions" / sid / "events.jsonl")
    calls = {e.data["call_id"] for e in events if e.type == "tool/call"}
    return calls - {e.data["call_id"] for e in events if e.type == "tool/result"}


def test_run_streams_the_answer_and_exits_0(agent_env, workspace, agent_state_dir):
    script = [tool_call_stream([("c1", "bash", json.dumps({"command": "echo made > f.txt"}))]),
              text_stream("Made the file.")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "make f.txt", "--cwd", str(workspace))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "Made the file."
    assert (workspace / "f.txt").read_text() == "made\n"
    assert "[tool] Run `echo made > f.txt`: completed" in done.stderr
    sid = session_of(done.stderr)
    assert (agent_state_dir / "sessions" / sid / "events.jsonl").is_file()


def test_run_json_streams_session_updates_as_json_lines(agent_env, workspace):
    with OfflineEndpoint.start_in_thread([text_stream("Hello there", chunk_size=3, delay=0.03)]) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "hi", "--cwd", str(workspace), "--json")
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    chunks = [line["update"]["content"]["text"] for line in lines[:-1]
              if line.get("update", {}).get("sessionUpdate") == "agent_message_chunk"]
    assert "".join(chunks) == "Hello there" and len(chunks) > 1
    assert lines[-1]["stopReason"] == "end_turn"


def test_endpoint_down_exits_1_with_a_one_line_reason(agent_env, workspace, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "c.toml"
    config.write_text("[agent]\nmax_attempts = 1\n")
    done = run({**agent_env, "AGENT_SERVER_BASE_URL": f"http://127.0.0.1:{port}/v1", "AGENT_SERVER_CONFIG": str(config)},
               "-p", "hi", "--cwd", str(workspace))
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("agent-server run: NETWORK: cannot reach")


def test_usage_errors_exit_2(agent_env, workspace):
    assert run(agent_env, "--cwd", str(workspace)).returncode == 2  # no -p
    assert run(agent_env, "-p", "x", "--mode", "yolo").returncode == 2
    assert run(agent_env, "-p", "x", "--cwd", str(workspace / "missing")).returncode == 2
    assert run(agent_env, "-p", "x", "--allow", "everything").returncode == 2


def test_step_budget_exits_3(agent_env, workspace, tmp_path):
    (workspace / "a.txt").write_text("a\n")
    config = tmp_path / "c.toml"
    config.write_text("[agent]\nmax_steps_per_turn = 1\n")
    script = [tool_call_stream([("c1", "read", json.dumps({"path": "a.txt"}))])]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_CONFIG": str(config)},
                   "-p", "loop", "--cwd", str(workspace))
    assert done.returncode == 3 and "Stopped after 1 model request in this turn" in done.stderr  # a notice: not the answer
    assert done.stdout == ""


def test_run_printed_a_server_notice_on_stdout_mixed_into_the_answer(agent_env, workspace, tmp_path):
    """A script reads the answer from stdout: the server's notice of dropped tool calls (a non-retry
    notice) was printed there, between the answer's words."""
    (workspace / "a.txt").write_text("a\n")
    config = tmp_path / "c.toml"
    config.write_text("[agent]\nmax_tool_calls_per_step = 1\n")
    script = [tool_call_stream([("c1", "read", json.dumps({"path": "a.txt"})),
                                ("c2", "read", json.dumps({"path": "a.txt"}))]),
              text_stream("The file holds a.")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_CONFIG": str(config)},
                   "-p", "read it", "--cwd", str(workspace), "--allow", "read")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The file holds a.\n"
    assert "[agent-server] 1 tool calls of this answer were dropped unrun" in done.stderr


def test_without_a_terminal_permission_is_refused_unless_allowed(agent_env, workspace):
    (workspace / "build").mkdir()
    call = tool_call_stream([("c1", "bash", json.dumps({"command": "rm -rf build"}))])
    with OfflineEndpoint.start_in_thread([call, text_stream("ok")]) as ep:
        denied = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "clean", "--cwd", str(workspace))
        refused = [m for m in ep.requests[1].json()["messages"] if m["role"] == "tool"][0]["content"]
    assert denied.returncode == 0 and (workspace / "build").is_dir()
    assert "rejected by the user" not in refused.lower()
    with OfflineEndpoint.start_in_thread([call, text_stream("ok")]) as ep:
        allowed = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "clean", "--cwd", str(workspace),
                      "--allow", "shell")
    assert allowed.returncode == 0 and not (workspace / "build").exists()


def test_sigint_during_a_slow_tool_exits_130_and_the_session_loads_cleanly(agent_env, workspace, agent_state_dir):
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.1875"  # a sleep only the interruption ends
    script = [tool_call_stream([("c1", "bash", json.dumps({"command": f"sleep {marker}"}))]),
              text_stream("resumed fine")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        proc = subprocess.Popen([*AGENT, "run", "-p", "wait", "--cwd", str(workspace)], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 60  # the command runs
        while time.monotonic() < deadline and not (command := processes_naming(marker)):
            time.sleep(0.05)
        assert command, "the command never started"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert wait_gone(command), "the interruption did not stop the command"
        sid = session_of(err)
        assert calls_without_results(agent_state_dir, sid) == set()
        (result,) = [e.data for e in read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
                     if e.type == "tool/result"]
        assert result["reason"] == "interrupted", result
        again = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "hi", "--cwd", str(workspace),
                    "--resume", sid)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "resumed fine"
    assert calls_without_results(agent_state_dir, sid) == set()


TEARDOWN_WITNESS = """import os


class _Teardown:
    \"\"\"Writes a line when the interpreter frees it, which only its teardown does (a module global).\"\"\"

    def __init__(self, path):
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def __del__(self, _write=os.write):
        _write(self._fd, b"teardown\\n")


if os.environ.get("TEARDOWN_MARK"):
    _witness = _Teardown(os.environ["TEARDOWN_MARK"])
"""


def test_run_tore_its_interpreter_down_after_the_sigint_that_cancelled_its_turn(agent_env, workspace,
                                                                               agent_state_dir, tmp_path):
    """``agent-server run`` exited 0.17–0.52 s after a SIGINT with no tool to stop: its turn was
    cancelled and its log closed within milliseconds, then the interpreter freed every module and
    object one by one (~45 ms of CPU, several times that on a loaded machine) before the process
    could end. Counted here, not timed: a module global whose ``__del__`` only that teardown runs
    (a ``sitecustomize``) wrote nothing, while the log is whole."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(TEARDOWN_WITNESS)
    mark = tmp_path / "teardown"
    witnessed = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])),
                 "TEARDOWN_MARK": str(tmp_path / "control")}
    subprocess.run([sys.executable, "-c", "pass"], env=witnessed, check=True, timeout=HANG)
    assert (tmp_path / "control").read_text() == "teardown\n"  # the witness sees an ordinary exit
    with OfflineEndpoint.start_in_thread([text_stream("slow " * 4000, chunk_size=5, delay=0.02)]) as ep:
        env = {**witnessed, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "TEARDOWN_MARK": str(mark)}
        proc = subprocess.Popen([*AGENT, "run", "-p", "wait", "--cwd", str(workspace)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert proc.stdout.read(1), "the answer never began"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 130, err
    assert err.decode().rstrip().endswith("[cancelled]") and out.endswith(b"\n")
    assert mark.read_text() == ""  # made at start-up, never freed by a teardown
    log = read_events(agent_state_dir / "sessions" / session_of(err.decode()) / "events.jsonl")
    assert log[-1].type == "turn/end" and log[-1].data["exit"] == "cancelled", log[-1]


def test_empty_resume_id_is_a_usage_error(agent_env, workspace):
    done = run(agent_env, "-p", "x", "--cwd", str(workspace), "--resume", "")
    assert done.returncode == 2 and "--resume needs a session id" in done.stderr


def test_run_with_a_prompt_and_a_tool_result_over_64_kib_does_not_hang(agent_env, workspace):
    """Regression: the in-memory pipe of ``run`` had asyncio's 64 KiB line limit, so one large
    prompt or tool result (one JSON-RPC line) left the run waiting forever."""
    big = "w " * 60_000  # 120 KB
    script = [tool_call_stream([("c1", "write", json.dumps({"path": "big.txt", "content": big}))]),
              text_stream("Wrote it.")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = subprocess.run([*AGENT, "run", "-p", "-", "--cwd", str(workspace), "--allow", "edit"],
                              env={**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url,
                                   "AGENT_SERVER_CONTEXT_WINDOW": "400000"},
                              input=big, capture_output=True, text=True, timeout=60)
        sent = ep.requests[0].json()["messages"][-1]["content"]
    assert done.returncode == 0, done.stderr
    assert "Wrote it." in done.stdout
    assert big.strip() in sent
    assert (workspace / "big.txt").read_text() == big
    assert "Write big.txt" in done.stderr


def test_allow_shell_still_applies_after_a_refused_question_of_another_kind(agent_env, workspace, agent_state_dir):
    (workspace / ".env").write_text("TOKEN=x\n")
    script = [tool_call_stream([("r", "read", json.dumps({"path": ".env"}))]),
              tool_call_stream([("b", "bash", json.dumps({"command": "echo hi; ls /root/.ssh"}))]),
              text_stream("ok")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "go", "--cwd", str(workspace),
                   "--allow", "shell")
        results = {m["tool_call_id"]: m["content"] for m in ep.requests[2].json()["messages"] if m["role"] == "tool"}
    assert done.returncode == 0, done.stderr
    refused = [line for line in done.stderr.splitlines() if line.startswith("[tool] Read") and ": failed" in line]
    assert refused and "--allow read" in refused[0] and "--allow shell" not in refused[0], done.stderr
    assert results["r"].startswith("Approval unavailable")
    assert not results["b"].startswith("Approval unavailable") and "hi" in results["b"], results["b"]
    decided = {e.data["call_id"]: e.data["decided_by"] for e in
               read_events(agent_state_dir / "sessions" / session_of(done.stderr) / "events.jsonl")
               if e.type == "policy/decision"}
    assert decided == {"r": "fail-closed:unavailable", "b": "flag: --allow shell"}  # not "user"


def test_without_a_terminal_a_kind_no_flag_covers_says_no_allow_applies(agent_env, workspace, tmp_path):
    from agent_server.cli.allow import no_terminal

    assert "--allow read" in no_terminal("read") and "--allow shell" in no_terminal("execute")
    assert "no --allow kind covers" in no_terminal("fetch") and "rerun" not in no_terminal("fetch")


def test_run_prints_the_retry_notice_on_stderr_not_in_the_answer(agent_env, workspace, tmp_path):
    broken = {"kind": "sse", "frames": [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": "partial "}}]}],
              "done": False}
    config = tmp_path / "c.toml"
    config.write_text("[agent]\nretry_base_delay = 0.0\n")
    with OfflineEndpoint.start_in_thread([broken, text_stream("final")]) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "go", "--cwd", str(workspace),
                   "--config", str(config))
    assert done.returncode == 0, done.stderr
    # what had streamed stays (it was printed as it came), ended; the retry's answer on a line of its own
    assert done.stdout == "partial \nfinal\n"
    assert ("[agent-server] The model's answer broke off (the stream closed); retrying now (attempt 2 of 4)…\n"
            in done.stderr)
    assert "[agent-server]" not in done.stdout


def test_run_prints_the_compaction_notice_on_stderr_not_in_the_answer(agent_env, workspace):
    for name in "abc":
        (workspace / f"{name}.txt").write_text(f"{name} line with the helper\n" * 60)
    script = [tool_call_stream([(f"r{i}", "read", json.dumps({"path": f"{name}.txt"}))]) for i, name in enumerate("abc")]
    script += [text_stream("Task: rename the helper. Files: a.txt–c.txt read."), text_stream("Renamed.")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_CONTEXT_WINDOW": "4000"},
                   "-p", "Rename the helper in the three data files.", "--cwd", str(workspace), "--allow", "read")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Renamed.\n"
    assert "[agent-server] The conversation history was compacted to fit the model's context window" in done.stderr


def test_run_exit_3_for_max_tokens_says_on_stderr_the_answer_was_cut_off(agent_env, workspace):
    with OfflineEndpoint.start_in_thread([text_stream("The answer is cut", finish_reason="length")]) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "explain", "--cwd", str(workspace))
    assert done.returncode == 3
    assert done.stdout == "The answer is cut\n"  # the answer only
    sid = session_of(done.stderr)
    assert ("agent-server run: the answer was cut off at the model's output limit (stop reason max_tokens); "
            f'continue it with --resume {sid} -p "continue"') in done.stderr


def test_run_mode_accept_edits_starts_the_session_in_it_and_edits_without_asking(agent_env, workspace, agent_state_dir):
    (workspace / "a.txt").write_text("alpha\n")
    script = [tool_call_stream([("r", "read", json.dumps({"path": "a.txt"}))]),
              tool_call_stream([("e", "edit", json.dumps({"path": "a.txt", "old_string": "alpha", "new_string": "ALPHA"}))]),
              text_stream("Shouted.")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "shout", "--cwd", str(workspace),
                   "--mode", "accept-edits")
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.txt").read_text() == "ALPHA\n"
    events = read_events(agent_state_dir / "sessions" / session_of(done.stderr) / "events.jsonl")
    assert [e.data["to"] for e in events if e.type == "mode/changed"] == ["workspace-write", "accept-edits"]
    (edit,) = [e.data for e in events if e.type == "policy/decision" and e.data["tool"] == "edit"]
    assert (edit["mode"], edit["rule"], edit["outcome"]) == ("accept-edits", "accept-edits", "allow")


def test_editing_agent_params_between_runs_was_an_unplanned_break_nothing_in_the_log_explained(
        agent_env, workspace, agent_state_dir, tmp_path):
    """Issue 33's prefix accounting named the break after ``[agent] params`` was edited between two
    runs of one session ``unplanned``: nothing in the log said the configuration changed. Now the
    next turn logs ``params/changed`` (a named, planned break, ``params``), the user is told once, and
    every request still replays byte-exact."""
    from support.replay import assert_replay_matches

    from agent_server.agent.prefix import prefix_report

    config = tmp_path / "c.toml"
    config.write_text("[agent]\nparams = { temperature = 0.2 }\n")
    with OfflineEndpoint.start_in_thread([text_stream("one"), text_stream("two"), text_stream("three")]) as ep:
        env = {**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_CONFIG": str(config)}
        first = run(env, "-p", "first", "--cwd", str(workspace))
        assert first.returncode == 0, first.stderr
        sid = session_of(first.stderr)
        config.write_text("[agent]\nparams = { temperature = 0.7, top_p = 0.9 }\n")  # edited between runs
        second = run(env, "-p", "second", "--cwd", str(workspace), "--resume", sid)
        third = run(env, "-p", "third", "--cwd", str(workspace), "--resume", sid)
        requests = list(ep.requests)
    assert (second.returncode, third.returncode) == (0, 0), second.stderr + third.stderr
    assert (second.stdout, third.stdout) == ("two\n", "three\n")  # the notice is not the answer
    said = ("[agent-server] The model parameters of the configuration changed since this session's last request "
            "(temperature 0.2 → 0.7; top_p 0.9 added)")
    assert said in second.stderr and "model parameters" not in third.stderr  # told once
    assert [r.json()["temperature"] for r in requests] == [0.2, 0.7, 0.7]
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    (changed,) = [e.data for e in events if e.type == "params/changed"]
    assert changed == {"from": {"temperature": 0.2}, "to": {"temperature": 0.7, "top_p": 0.9}}
    report = prefix_report(events)
    assert report.breaks == {"params": 1} and report.unplanned == 0
    assert assert_replay_matches(agent_state_dir, requests) == 3


def _race_during_a_command(agent_env, workspace, mode, change):
    """``READ a.txt ;; BASH <waits> ;; WRITE|EDIT a.txt``: while the command waits, another process
    (this test) appends a line to a.txt — the user's save while the agent's tests run."""
    path = workspace / "a.txt"
    path.write_bytes(b"hello\nworld\n")
    command = "touch started; while [ ! -e go ]; do sleep 0.02; done; echo tests pass"
    script = [tool_call_stream([("c1", "read", json.dumps({"path": "a.txt"}))]),
              tool_call_stream([("c2", "bash", json.dumps({"command": command}))]),
              tool_call_stream([("c3", change[0], json.dumps({"path": "a.txt", **change[1]}))]),
              text_stream("done")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        proc = subprocess.Popen([*AGENT, "run", "-p", "race", "--cwd", str(workspace), "--mode", mode,
                                 "--allow", "shell"], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + HANG
            while time.monotonic() < deadline and not (workspace / "started").exists() and proc.poll() is None:
                time.sleep(0.02)
            assert (workspace / "started").exists(), "the command never started"
            with open(path, "ab") as f:  # the user's save, while the command runs
                f.write(b"USER SAVED THIS\n")
            (workspace / "go").write_bytes(b"")
            out, err = proc.communicate(timeout=HANG)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(HANG)
        results = [m["content"] for m in ep.requests[-1].json()["messages"] if m["role"] == "tool"]
    return proc.returncode, err, results


@pytest.mark.parametrize("change", [("write", {"content": "HELLO\nworld\n"}),
                                    ("edit", {"old_string": "hello", "new_string": "HELLO"})], ids=["write", "edit"])
@pytest.mark.parametrize("mode", ["accept-edits", "workspace-write"])
def test_accept_edits_overwrote_a_line_the_user_saved_while_the_agents_command_ran(agent_env, workspace, mode, change):
    """Finding 17 (reported on 6e87086): a line another process appended while the agent's command
    ran was overwritten by the agent's next write. The report's own session logs show the append
    landed before the agent's ``read`` (the model was shown the line and wrote content without
    it); with the change made while the command provably runs, the write or edit after it is
    refused as stale in both modes and the line stays (a shell call never refreshes the read
    ledger: what the model read is the only base a write is checked against)."""
    code, err, results = _race_during_a_command(agent_env, workspace, mode, change)
    assert code == 0, err
    assert (workspace / "a.txt").read_bytes() == b"hello\nworld\nUSER SAVED THIS\n"
    assert "has changed since you last read it" in results[-1], results
    assert "a.txt: failed" in err


def _agent_edited(agent_env, workspace, endpoint_env) -> str:
    """A run whose agent reads ``a.txt`` and changes alpha → ALPHA (its edit allowed by the flag);
    returns the session id."""
    (workspace / "a.txt").write_bytes(b"alpha\r\nbeta\r\ngamma")
    script = [tool_call_stream([("r", "read", json.dumps({"path": "a.txt"}))]),
              tool_call_stream([("e", "edit", json.dumps({"path": "a.txt", "old_string": "alpha",
                                                           "new_string": "ALPHA"}))]),
              text_stream("done")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", "edit", "--cwd", str(workspace),
                   "--allow", "edit")
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.txt").read_bytes() == b"ALPHA\r\nbeta\r\ngamma"
    return session_of(done.stderr)


def command_headless(agent_env, workspace, sid: str, command: str):
    """``agent-server run --resume SID -p COMMAND`` with no terminal (a slash command: the endpoint
    gets no request): its finished process."""
    with OfflineEndpoint.start_in_thread([]) as ep:
        return run({**agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}, "-p", command, "--cwd", str(workspace),
                   "--resume", sid)


def test_a_headless_undo_kept_the_agents_change_in_a_file_the_user_changed_though_it_merged_back_alone(
        agent_env, workspace, agent_state_dir):
    """``agent-server run --resume S -p /undo`` with no terminal, after the user changed another line
    of the file the agent edited: the question could not be asked, so the agent's change stayed
    ("kept the user's version … no answer") although taking it back alone drops nothing of the
    user's. A headless run has no one to ask: it takes back the agent's change alone where it
    merges back alone (byte-exact: CRLF, no final newline) and says so; where it does not — or the
    file is uncertain — it keeps the file and says how to choose."""
    sid = _agent_edited(agent_env, workspace, None)
    (workspace / "a.txt").write_bytes(b"ALPHA\r\nbeta\r\ngamma, saved")
    (workspace / "a.txt").chmod(0o750)  # the user's mode too
    done = command_headless(agent_env, workspace, sid, "/undo")
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.txt").read_bytes() == b"alpha\r\nbeta\r\ngamma, saved"
    assert (workspace / "a.txt").stat().st_mode & 0o7777 == 0o750
    assert ("a.txt: restored (only the agent's change taken back; the file's other changes kept; a headless run "
            "has no one to ask, and this drops none of them)") in done.stdout

    # /redo after the user changed the file again: the agent's change alone re-applied, the same way
    (workspace / "a.txt").write_bytes(b"alpha\r\nbeta\r\ngamma, saved twice")
    done = command_headless(agent_env, workspace, sid, "/redo")
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.txt").read_bytes() == b"ALPHA\r\nbeta\r\ngamma, saved twice"
    assert (workspace / "a.txt").stat().st_mode & 0o7777 == 0o750
    assert "a.txt: restored (only the agent's change re-applied; the file's other changes kept; a headless" in done.stdout

    # the other side: the user's change touches the agent's line — nothing is taken back, and it says why
    sid = _agent_edited(agent_env, workspace, None)
    (workspace / "a.txt").write_bytes(b"ALPHA, saved\r\nbeta\r\ngamma")
    done = command_headless(agent_env, workspace, sid, "/undo")
    assert (workspace / "a.txt").read_bytes() == b"ALPHA, saved\r\nbeta\r\ngamma"
    assert "a headless run has no one to ask, so nothing was replaced" in done.stdout


def test_a_headless_undo_on_a_terminal_offered_no_way_to_take_back_the_agents_change_alone(
        agent_env, workspace, agent_state_dir):
    """On a terminal the question was asked with the four letters of a tool question — "allow [o]nce,
    [r]eject" — so /undo's first choice (the agent's change alone) could not be typed and "allow"
    meant the whole checkpoint. A question that names its options is asked by number, each with its
    name, the diff shown."""
    import pty

    sid = _agent_edited(agent_env, workspace, None)
    (workspace / "a.txt").write_bytes(b"ALPHA\r\nbeta\r\ngamma, saved")
    main, side = pty.openpty()
    with OfflineEndpoint.start_in_thread([]) as ep:
        proc = subprocess.Popen([*AGENT, "run", "-p", "/undo", "--cwd", str(workspace), "--resume", sid],
                                env={**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url},
                                stdin=side, stderr=side, stdout=subprocess.PIPE)
        os.close(side)
        seen = b""
        while b"choose 1-3?" not in seen:
            assert select.select([main], [], [], HANG)[0], seen
            try:
                chunk = os.read(main, 4096)
            except OSError:  # the terminal's other side closed: the run ended without the question
                chunk = b""
            assert chunk, seen
            seen += chunk
        os.write(main, b"1\n")
        out, _ = proc.communicate(timeout=HANG)
    os.close(main)
    text = seen.decode()
    assert "[1] Undo the agent's change, keep the rest" in text
    assert "[2] Take the checkpoint" in text and "[3] Keep the file as it is" in text
    assert "-ALPHA" in text and "+alpha" in text  # the diff of what the first choice changes
    assert proc.returncode == 0
    assert (workspace / "a.txt").read_bytes() == b"alpha\r\nbeta\r\ngamma, saved"
    assert b"only the agent's change taken back; the file's other changes kept)" in out


def test_a_headless_undo_of_a_file_whose_shell_change_may_be_the_users_kept_it_and_said_how_to_choose(
        agent_env, workspace, agent_state_dir):
    """The other side of the headless merge: the user saved ``a.txt`` while the agent's command ran
    (whose change it is, nothing shows) and changed it again after the turn. A headless ``/undo``
    takes back nothing of an uncertain file — not even the command's change alone, which may hold the
    user's save — and says that a terminal or an editor offers the choice."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / ".gitignore").write_bytes(b"flags/\n")
    (workspace / "flags").mkdir()
    (workspace / "a.txt").write_bytes(b"one\ntwo\nthree\n")
    command = "touch flags/started; while [ ! -e flags/go ]; do sleep 0.02; done; echo agent >> a.txt"
    script = [tool_call_stream([("s", "bash", json.dumps({"command": command}))]), text_stream("done")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        proc = subprocess.Popen([*AGENT, "run", "-p", "append", "--cwd", str(workspace), "--allow", "shell"],
                                env={**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url},
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + HANG
        while not (workspace / "flags" / "started").exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        (workspace / "a.txt").write_bytes(b"one\ntwo\nthree\nMY LINE\n")  # the user's save, during the command
        (workspace / "flags" / "go").touch()
        out, err = proc.communicate(timeout=HANG)
    assert proc.returncode == 0, err
    sid = session_of(err)
    (workspace / "a.txt").write_bytes(b"ONE\ntwo\nthree\nMY LINE\nagent\n")
    done = command_headless(agent_env, workspace, sid, "/undo")
    assert done.returncode == 0, done.stderr
    assert (workspace / "a.txt").read_bytes() == b"ONE\ntwo\nthree\nMY LINE\nagent\n"
    assert ("a.txt: kept the user's version (a shell command changed it, and it may have been someone else's "
            "write; a headless run has no one to ask, so nothing was replaced: /undo on a terminal or in an "
            "editor offers the choice)") in done.stdout
