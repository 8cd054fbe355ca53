"""The commands that only print (``replay``, ``sessions``) read by a pipe that closes early
(``| head``): they end quietly, as ``cat`` does — status 0 or 141 (SIGPIPE), no traceback."""

import json
import os
import shlex
import subprocess

from support.fixtures import agent_server_command
from support.sessions import log_path

from agent_server.offline import text_stream


def piped(args, reader, env=None):
    command = " ".join(shlex.quote(a) for a in [*agent_server_command(), *args])
    return subprocess.run(["bash", "-c", f"set -o pipefail; {command} | {reader} > /dev/null"],
                          capture_output=True, timeout=60, env={**os.environ, **(env or {})})


def assert_quiet(done):
    assert done.returncode in (0, 141), done
    assert b"Traceback" not in done.stderr and b"BrokenPipe" not in done.stderr and done.stderr == b"", done.stderr


async def test_replay_and_sessions_into_a_pipe_closed_early_exit_quietly_without_a_broken_pipe_traceback(
        acp_harness_factory, endpoint, workspace, agent_state_dir, tmp_path):
    endpoint.push(text_stream("ok"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "a long prompt " * 6_000)  # a request body of ~85 KB: more than a pipe holds
    await h.close()
    log = str(log_path(agent_state_dir, sid))
    assert_quiet(piped(["replay", log], "head -c 10"))
    assert_quiet(piped(["replay", log, "--json"], "head -1"))
    many = tmp_path / "many"  # another state folder: the end-of-test replay check reads this one's logs
    for n in range(3000):  # a listing longer than a pipe holds
        folder = many / "sessions" / f"sess_fake{n:05d}"
        folder.mkdir(parents=True)
        header = {"type": "session/header", "seq": 1, "time": 1.0,
                  "data": {"format_version": 1, "session_id": folder.name, "cwd": str(workspace)}}
        (folder / "events.jsonl").write_text(json.dumps(header) + "\n")
    env = {"AGENT_SERVER_STATE_DIR": str(many)}
    assert_quiet(piped(["sessions"], "head -1", env))
    assert_quiet(piped(["sessions", "--json"], "head -1", env))
