"""End to end: the shell under Linux Landlock (issue 5) — the real server runs each ``bash`` call
through its sandbox on this machine; the client is the official ACP Python SDK."""

from __future__ import annotations

import http.server
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from support.acp_client import ClientConfig
from support.sessions import call, config_env, events

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream


@pytest.fixture
async def endpoint():
    async with OfflineEndpoint() as ep:
        yield ep


@pytest.fixture
def scratch_home(tmp_path):
    """A HOME of its own, with a folder ``y`` that must survive ``rm -rf ~/y``."""
    home = tmp_path / "home"
    (home / "y" / "deep").mkdir(parents=True)
    (home / "y" / "deep" / "keep.txt").write_text("precious")
    return home


def script(endpoint, *steps):
    for calls in steps:
        endpoint.push(tool_call_stream(calls))
    endpoint.push(text_stream("done"))


def results(endpoint):
    return {m["tool_call_id"]: m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "tool"}


def asks(h):
    return [p for m, p in h.client.calls if m == "session/request_permission"]


async def start(factory, endpoint, workspace, env=None, permission="allow_once", **session):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})},
                      config=ClientConfig(permission=permission))
    await h.initialize()
    return h, (await h.new_session(str(workspace), **session)).session_id


async def test_under_landlock_escapes_fail_with_permission_errors_and_inside_touch_needs_no_approval(
        acp_harness_factory, endpoint, workspace, agent_state_dir, scratch_home):
    etc = Path(f"/etc/agent-server-e2e-{uuid.uuid4().hex}")
    script(endpoint, [call("home", "bash", command="touch $HOME/x")],
           [call("rm", "bash", command="cd / && rm -rf ~/y")],
           [call("etc", "bash", command=f"echo x > {etc}")],
           [call("inside", "bash", command="touch x")])
    h, sid = await start(acp_harness_factory, endpoint, workspace, {"HOME": str(scratch_home)})
    assert (await h.prompt(sid, "try everything")).stop_reason == "end_turn"
    out = results(endpoint)
    assert "Permission denied" in out["home"] and "Permission denied" in out["rm"] and "Permission denied" in out["etc"]
    assert all("[sandbox]" in out[k] for k in ("home", "rm", "etc"))
    assert not (scratch_home / "x").exists() and not etc.exists()
    assert (scratch_home / "y" / "deep" / "keep.txt").read_text() == "precious"
    assert (workspace / "x").exists() and out["inside"].endswith("exit code: 0")
    (only,) = asks(h)  # the destructive rm asked (the test allowed it); nothing else did
    assert only["toolCall"]["title"] == "Run `cd / && rm -rf ~/y`"
    assert "is destructive" in only["toolCall"]["content"][0]["content"]["text"]
    logged = {e.data["call_id"]: e.data for e in events(agent_state_dir, sid) if e.type == "policy/decision"}
    assert (logged["inside"]["rule"], logged["inside"]["decided_by"]) == ("sandbox", "policy")
    assert (logged["rm"]["rule"], logged["rm"]["decided_by"]) == ("destructive", "user")
    status = [e.data for e in events(agent_state_dir, sid) if e.type == "sandbox/status"]
    assert status[0]["level"] == "landlock" and status[0]["landlock_abi"] >= 7
    assert "run under an OS sandbox" in endpoint.requests[0].json()["messages"][0]["content"]


async def test_under_landlock_git_commit_fails_because_git_is_read_only_with_a_clear_message(
        acp_harness_factory, endpoint, workspace):
    git = ["git", "-C", str(workspace), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout
    script(endpoint, [call("c", "bash", command="echo a > a.txt && git add a.txt && "
                                                "git -c user.name=t -c user.email=t@t commit -m agent")])
    h, sid = await start(acp_harness_factory, endpoint, workspace, permission=None)
    assert (await h.prompt(sid, "commit")).stop_reason == "end_turn"
    out = results(endpoint)["c"]
    assert "Read-only file system" in out and "`.git` is read-only" in out and "danger-full-access" in out
    assert subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True).stdout == head
    assert asks(h) == []


async def test_network_false_makes_curl_to_localhost_fail(acp_harness_factory, endpoint, workspace, tmp_path):
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        script(endpoint, [call("n", "bash", command=f"curl -sS -m 5 {url}")])
        h, sid = await start(acp_harness_factory, endpoint, workspace,
                             config_env(tmp_path, "[policy]\nnetwork = false\n"), permission=None)
        assert (await h.prompt(sid, "fetch")).stop_reason == "end_turn"
    finally:
        server.shutdown()
    out = results(endpoint)["n"]
    assert "exit code: 7" in out and hits == []  # curl: couldn't connect
    assert "network (TCP) access is blocked" in out  # the model is told why


async def test_additional_directories_are_writable_roots_for_file_tools_and_the_sandboxed_shell(
        acp_harness_factory, endpoint, workspace, tmp_path):
    extra = tmp_path / "extra"
    extra.mkdir()
    script(endpoint, [call("w", "write", path=str(extra / "a.txt"), content="a"),
                      call("b", "bash", command=f"touch {extra}/b.txt {tmp_path}/c.txt")])
    h, sid = await start(acp_harness_factory, endpoint, workspace, permission=None,
                         additional_directories=[str(extra)])
    assert (await h.prompt(sid, "extra")).stop_reason == "end_turn"
    assert (extra / "a.txt").read_text() == "a" and (extra / "b.txt").exists()
    assert not (tmp_path / "c.txt").exists() and "Permission denied" in results(endpoint)["b"]


async def test_sandboxed_command_cannot_signal_processes_outside_its_sandbox(acp_harness_factory, endpoint, workspace):
    outsider = subprocess.Popen(["sleep", "60"])
    try:
        script(endpoint, [call("sig", "bash", command=f"kill -0 {outsider.pid} && echo reachable; kill -0 $$ && echo self-ok")])
        h, sid = await start(acp_harness_factory, endpoint, workspace)
        assert (await h.prompt(sid, "signal")).stop_reason == "end_turn"
        out = results(endpoint)["sig"]
        assert "reachable" not in out and "self-ok" in out  # LANDLOCK_SCOPE_SIGNAL (ABI 6+)
        assert outsider.poll() is None
    finally:
        outsider.kill()
        outsider.wait()
