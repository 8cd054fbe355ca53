"""The warm spare for real (agent_server/spare/): real launches of ``agent-server`` handed to a
real spare process in a private folder, the official ACP SDK as the client where a turn runs, and
the offline endpoint as the model. Each test is named after the failure it pins.

The spare of this module is shared by its tests (one start, ~1 s); the tests that need a spare of
their own, a fake one or none make their own folder. Every spare is stopped at the end.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from support.acp_client import AcpHarness, ClientConfig
from support.replay import assert_replay_matches
from support.sessions import call, events
from support.spare import (AGENT, INIT, SpareFolder, alive, fd_inode, fd_targets, new_session, ppid, read_response,
                           server_of, wait_gone)

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.spare import _launcher
from agent_server.spare._daemon import RESET_IN_CHILD, SERVED_NOTE


@pytest.fixture(scope="module")
def spare(tmp_path_factory):
    folder = SpareFolder(tmp_path_factory.mktemp("spare-shared") / "spare", idle=30)
    folder.start()
    yield folder
    folder.stop()
    assert not folder.live(), "a spare still holds its lock after agent-server spare stop"


def agent_env(tmp_path: Path, endpoint_url: str = "http://127.0.0.1:9/v1", **extra: str) -> dict[str, str]:
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    (tmp_path / "no-config.toml").touch()  # an empty config file: no user settings leak in
    return {"AGENT_SERVER_STATE_DIR": str(state), "AGENT_SERVER_BASE_URL": endpoint_url,
            "AGENT_SERVER_API_KEY": "test-key", "AGENT_SERVER_MODEL": "test-model",
            "AGENT_SERVER_CONFIG": str(tmp_path / "no-config.toml"), **extra}


def launch(env: dict[str, str], cwd: str | None = None, **kw) -> subprocess.Popen:
    return subprocess.Popen(AGENT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, **env}, cwd=cwd, start_new_session=True, **kw)


def served_children(spare: SpareFolder) -> set[int]:
    """The spare's children but its standby (forked ahead for the next launch)."""
    (info,) = spare.status()["spares"]
    return {int(c) for c in Path(f"/proc/{spare.pid}/task/{spare.pid}/children").read_text().split()} - {
        info["standby"]}


def unix_inodes_bound_to(folder: Path) -> set[str]:
    """``socket:[inode]`` of the sockets bound to a name in ``folder`` (the spare binds through
    ``/proc/self/fd/N/``: matched by the socket's file name)."""
    out = set()
    names = {p.name for p in folder.glob("*.sock")}
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) >= 8 and fields[7].rsplit("/", 1)[-1] in names:
            out.add(f"socket:[{fields[6]}]")
    return out


# -- a launch served by the spare ---------------------------------------------------------------------


