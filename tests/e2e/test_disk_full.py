"""Issue 11 §2b on the real server: the disk fills up mid-turn.

The model's ``read`` of a 32 KB file runs, its ``tool/call`` is logged, and its ``tool/result``
cannot be: the prompt is answered with the retryable error ``STORAGE``, the log on disk ends with
the ``tool/call`` (no ``turn/end`` written after the lost result, no torn line), and nothing more is
written while the disk stays full. Once there is space again the next prompt closes the stopped
turn (a synthetic result that says the call may have run, a notice) and runs; the strict endpoint
accepts every request and ``agent-server replay`` rebuilds each of them, checked valid.

Two ways to fill the disk: a small tmpfs (needs root: the test FAILS, not skips, without it) and,
without root, ``RLIMIT_FSIZE`` set on the running server with ``prlimit``. Also: a log as the code
before this fix left it (``turn/end`` written after a lost ``tool/result``) loads and gives a valid
next request, and ``replay`` reports that log's invalid request instead of saying OK.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest
from acp import RequestError
from support.replay import assert_replay_matches
from support.sessions import assert_valid_history, call, events, log_path, one_result_per_call

from agent_server.agent.recovery import MAY_HAVE_RUN_LOG_FAILED
from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import EventLog
from support.fixtures import agent_server_command

PAGE = 4096


class Tmpfs:
    """The state folder on a 2 MB tmpfs; ``squeeze`` fills it to one free page past the log's end."""

    def __init__(self, state: Path) -> None:
        if os.geteuid() != 0:
            pytest.fail("this test needs root to mount a tmpfs (the RLIMIT_FSIZE variant runs without it)")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(state)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            pytest.fail(f"cannot mount a tmpfs on {state}: {done.stderr.strip()}")
        self.state = state
        self.filler = state / "filler"

    def squeeze(self, pid: int) -> None:
        with open(self.filler, "wb") as fh:
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass
        os.truncate(self.filler, max(0, self.filler.stat().st_size // PAGE * PAGE - PAGE))

    def release(self, pid: int) -> None:
        self.filler.unlink()

    def close(self) -> None:
        subprocess.run(["umount", "-l", str(self.state)], check=False)


class FileSizeLimit:
    """``RLIMIT_FSIZE`` of the running server set one page past its log's size (no root needed)."""

    def __init__(self, state: Path) -> None:
        self.state = state

    def squeeze(self, pid: int) -> None:
        (log,) = self.state.glob("sessions/*/events.jsonl")
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (log.stat().st_size + PAGE, resource.RLIM_INFINITY))

    def choke(self, pid: int) -> None:
        """Not one more byte: the limit is the log's size."""
        (log,) = self.state.glob("sessions/*/events.jsonl")
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (log.stat().st_size, resource.RLIM_INFINITY))

    def release(self, pid: int) -> None:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    def close(self) -> None:
        pass


@pytest.fixture(params=["tmpfs", "rlimit"])
def disk(request, agent_state_dir):
    fill = Tmpfs(agent_state_dir) if request.param == "tmpfs" else FileSizeLimit(agent_state_dir)
    yield fill
    fill.close()


@pytest.mark.replay_exempt("replay is checked inside the test, while the tmpfs is still mounted")
async def test_disk_full_mid_turn_logs_no_turn_end_after_a_lost_result_and_the_session_recovers(
        acp_harness_factory, endpoint, workspace, agent_state_dir, disk):
    (workspace / "big.txt").write_text("".join(f"{i:04d} " + "z" * 75 + "\n" for i in range(400)))
    endpoint.push(text_stream("hello"))
    endpoint.push(tool_call_stream([call("r1", "read", path="big.txt")]))
    endpoint.push(text_stream("recovered"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "hi")).stop_reason == "end_turn"
    path = log_path(agent_state_dir, sid)

    disk.squeeze(h.pid)
    with pytest.raises(RequestError) as failed:
        await h.prompt(sid, "read big.txt")
    assert (failed.value.data["code"], failed.value.data["retryable"]) == ("STORAGE", True)
    assert "cannot be written" in failed.value.data["message"]
    raw = path.read_bytes()
    assert raw.endswith(b"\n")  # no torn line: the failed append was cut off again
    on_disk = events(agent_state_dir, sid)
    kinds = [e.type for e in on_disk]
    (called,) = [e for e in on_disk if e.type == "tool/call"]
    assert called.data["call_id"] == "r1"  # on disk before it ran; its result could not be written
    assert "tool/result" not in kinds and kinds.count("turn/end") == 1  # no turn/end after the lost result

    if hasattr(disk, "choke"):  # byte-exact: a tmpfs still has room for small events in the log's last page
        disk.choke(h.pid)
        with pytest.raises(RequestError) as again:  # still full: refused, nothing written
            await h.prompt(sid, "are you there?")
        assert again.value.data["code"] == "STORAGE"
        assert path.read_bytes() == raw
        assert len(endpoint.requests) == 2

    disk.release(h.pid)
    assert (await h.prompt(sid, "go on")).stop_reason == "end_turn"
    last = endpoint.requests[-1]
    assert_valid_history(last.body)
    messages = last.json()["messages"]
    (result,) = [m for m in messages if m["role"] == "tool"]
    assert result["tool_call_id"] == "r1" and result["content"] == MAY_HAVE_RUN_LOG_FAILED
    assert any("session log could not be written" in str(m["content"]) for m in messages if m["role"] == "user")
    assert messages[-1] == {"role": "user", "content": "go on"}
    log = events(agent_state_dir, sid)
    one_result_per_call(log)
    ends = [e.data for e in log if e.type == "turn/end"]
    assert [e["exit"] for e in ends] == ["end_turn", "interrupted", "end_turn"]
    assert ends[1]["cause"] == "log_write_failed"
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == 3  # replay exits 0: all valid
    await h.close()


