"""``agent-server replay SESSION_LOG [--step N] [--json]``: the exact bodies, from the log alone.

The end-to-end conftest already runs ``replay --json`` after every e2e test and compares it with
what the endpoint received; these tests pin the command's own contract: output forms, ``--step``,
read-only, no configuration, clear failures — and that the server's start-up path never loads it.
"""

import hashlib
import json
import subprocess
import sys

from support.fixtures import agent_server_command
from support.replay import chat_bodies, replay_cli
from support.sessions import log_path

from agent_server.offline import text_stream


def run(*args):
    return subprocess.run([*agent_server_command(), "replay", *map(str, args)], capture_output=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin"})


async def session_with_retry_and_cancel(factory, endpoint, workspace):
    endpoint.push({"kind": "error", "status": 503, "json": {"error": {"message": "busy"}}})
    endpoint.push(text_stream("first answer"))
    endpoint.push(text_stream("slow " * 200, chunk_size=5, delay=0.02))
    endpoint.push(text_stream("third answer ✓"))
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": "/dev/null"})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "one")).stop_reason == "end_turn"
    task = h.start_prompt(sid, "two")
    await h.wait_for_update("agent_message_chunk", session_id=sid, predicate=lambda u: "slow" in u["content"]["text"])
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    assert (await h.prompt(sid, "three")).stop_reason == "end_turn"
    await h.close()
    return sid


async def test_replay_json_gives_every_request_with_its_exact_body_and_sha256(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    sid = await session_with_retry_and_cancel(acp_harness_factory, endpoint, workspace)
    lines = replay_cli(log_path(agent_state_dir, sid))
    bodies = chat_bodies(endpoint.requests)
    assert [line["body"].encode("utf-8") for line in lines] == bodies
    assert [line["sha256"] for line in lines] == [hashlib.sha256(b).hexdigest() for b in bodies]
    assert [(line["step_index"], line["attempt"], line["outcome"]) for line in lines] == [
        (1, 1, "error:SERVER"), (1, 2, "ok"), (2, 1, "interrupted"), (3, 1, "ok")]
    assert [line["turn"] for line in lines] == [1, 1, 2, 3] and all(line["certain"] for line in lines)
    assert lines[0]["bytes"] == len(bodies[0]) and lines[0]["body"] == lines[1]["body"]  # a retry re-sends


async def test_replay_step_prints_exactly_that_body_and_the_listing_shows_them_all(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    sid = await session_with_retry_and_cancel(acp_harness_factory, endpoint, workspace)
    path = log_path(agent_state_dir, sid)
    bodies = chat_bodies(endpoint.requests)
    third = run(path, "--step", 3)
    assert third.returncode == 0 and third.stdout == bodies[3]
    assert run(path.parent, "--step", 2).stdout == bodies[2]  # the session folder works too
    step_json = run(path, "--step", 1, "--json")
    assert [json.loads(line)["attempt"] for line in step_json.stdout.splitlines()] == [1, 2]
    listing = run(path)
    assert listing.returncode == 0
    for index, body in enumerate(bodies, start=1):
        assert f"### request {index}:".encode() in listing.stdout and body in listing.stdout
    assert hashlib.sha256(bodies[0]).hexdigest().encode() in listing.stdout


async def test_replay_reads_a_live_log_without_changing_it(acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(text_stream("hi"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    await h.prompt(sid, "hello")
    path = log_path(agent_state_dir, sid)
    with open(path, "ab") as f:
        f.write(b'{"type":"turn/start","seq"')  # as if a write were under way
    before = path.read_bytes()
    assert [line["body"].encode() for line in replay_cli(path)] == chat_bodies(endpoint.requests)
    assert path.read_bytes() == before


def test_replay_failures_are_clear_and_never_tracebacks(tmp_path):
    missing = run(tmp_path / "nope.jsonl")
    assert missing.returncode == 1 and b"no session log at" in missing.stderr
    corrupt = tmp_path / "events.jsonl"
    header = {"type": "session/header", "seq": 1, "time": 1.0, "data": {"format_version": 1}}
    corrupt.write_text(json.dumps(header) + "\n{broken\n" + json.dumps({**header, "seq": 3}) + "\n")
    failed = run(corrupt)
    assert failed.returncode == 1 and b"line 2" in failed.stderr and b"Traceback" not in failed.stderr
    future = tmp_path / "future.jsonl"
    future.write_text(json.dumps({**header, "data": {"format_version": 99}}) + "\n")
    refused = run(future)
    assert refused.returncode == 1 and b"newer" in refused.stderr
    corrupt.write_text(json.dumps(header) + "\n")
    empty = run(corrupt, "--step", 1)
    assert empty.returncode == 2 and b"no model request" in empty.stderr
    assert run().returncode == 2  # usage


def test_the_server_path_never_imports_the_replay_command():
    probe = ("import sys; from agent_server.cli import main; from agent_server.cli.serve import _fast_initialize; "
             "import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith('agent_server'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(out.stdout)
    assert "agent_server.cli.replay" not in loaded and "agent_server.agent" not in loaded