async def test_a_second_launch_is_served_by_a_fork_of_the_spare_and_runs_a_turn_in_that_launchs_state_cwd_umask_and_env(
        spare, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("".join(f"line {i}\n" for i in range(40)))
    launch_cwd = tmp_path / "launched-here"
    launch_cwd.mkdir()
    mark = f"launch-{uuid.uuid4().hex}"
    async with OfflineEndpoint() as endpoint:
        endpoint.push(tool_call_stream([call("r", "read", path="notes.txt"),
                                        call("b", "bash", command="printenv SPARE_TEST_MARK; umask")]))
        endpoint.push(text_stream("The file has 40 lines."))
        env = {**spare.full_env(), **agent_env(tmp_path, endpoint.base_url, SPARE_TEST_MARK=mark,
                                                AGENT_SERVER_LOG_LEVEL="DEBUG")}
        command = ["/bin/sh", "-c", 'umask 027 && exec "$0" "$@"', *AGENT]  # exec: the launcher keeps the pid
        harness = AcpHarness(command, env=env, cwd=launch_cwd, config=ClientConfig(permission="allow_once"))
        async with harness:
            await harness.initialize()
            server = server_of(harness.pid, parent=spare.pid)
            assert server is not None and ppid(server) == spare.pid != harness.pid
            session = (await harness.new_session(str(ws))).session_id
            assert (await harness.prompt(session, "How long is notes.txt?")).stop_reason == "end_turn"
            # the server took this launch's working folder and umask; it holds nothing of the spare's
            assert os.readlink(f"/proc/{server}/cwd") == str(launch_cwd)
            assert "Umask:\t0027" in Path(f"/proc/{server}/status").read_text()
            assert not fd_targets(server) & unix_inodes_bound_to(spare.path)
            assert not any(t.startswith(str(spare.path)) for t in fd_targets(server))
            # and the spare holds no descriptor of the editor's (it would never see end of file)
            assert not {os.readlink(f"/proc/{harness.pid}/fd/{n}") for n in (0, 1, 2)} & fd_targets(spare.pid)
        assert f"{SERVED_NOTE} {spare.pid}" in harness.stderr_text()
        results = {m["tool_call_id"]: m["content"] for m in endpoint.requests[-1].json()["messages"]
                   if m["role"] == "tool"}
        assert "line 39" in results["r"]
        assert results["b"].splitlines()[:2] == [mark, "0027"], results["b"]
    assert {e.type for e in events(tmp_path / "state", session)} >= {"session/header", "turn/end", "tool/result"}
    assert_replay_matches(tmp_path / "state", endpoint.requests)
    harness.validate()


def test_stdin_at_its_end_makes_the_served_launch_exit_0_as_a_cold_one_does(spare, tmp_path):
    for env in ({**spare.env, "AGENT_SERVER_LOG_LEVEL": "DEBUG"}, {"AGENT_SERVER_SPARE": "off"}):
        proc = launch({**agent_env(tmp_path), **env})
        out, err = proc.communicate(INIT, timeout=30)
        assert proc.returncode == 0, err
        assert json.loads(out.splitlines()[0])["result"]["protocolVersion"] == 1
        assert (SERVED_NOTE.encode() in err) == (env.get("AGENT_SERVER_SPARE") != "off")


def _running_launch(env: dict[str, str], ws: Path) -> subprocess.Popen:
    proc = launch(env)
    proc.stdin.write(INIT + new_session(2, str(ws)))
    proc.stdin.flush()
    read_response(proc, 1)
    assert "result" in read_response(proc, 2)
    return proc


def test_sigterm_to_the_launcher_ends_its_server_with_the_status_a_cold_server_ends_with(spare, tmp_path):
    statuses = {}
    for name, env in (("served", spare.env), ("cold", {"AGENT_SERVER_SPARE": "off"})):
        proc = _running_launch({**agent_env(tmp_path), **env}, tmp_path)
        # (a cold server's own children hold its stdin for a moment: between their fork and exec)
        server = server_of(proc.pid, timeout=0.5 if name == "cold" else 5, parent=spare.pid)
        assert (server is not None) == (name == "served"), (name, server)
        proc.send_signal(signal.SIGTERM)
        statuses[name] = proc.wait(timeout=20)
        errors = proc.stderr.read().decode(errors="replace")
        if server is not None:
            assert wait_gone(server, 5), errors
        statuses[name + " stderr"] = errors[-2000:]
    assert statuses["served"] == statuses["cold"], statuses


def test_kill_9_of_the_launcher_ends_its_server_within_seconds(spare, tmp_path):
    proc = _running_launch({**agent_env(tmp_path), **spare.env}, tmp_path)
    server = server_of(proc.pid, parent=spare.pid)
    assert server is not None and ppid(server) == spare.pid
    proc.kill()
    proc.wait(timeout=10)
    assert wait_gone(server, 8), "the server outlived its launcher"
    assert alive(spare.pid)


async def test_five_parallel_launches_are_all_served_by_forks_of_the_spare(spare, tmp_path):
    env = {**spare.full_env(), **agent_env(tmp_path)}
    harnesses = [AcpHarness(AGENT, env=env) for _ in range(5)]

    async def one(harness: AcpHarness) -> str:
        await harness.start()
        await harness.initialize()
        return (await harness.new_session(str(tmp_path))).session_id

    try:
        sessions = await asyncio.gather(*(one(h) for h in harnesses))
        assert len(set(sessions)) == 5
        servers = [server_of(h.pid, parent=spare.pid) for h in harnesses]
        assert all(s is not None and ppid(s) == spare.pid for s in servers), servers
        assert len(set(servers)) == 5
    finally:
        for harness in harnesses:
            await harness.close()


def test_a_connection_with_a_wrong_token_is_refused_and_nothing_is_forked(spare, tmp_path):
    key = spare.status()["key"]
    before = served_children(spare)
    fields = dict(zip(_launcher.REQUEST_FIELDS, [b""] * len(_launcher.REQUEST_FIELDS)))
    fields.update(version=_launcher.VERSION, token=os.urandom(32), key=b"whatever", umask=b"18")
    dirfd = os.open(spare.path, os.O_PATH)
    null = os.open(os.devnull, os.O_RDWR)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(f"/proc/self/fd/{dirfd}/spare-{key}.sock")
        conn.sendmsg([b"R" + _launcher.pack(list(fields.values()))],
                     [(socket.SOL_SOCKET, socket.SCM_RIGHTS, _launcher._fd_bytes([null, null, null, dirfd]))])
        conn.settimeout(5)
        assert conn.recv(100) == b"Nwrong token"
    finally:
        conn.close()
        os.close(null)
        os.close(dirfd)
    assert served_children(spare) == before
    assert "refused a connection with a wrong token" in spare.logs()


async def _confined_bash_output(spare, tmp_path: Path, ws: Path, command: str, extra_env: dict | None = None) -> str:
    """Run ``command`` as the model's ``bash`` call in a launch served by ``spare`` (a real confined
    shell); returns what the model was told. Skips where this machine cannot confine the shell."""
    async with OfflineEndpoint() as endpoint:
        endpoint.push(tool_call_stream([call("b", "bash", command=command)]))
        endpoint.push(text_stream("done"))
        env = {**spare.full_env(), **agent_env(tmp_path, endpoint.base_url), **(extra_env or {})}
        async with AcpHarness(AGENT, env=env, config=ClientConfig(permission="allow_once")) as harness:
            await harness.initialize()
            assert ppid(server_of(harness.pid, parent=spare.pid)) == spare.pid
            session = (await harness.new_session(str(ws))).session_id
            assert (await harness.prompt(session, "look")).stop_reason == "end_turn"
        (status,) = [e.data for e in events(tmp_path / "state", session) if e.type == "sandbox/status"]
        if status["level"] != "landlock" or not status.get("masks", True):
            pytest.skip(f"this machine cannot confine the shell: {status}")
        return endpoint.requests[-1].json()["messages"][-1]["content"]


async def test_a_confined_shell_command_of_a_served_launch_cannot_see_the_spare_folder(spare, tmp_path):
    key = spare.status()["key"]
    sock = spare.path / f"spare-{key}.sock"
    assert (spare.path / "token").stat().st_size == 32 and sock.exists()  # there, outside the sandbox
    connect = ("import socket, sys\ns = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)\n"
               f"try:\n    s.connect({str(sock)!r})\n    print('CONNECTED')\n"
               "except OSError as e:\n    print('REFUSED', e)\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "connect.py").write_text(connect)
    out = await _confined_bash_output(spare, tmp_path, ws, f"ls -a {spare.path}; wc -c {spare.path}/token; "
                                                           "python3 connect.py")
    assert "token" not in out.split("[sandbox]")[0].replace(f"{spare.path}/token", "")
    assert f"ls: cannot open directory '{spare.path}': Permission denied" in out, out
    assert "REFUSED" in out and "CONNECTED" not in out, out


def test_the_spare_runs_one_thread_whenever_it_forks(spare):
    assert "Threads:\t1\n" in Path(f"/proc/{spare.pid}/status").read_text()
    assert len(os.listdir(f"/proc/{spare.pid}/task")) == 1
    assert "refusing to fork" not in spare.logs()


def test_a_spare_asked_to_stop_with_nothing_running_ends_at_once_not_at_its_next_check(tmp_path):
    folder = SpareFolder(tmp_path / "spare", idle=600)  # its checks: once a minute
    pid = folder.start()
    started = time.monotonic()
    folder.stop()
    assert not alive(pid) and time.monotonic() - started < 5, "the stopped spare slept until its next check"


def test_agent_server_spare_status_names_the_spare_and_the_key_of_this_launch(spare):
    status = spare.status()
    (only,) = status["spares"]
    assert only["pid"] == spare.pid and only["key"] == status["key"] and only["serves_this_launch"]
    assert status["folder"] == str(spare.path)
    text = subprocess.run([*AGENT, "spare", "status"], env=spare.full_env(), capture_output=True, text=True,
                          check=True).stdout
    assert f"pid {spare.pid}" in text and "serves launches from here" in text


# -- no spare, a refusing one, a broken one ------------------------------------------------------------


def test_spare_off_runs_cold_and_starts_no_spare(tmp_path):
    folder = tmp_path / "spare"
    proc = launch({**agent_env(tmp_path), "AGENT_SERVER_SPARE": "off", "AGENT_SERVER_SPARE_DIR": str(folder)})
    out, err = proc.communicate(INIT, timeout=30)
    assert proc.returncode == 0 and b'"protocolVersion":1' in out and not err
    assert not folder.exists()


@pytest.mark.parametrize("kind", ["group-readable", "symlink", "not-ours"])
def test_a_spare_folder_that_is_not_private_is_refused_with_one_line_and_the_launch_runs_cold(tmp_path, kind):
    folder = tmp_path / "spare"
    if kind == "group-readable":
        folder.mkdir(mode=0o755)
        folder.chmod(0o755)
    elif kind == "symlink":
        (tmp_path / "real").mkdir(mode=0o700)
        folder.symlink_to(tmp_path / "real")
    else:
        folder.mkdir(mode=0o700)
        os.chown(folder, 65534, 65534) if os.getuid() == 0 else pytest.skip("needs root to give the folder away")
    proc = launch({**agent_env(tmp_path), "AGENT_SERVER_SPARE": "on", "AGENT_SERVER_SPARE_DIR": str(folder)})
    out, err = proc.communicate(INIT, timeout=30)
    assert proc.returncode == 0 and b'"protocolVersion":1' in out
    lines = err.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-server: not using a warm spare:"), lines
    assert str(folder) in lines[0]
    assert not list((tmp_path / "real" if kind == "symlink" else folder).iterdir())


def test_a_spare_that_accepts_and_closes_without_a_pid_leaves_the_launch_cold_with_every_byte_of_stdin(tmp_path):
    folder = SpareFolder(tmp_path / "spare")
    folder.path.mkdir(mode=0o700)
    key = folder.status()["key"]
    dirfd = os.open(folder.path, os.O_PATH)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(f"/proc/self/fd/{dirfd}/spare-{key}.sock")
    listener.listen(1)
    seen = []

    def fake_spare() -> None:
        conn, _ = listener.accept()
        data, ancdata, _, _ = conn.recvmsg(1 << 20, socket.CMSG_SPACE(16))
        for _level, _kind, payload in ancdata:
            for i in range(0, len(payload), 4):
                os.close(int.from_bytes(payload[i:i + 4], sys.byteorder))
        seen.append(data[:1])
        conn.close()  # no pid: the launch must run cold, with stdin untouched

    thread = threading.Thread(target=fake_spare, daemon=True)
    thread.start()
    try:
        proc = launch({**agent_env(tmp_path), **folder.env})
        out, err = proc.communicate(INIT + new_session(2, str(tmp_path)), timeout=30)  # both lines sent at once
        thread.join(5)
    finally:
        listener.close()
        os.close(dirfd)
    assert seen == [b"R"]
    assert proc.returncode == 0, err
    answers = [json.loads(line) for line in out.splitlines()]
    assert [a.get("id") for a in answers if "method" not in a] == [1, 2]
    assert "sessionId" in [a for a in answers if a.get("id") == 2][0]["result"]


def test_the_warm_imports_read_no_environment_variable_outside_the_key(tmp_path):
    """A child keeps what the spare's imports read from the spare's own environment (only the key's
    variables): an import-time read of any other variable would give every served launch the
    spare's value (``_daemon.py``'s audit)."""
    probe = r"""
import json, os, sys
read = set()
cls = os._Environ
get, contains, iterate = cls.__getitem__, cls.__contains__, cls.__iter__
def getitem(self, key):
    read.add(key.decode() if isinstance(key, bytes) else key); return get(self, key)
def has(self, key):
    read.add(key.decode() if isinstance(key, bytes) else key); return contains(self, key)
def each(self):
    read.add("*"); return iterate(self)
cls.__getitem__, cls.__contains__, cls.__iter__ = getitem, has, each
from agent_server.spare import _daemon
failed = _daemon.warm()
print(json.dumps({"read": sorted(read), "failed": failed}))
"""
    env = {k: v for k, v in os.environ.items() if _launcher.key_variable(k.encode())}
    done = subprocess.run([sys.executable, "-P", "-c", probe], env=env, capture_output=True, text=True, cwd="/",
                          check=True)
    found = json.loads(done.stdout)
    assert found["failed"] == []
    outside = {k for k in found["read"] if not _launcher.key_variable(k.encode())} - set(RESET_IN_CHILD)
    assert not outside, f"read at import time, outside the key: {sorted(outside)}"


# -- lifetime ------------------------------------------------------------------------------------------


def test_a_spare_killed_mid_session_leaves_its_server_serving_and_the_launcher_exits_1_at_its_end(tmp_path):
    folder = SpareFolder(tmp_path / "spare")
    try:
        pid = folder.start()
        proc = _running_launch({**agent_env(tmp_path), **folder.env}, tmp_path)
        server = server_of(proc.pid, parent=pid)
        assert ppid(server) == pid
        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid, 5)
        proc.stdin.write(b'{"jsonrpc":"2.0","id":3,"method":"session/list","params":{}}\n')
        proc.stdin.flush()
        assert "result" in read_response(proc, 3)  # the server goes on without the spare
        proc.stdin.close()
        assert proc.wait(timeout=20) == 1  # no wait status to relay: the launcher saw its end on the pidfd
        assert not alive(server)
    finally:
        folder.stop()


def test_a_launch_on_a_terminal_runs_cold_and_starts_no_spare(tmp_path):
    folder = tmp_path / "spare"
    controller, terminal = os.openpty()
    try:
        proc = subprocess.Popen(AGENT, stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env={**os.environ, **agent_env(tmp_path), "AGENT_SERVER_SPARE": "on",
                                     "AGENT_SERVER_SPARE_DIR": str(folder)})
        os.write(controller, b"\x04")  # Ctrl-D: end of input
        out, err = proc.communicate(timeout=30)
    finally:
        os.close(controller)
        os.close(terminal)
    assert proc.returncode == 0 and b"waiting for an ACP client on stdin" in err
    assert not folder.exists()


def test_an_idle_spare_exits_after_its_idle_time_and_one_whose_socket_is_removed_exits_at_once(tmp_path):
    idle = SpareFolder(tmp_path / "idle", idle=1)
    pid = idle.start()
    assert wait_gone(pid, 5), "the idle spare outlived AGENT_SERVER_SPARE_IDLE"
    assert "stopping: idle for 1 s" in idle.logs() and not list(idle.path.glob("*.sock"))
    gone = SpareFolder(tmp_path / "gone", idle=20)  # checks every 2 s
    pid = gone.start()
    try:
        next(gone.path.glob("*.sock")).unlink()
        assert wait_gone(pid, 5), "the spare outlived its socket"
        assert "stopping: its folder or socket was removed" in gone.logs()
    finally:
        gone.stop()


def test_launches_that_all_find_no_spare_start_exactly_one(tmp_path):
    folder = SpareFolder(tmp_path / "spare")
    env = {**agent_env(tmp_path), **folder.env}
    procs = [launch(env) for _ in range(5)]
    try:
        for proc in procs:
            out, err = proc.communicate(INIT, timeout=30)
            assert proc.returncode == 0 and b'"protocolVersion":1' in out and not err, err
        folder.wait_serving()
        time.sleep(1)  # the other starts end at the lock
        assert len(folder.live()) == 1
        assert len([p for p in os.listdir("/proc") if p.isdigit() and _is_spare_of(int(p), folder.path)]) == 1
    finally:
        folder.stop()


def _is_spare_of(pid: int, folder: Path) -> bool:
    """A spare of ``folder`` (its forks have the same command line: not counted)."""
    try:
        return str(folder).encode() in Path(f"/proc/{pid}/cmdline").read_bytes() and alive(pid) and \
            str(folder).encode() not in Path(f"/proc/{ppid(pid)}/cmdline").read_bytes()
    except OSError:
        return False


EXPLOIT = """
import os, socket, sys
folder, key_file, outside = sys.argv[1:4]
def pack(fields):
    return b"".join(b"%d:%s" % (len(f), f) for f in fields)
key = open(key_file, "rb").read()
token = open(os.path.join(folder, "token"), "rb").read()
(sock,) = [n for n in os.listdir(folder) if n.endswith(".sock")]
print("SAW", sock, len(token))
env = dict(os.environ, AGENT_SERVER_SANDBOX="off", AGENT_SERVER_STATE_DIR=outside)
fields = [b"agent-server-spare/1", token, key, b"agent-server", b"agent-server", b"", b"-",
          b"\\0".join(k.encode() + b"=" + v.encode() for k, v in env.items()), b"18",
          open("/proc/self/limits", "rb").read(), b"D" * 64, b"", b"agent-server"]
fds = [os.open(os.devnull, os.O_RDWR)] * 3 + [os.open("/", os.O_PATH | os.O_DIRECTORY)]
c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
c.connect(os.path.join(folder, sock))
c.sendmsg([b"R" + pack(fields)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                    b"".join(fd.to_bytes(4, sys.byteorder) for fd in fds))])
c.settimeout(10)
answer = c.recv(1000)
print("ANSWER", answer[:60])
if answer.startswith(b"P"):
    c.send(b"A")
"""


async def test_a_confined_command_cannot_get_an_unconfined_fork_of_another_spare(spare, tmp_path):
    """The exploit of the report: a spare in a folder the sandbox does not hide (not the launch's
    own), the right token and the right key — a confined bash still gets no fork."""
    other = SpareFolder(tmp_path / "other-spare", idle=60)
    other.start()
    try:
        other.wait_serving()
        # the key of an unconfined launch, as an attacker would reconstruct it (its sum names the socket)
        key = subprocess.run([sys.executable, "-c", "import sys; from agent_server.spare import _launcher as L; "
                              "sys.stdout.buffer.write(L.key_bytes())"], env=other.full_env(),
                             capture_output=True, check=True).stdout
        assert _launcher.key_sum(key) == other.status()["key"]
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "key.bin").write_bytes(key)
        (ws / "exploit.py").write_text(EXPLOIT)
        outside = tmp_path / "outside-state"
        before = {int(c) for c in Path(f"/proc/{other.pid}/task/{other.pid}/children").read_text().split()}
        async with OfflineEndpoint() as endpoint:
            endpoint.push(tool_call_stream([call("b", "bash", command=f"{sys.executable} exploit.py "
                                                                     f"{other.path} key.bin {outside}")]))
            endpoint.push(text_stream("done"))
            env = {**spare.full_env(), **agent_env(tmp_path, endpoint.base_url)}
            async with AcpHarness(AGENT, env=env, config=ClientConfig(permission="allow_once")) as harness:
                await harness.initialize()
                session = (await harness.new_session(str(ws))).session_id
                assert (await harness.prompt(session, "escape")).stop_reason == "end_turn"
            (status,) = [e.data for e in events(tmp_path / "state", session) if e.type == "sandbox/status"]
            if status["level"] != "landlock":
                pytest.skip(f"this machine cannot confine the shell: {status}")
            out = endpoint.requests[-1].json()["messages"][-1]["content"]
        if "SAW" not in out:  # the folder is hidden too (defense in depth): the request is not even made
            assert "Traceback" in out or "Permission denied" in out, out
        else:
            assert "ANSWER b'Npeer not confined as the spare'" in out, out
            assert "refused a connection: the peer's" in other.logs()
        after = {int(c) for c in Path(f"/proc/{other.pid}/task/{other.pid}/children").read_text().split()}
        assert after <= before | {other.status()["spares"][0]["standby"]}, "the spare forked for a confined peer"
        assert not outside.exists(), "an unconfined fork wrote outside the workspace"
    finally:
        other.stop()