def _legacy_log(path: Path) -> None:
    """The events the code before this fix wrote when a ``tool/result`` append failed: the turn still
    ended (``turn/end`` after the lost result), and the next prompt's request was refused (400)."""
    log = EventLog.create(path, {"session_id": path.parent.name, "cwd": str(path.parent.parent.parent.parent / "workspace"),
                                 "additional_directories": [], "mcp_servers": [],
                                 "agent": {"name": "agent-server", "version": "0.1.0"}})
    header = {"system": "You are a coding agent.", "model": "test-model", "params": {}, "tools": [],
              "reasoning_content": "drop"}
    log.append("request/header", header)
    log.append("request/context", {"provider": "custom", "base_url": "http://x/v1", "model": "test-model",
                                   "context_window": 32768})
    log.append("turn/start", {"turn": 1})
    log.append("user", {"turn": 1, "content": "read both", "blocks": [{"type": "text", "text": "read both"}]})
    log.append("step/start", {"turn": 1, "step": 1})
    calls = [{"id": "A", "name": "read", "arguments": '{"path": "a.txt"}'},
             {"id": "B", "name": "read", "arguments": '{"path": "b.txt"}'}]
    log.append("assistant", {"turn": 1, "step": 1, "text": "", "reasoning": "", "tool_calls": calls,
                             "finish_reason": "tool_calls", "usage": None})
    log.append("step/end", {"turn": 1, "step": 1, "finish_reason": "tool_calls"})
    log.append("tool/call", {"turn": 1, "call_id": "A", "name": "read", "arguments": calls[0]["arguments"]})
    log.append("tool/result", {"turn": 1, "call_id": "A", "tool_call_id": "tc-9", "name": "read",
                               "status": "completed", "content": "1\talpha"})
    log.append("tool/call", {"turn": 1, "call_id": "B", "name": "read", "arguments": calls[1]["arguments"]})
    error = {"code": "INTERNAL", "message": "OSError: [Errno 28] No space left on device", "retryable": False}
    log.append("turn/end", {"turn": 1, "exit": "error", "error": error})
    log.append("turn/start", {"turn": 2})
    log.append("user", {"turn": 2, "content": "again", "blocks": [{"type": "text", "text": "again"}]})
    log.append("step/start", {"turn": 2, "step": 1})
    log.append("assistant/attempt", {"turn": 2, "step": 1, "attempt": 1, "status": 400, "error": {
        "code": "BAD_REQUEST", "message": "tool_call_ids did not have response messages: B", "retryable": False}})
    log.append("turn/end", {"turn": 2, "exit": "error", "error": {"code": "BAD_REQUEST", "message": "400",
                                                                  "retryable": False}})
    log.close()


@pytest.mark.replay_exempt("the log's old requests were made by the code before the fix, not in this test")
async def test_log_left_by_a_lost_tool_result_before_the_fix_loads_and_the_next_request_is_valid(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    path = agent_state_dir / "sessions" / "sess_legacy" / "events.jsonl"
    _legacy_log(path)
    # replay no longer says OK: the second request of that log had a call without its result
    done = subprocess.run([*agent_server_command(), "replay", "--json", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["valid"] for line in lines] == [True, False]
    assert "B" in lines[1]["problem"] and "no result" in lines[1]["problem"]
    endpoint.push(text_stream("fine"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    await h.request("session/load", {"sessionId": "sess_legacy", "cwd": str(workspace), "mcpServers": []})
    assert (await h.prompt("sess_legacy", "and now?")).stop_reason == "end_turn"
    (request,) = endpoint.requests
    assert_valid_history(request.body)
    messages = request.json()["messages"]
    roles = [m["role"] for m in messages]
    assert roles[:5] == ["system", "user", "assistant", "tool", "tool"]  # B's result right after its call
    assert messages[4]["tool_call_id"] == "B" and messages[4]["content"] == MAY_HAVE_RUN_LOG_FAILED
    assert messages[-1] == {"role": "user", "content": "and now?"}
    one_result_per_call(events(agent_state_dir, "sess_legacy"))
    lines = replay_cli_lines(path)
    assert lines[-1]["valid"] and lines[-1]["sha256"] == __import__("hashlib").sha256(request.body).hexdigest()
    await h.close()


def replay_cli_lines(path: Path) -> list[dict]:
    done = subprocess.run([*agent_server_command(), "replay", "--json", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 3  # the old invalid request stays in the log, and is still reported
    return [json.loads(line) for line in done.stdout.splitlines()]