async def test_a_confined_shell_command_cannot_see_the_default_spare_folders_of_other_launches(spare, tmp_path):
    """Not only the launch's own spare folder (AGENT_SERVER_SPARE_DIR) is hidden: also
    ``$XDG_RUNTIME_DIR/agent-server`` and ``/tmp/agent-server-<uid>``, where launches of other
    environments keep their spares' tokens and sockets."""
    runtime = tmp_path / "runtime"
    (runtime / "agent-server").mkdir(parents=True, mode=0o700)
    (runtime / "agent-server" / "token").write_bytes(os.urandom(32))
    targets = [str(runtime / "agent-server")]
    tmp_default = Path(f"/tmp/agent-server-{os.getuid()}")
    if tmp_default.is_dir():
        targets.append(str(tmp_default))
    ws = tmp_path / "ws"
    ws.mkdir()
    out = await _confined_bash_output(spare, tmp_path, ws, "; ".join(f"ls -a {t}" for t in targets),
                                      {"XDG_RUNTIME_DIR": str(runtime)})
    for target in targets:
        assert f"ls: cannot open directory '{target}': Permission denied" in out, out
    assert "token" not in out.split("[sandbox]")[0], out


def test_a_launch_whose_lang_names_a_locale_not_installed_is_served_by_the_spare(tmp_path, monkeypatch):
    """PEP 538: Python coerces the C locale, setting LC_CTYPE=C.UTF-8 and UTF-8 mode in the
    launcher; a spare started with that LC_CTYPE had neither, its key never matched, and every
    launch ran cold (``not starting: this process's key sums to …``)."""
    missing = "en_ZZ.UTF-8"
    check = subprocess.run([sys.executable, "-c", "import sys; print(sys.flags.utf8_mode)"], capture_output=True,
                           text=True, env={"PATH": os.environ.get("PATH", ""), "LANG": missing})
    if check.stdout.strip() != "1":
        pytest.skip("this interpreter does not coerce the C locale here")
    for name in ("LC_ALL", "LC_CTYPE", "PYTHONUTF8", "PYTHONCOERCECLOCALE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", missing)
    folder = SpareFolder(tmp_path / "spare")
    try:
        folder.start()
        assert "not starting" not in folder.logs()
        proc = launch({**agent_env(tmp_path), **folder.env, "AGENT_SERVER_LOG_LEVEL": "DEBUG"})
        out, err = proc.communicate(INIT, timeout=30)
        assert proc.returncode == 0, err
        assert SERVED_NOTE.encode() in err, err
    finally:
        folder.stop()


@pytest.mark.parametrize("name", ["spare-0123456789abcdef.lock", "token", "log"])
def test_a_fifo_in_the_spare_folder_hangs_neither_spare_status_nor_stop_nor_a_launch(tmp_path, name):
    folder = SpareFolder(tmp_path / "spare")
    folder.path.mkdir(mode=0o700)
    if name == "log":  # the log of this launch's key: read by every launch (did its spare fail to start?)
        key = subprocess.run([*AGENT, "spare", "status", "--json"], env=folder.full_env(), capture_output=True,
                             text=True, timeout=30, check=True)
        name = f"spare-{json.loads(key.stdout)['key']}.log"
    os.mkfifo(folder.path / name, 0o600)
    for command in (["spare", "status", "--json"], ["spare", "stop"]):
        subprocess.run([*AGENT, *command], env=folder.full_env(), capture_output=True, timeout=20)
    proc = launch({**agent_env(tmp_path), **folder.env})
    out, err = proc.communicate(INIT, timeout=20)  # runs cold
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[0])["result"]["protocolVersion"] == 1
    if name.endswith(".lock"):  # another key's FIFO: this launch started its spare — wait for it, then stop it
        folder.wait_serving()
    folder.stop()


def test_a_spare_that_crashed_while_warming_up_is_not_started_again_on_every_launch(tmp_path):
    """Its log has a traceback and no ``serving key`` (no ``not starting:`` either): the same
    back-off as a spare that refused to start, then a new one."""
    folder = SpareFolder(tmp_path / "spare")
    folder.path.mkdir(mode=0o700)
    key = folder.status()["key"]
    log = folder.path / f"spare-{key}.log"
    crash = "Traceback (most recent call last):\n  ...\nFileNotFoundError: No usable temporary directory found\n"
    log.write_text(crash)
    try:
        for _ in range(2):
            proc = launch({**agent_env(tmp_path), **folder.env})
            out, err = proc.communicate(INIT, timeout=30)
            assert proc.returncode == 0, err
        time.sleep(1)
        assert folder.live() == {} and log.read_text() == crash, "a spare was started again"
        old = time.time() - _launcher.RETRY_AFTER - 5
        os.utime(log, (old, old))
        folder.start()
        assert " serving key " in log.read_text()
    finally:
        folder.stop()
