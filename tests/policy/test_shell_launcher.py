"""The long-lived launcher of confined shell commands (``sandbox_zygote`` / ``shell_spawn``), for
real: each call forked from it is confined exactly like a call through the per-command wrapper —
its own PID namespace with a fresh ``/proc``, that call's masks, no inherited descriptor — and
the launcher's own failures never leave a command unconfined or running."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from agent_server.config.load import PolicySettings
from agent_server.policy.sandbox import shell_spawn
from agent_server.policy.modes import ModeState
from agent_server.policy.sandbox.confiner import ShellConfiner, probe_status
from agent_server.session import EventLog
from agent_server.tools import ToolContext
from agent_server.tools.bash import BashArgs, BashTool
from support.procs import pid_alive, processes_naming, wait_gone
from support.timeouts import HANG

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def shell(tmp_path):
    """``run(command) -> ToolResult`` through a workspace-write ``ShellConfiner`` (and the confiner)."""
    ws, home, tmp = tmp_path / "ws", tmp_path / "home", tmp_path / "session" / "tmp"
    for folder in (ws, home, tmp):
        folder.mkdir(parents=True)
    log = EventLog.create(tmp_path / "session" / "events.jsonl", {"cwd": str(ws)})
    settings = PolicySettings(network=False)
    status = await probe_status(settings)
    assert status.write_confinable, status.problems
    confiner = ShellConfiner(ModeState(log, "workspace-write"), status, [ws], tmp, settings)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    on_disk = ToolContext.on_disk(ws)
    ctx = ToolContext(on_disk.roots, on_disk.files, on_disk.reads, env=env, shell_launcher=confiner)

    async def run(command: str):
        return await BashTool().run(BashArgs(command=command), ctx)

    run.confiner = confiner  # type: ignore[attr-defined]
    run.ws = ws  # type: ignore[attr-defined]
    return run


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rfind(")") + 2:].split()[1])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if _ppid(int(entry.name)) == pid:
                    found.append(int(entry.name))
            except (OSError, ValueError, IndexError):
                continue
    return found


async def test_concurrent_launcher_calls_each_get_their_own_pid_namespace_and_fresh_proc(shell):
    command = "echo pid=$$; while [ ! -e go ]; do sleep 0.02; done; ls /proc | grep -cE '^[0-9]+$'"  # both at once
    first = asyncio.ensure_future(shell(command))
    second = asyncio.ensure_future(shell(command))
    deadline = time.monotonic() + HANG
    try:
        while len(_children(shell_spawn.launcher_pid() or -1)) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        zygote = shell_spawn.launcher_pid()
        assert zygote is not None and len(_children(zygote)) == 2, "both calls run as children of the launcher"
    finally:
        (shell.ws / "go").touch()
    results = await asyncio.gather(first, second)
    for res in results:
        assert res.meta["exit_code"] == 0, res.text
        lines = res.text.splitlines()
        # PID 1 is the namespace's init, the shell is 2; /proc lists init, the shell, `ls` and
        # `grep` — or not yet `grep`, when `ls` reads /proc before the pipeline's second fork (a
        # race seen in CI); the other call's init, shell and `sleep`/`ls`/`grep` are never there
        assert lines[0] == "pid=2" and lines[1] in ("3", "4"), res.text
    assert shell_spawn.launcher_pid() == zygote, "one launcher serves every call"


async def test_masks_are_applied_per_call_and_the_exact_allowed_command_alone_sees_the_secret(shell):
    (shell.ws / ".env").write_text("TOKEN=s3cret\n")
    command = "cat .env; echo end"
    assert "s3cret" not in (await shell(command)).text
    shell.confiner.allow_secrets_once(command)
    assert "s3cret" in (await shell(command)).text
    again = await shell(command)
    assert "s3cret" not in again.text and "end" in again.text


async def test_a_launched_command_inherits_no_socket_and_no_other_calls_pipe(shell):
    other = asyncio.ensure_future(shell("touch started; while [ ! -e go ]; do sleep 0.02; done"))
    while not (shell.ws / "started").exists():  # it runs: its status and output pipes are open in the launcher
        assert not other.done(), other.result().text
        await asyncio.sleep(0.01)
    try:
        res = await shell("find /proc/$$/fd -mindepth 1 -printf '%f %l\\n'; true")  # the shell's own
    finally:
        (shell.ws / "go").touch()
    await other
    fds = dict(line.split(" ", 1) for line in res.text.splitlines()[:-1] if " " in line)
    assert "socket:" not in res.text, res.text
    assert sorted(fds) == ["0", "1", "2"], res.text
    assert fds["0"] == "/dev/null" and fds["1"] == fds["2"] and fds["1"].startswith("pipe:"), res.text


async def test_a_launcher_killed_mid_call_ends_that_command_and_the_next_call_restarts_it(shell, tmp_path):
    # No race with the command's own time: it says it started (a file), then sleeps far longer than
    # any wait here; the kill can only come while it runs, and only its death ends the call.
    started, marker = shell.ws / "started", f"{uuid.uuid4().int % 10**6 + 10**6}.3125"
    task = asyncio.ensure_future(shell(f"touch {started}; exec sleep {marker}"))
    deadline = time.monotonic() + 60
    while not (started.exists() and processes_naming(marker)) and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert started.exists() and not task.done(), "the command never started"
    command = processes_naming(marker)
    zygote = shell_spawn.launcher_pid()
    assert zygote is not None and command
    (leader,) = _children(zygote)
    os.kill(zygote, signal.SIGKILL)
    try:
        res = await asyncio.wait_for(task, HANG)
        assert res.meta["exit_code"] == -signal.SIGKILL and res.is_error, res.text
        assert wait_gone([leader, *command]), "the command ran on after its launcher died"
    finally:
        for pid in processes_naming(marker):
            os.kill(pid, signal.SIGKILL)
    after = await shell("echo again")
    assert "again" in after.text and after.meta["exit_code"] == 0
    assert shell_spawn.launcher_pid() not in (None, zygote)


async def test_a_launcher_that_cannot_start_falls_back_to_the_confined_wrapper(shell, monkeypatch, tmp_path):
    shell_spawn.stop_launcher()
    monkeypatch.setattr(shell_spawn, "ZYGOTE", tmp_path / "missing.py")
    outside = tmp_path / "outside"
    res = await shell(f"echo in > inside; echo out > {outside}; echo pid=$$")
    assert (shell.ws / "inside").read_text() == "in\n"
    assert not outside.exists() and "Permission denied" in res.text
    assert "pid=2" in res.text, "the wrapper runs it in its own PID namespace too"
    shell_spawn.stop_launcher()


DETACHED = "setsid bash -c \"trap '' TERM HUP; exec sleep {0}\" > /dev/null 2>&1 < /dev/null & "
"""A child that leaves the command's process group and ignores the polite stops."""


@pytest.mark.parametrize("mode", ["workspace-write", "danger-full-access"])
def test_the_launcher_and_its_command_end_when_the_server_is_killed(tmp_path, mode):
    ws, started, marker = tmp_path / "ws", tmp_path / "ws" / "started", f"{uuid.uuid4().int % 10**6 + 10**6}.4375"
    (tmp_path / "session" / "tmp").mkdir(parents=True)
    ws.mkdir()
    holder = tmp_path / "holder.py"
    holder.write_text(textwrap.dedent(f"""
        import asyncio, os, sys
        sys.path.insert(0, {str(ROOT)!r})
        from pathlib import Path
        from agent_server.config.load import PolicySettings
        from agent_server.policy.sandbox import shell_spawn
        from agent_server.policy.modes import ModeState
        from agent_server.policy.sandbox.confiner import ShellConfiner, probe_status
        from agent_server.session import EventLog

        async def main():
            ws, tmp = Path({str(ws)!r}), Path({str(tmp_path / "session" / "tmp")!r})
            log = EventLog.create(tmp.parent / "events.jsonl", {{"cwd": str(ws)}})
            settings = PolicySettings()
            confiner = ShellConfiner(ModeState(log, {mode!r}), await probe_status(settings), [ws], tmp, settings)
            command = {DETACHED.format(marker) + "touch started; exec sleep " + marker!r}
            launch = confiner(["bash", "-c", command], {{"PATH": os.environ["PATH"]}})
            proc = await launch.spawn(ws, launch.env)
            print(shell_spawn.launcher_pid(), proc.pid, flush=True)
            await asyncio.sleep(600)

        asyncio.run(main())
    """))
    proc = subprocess.Popen([sys.executable, str(holder)], stdout=subprocess.PIPE, text=True)
    try:
        zygote, leader = map(int, proc.stdout.readline().split())
        assert _ppid(leader) == zygote, "the call is forked from the launcher"
        deadline = time.monotonic() + 60  # the command says it started: both sleeps run
        while not (started.exists() and len(processes_naming(marker)) >= 2) and time.monotonic() < deadline:
            time.sleep(0.02)
        command = processes_naming(marker)
        assert len(command) >= 2 and pid_alive(zygote) and pid_alive(leader), command
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert wait_gone([zygote, leader, *command]), "the command (or its detached child) outlived the server"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in processes_naming(marker):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
async def full_access(tmp_path):
    """``run(command, **args) -> ToolResult`` through a danger-full-access ``ShellConfiner``."""
    ws, tmp = tmp_path / "ws", tmp_path / "session" / "tmp"
    for folder in (ws, tmp):
        folder.mkdir(parents=True)
    log = EventLog.create(tmp_path / "session" / "events.jsonl", {"cwd": str(ws)})
    settings = PolicySettings()
    confiner = ShellConfiner(ModeState(log, "danger-full-access"), await probe_status(settings), [ws], tmp, settings)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    on_disk = ToolContext.on_disk(ws)
    ctx = ToolContext(on_disk.roots, on_disk.files, on_disk.reads, env=env, shell_launcher=confiner)

    def run(command: str, **args):
        return BashTool().run(BashArgs(command=command, **args), ctx)

    run.ws = ws  # type: ignore[attr-defined]
    return run


async def test_an_unconfined_call_started_a_python_reaper_per_call_now_it_forks_from_the_launcher(full_access):
    """The unconfined reaper was a ``python -I -S reaper.py`` per call (bench/README.md: an unconfined
    ``true`` 161-260 ms against 15 ms). Now the call's leader is a fork of the long-lived launcher,
    as a confined call's is: no interpreter starts, and no reaper process is in the tree."""
    started, marker = full_access.ws / "started", f"{uuid.uuid4().int % 10**6 + 10**6}.5625"
    task = asyncio.ensure_future(full_access(f"touch {started}; exec sleep {marker}"))
    deadline = time.monotonic() + 60
    while not (started.exists() and processes_naming(marker)) and not task.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    try:
        (sleeper,) = [p for p in processes_naming(marker) if Path(f"/proc/{p}/comm").read_text() == "sleep\n"]
        leader = _ppid(sleeper)
        zygote = shell_spawn.launcher_pid()
        assert zygote is not None and _ppid(leader) == zygote, "the unconfined call is forked from the launcher"
        assert Path(f"/proc/{leader}/cmdline").read_bytes() == Path(f"/proc/{zygote}/cmdline").read_bytes()
        assert b"reaper.py" not in Path(f"/proc/{leader}/cmdline").read_bytes()
        assert os.getpgid(leader) == leader == os.getpgid(sleeper), "the call leads its own process group"
    finally:
        task.cancel()
        res = await task
    assert res.meta["outcome"] == "cancelled" and wait_gone([sleeper, leader])


async def test_an_unconfined_call_through_the_launcher_keeps_the_reapers_guarantees(full_access, monkeypatch):
    res = await full_access("exit 7")
    assert res.meta["exit_code"] == 7
    res = await full_access("kill -KILL $$")
    assert res.meta["exit_code"] == -9 and "killed by SIGKILL" in res.text
    res = await full_access("echo out; echo err >&2; pwd")
    assert res.text.splitlines()[:3] == ["out", "err", str(full_access.ws)], res.text
    res = await full_access("head -c 3000000 /dev/zero | tr '\\0' x")
    assert res.meta["output_bytes"] == 3_000_000 and "bytes of output omitted" in res.text
    # the launcher's own environment never reaches the command: only the call's
    shell_spawn.stop_launcher()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-server-environment")
    res = await full_access("env")
    assert "sk-from-the-server-environment" not in res.text and "OPENAI_API_KEY" not in res.text
    assert f"HOME={full_access.ws.parent}" in res.text
    for how in ("exits", "timeout", "cancelled"):  # a detached child ignoring TERM and HUP ends with the call
        marker = f"{uuid.uuid4().int % 10**6 + 10**6}.6875"
        command = DETACHED.format(marker) + f"nohup sleep {marker} > /dev/null 2>&1 & echo started"
        if how == "exits":
            res = await full_access(command)
            assert res.meta["outcome"] == "exited" and "started" in res.text
            seen = processes_naming(marker)
        else:  # the three sleeps are seen running before the timeout or the cancel
            task = asyncio.ensure_future(full_access(command + f"; sleep {marker}",
                                                     timeout_ms=8000 if how == "timeout" else None))
            deadline = time.monotonic() + 60
            while len(seen := processes_naming(marker)) < 3 and not task.done() and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            assert len(seen) >= 3, seen
            if how == "cancelled":
                task.cancel()
            res = await task
            assert res.meta["outcome"] == ("timeout" if how == "timeout" else "cancelled")
        try:
            assert wait_gone(seen), (how, processes_naming(marker))
        finally:
            for pid in processes_naming(marker):
                os.kill(pid, signal.SIGKILL)


async def test_the_confined_shell_read_a_secret_named_in_capitals_and_the_file_a_credential_variable_names(
        shell, monkeypatch, tmp_path):
    """The sandbox hid ``.env`` but not ``.ENV`` (names matched case-sensitively), nor the key
    ``$GOOGLE_APPLICATION_CREDENTIALS`` points to (a file tool asked for it; ``cat`` read it). Both
    are masked now — also when the command does not name them. The exact allowed command sees ``.ENV``
    (a secret, asked); the variable's file is a credential store, hidden from every confined command."""
    (shell.ws / ".ENV").write_text("TOKEN=upper-s3cret\n")
    (shell.ws / "sa.json").write_text('{"private_key": "gcp-s3cret"}\n')
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(shell.ws / "sa.json"))
    command = "cat .E* sa.*; echo end"
    res = await shell(command)
    assert "upper-s3cret" not in res.text and "gcp-s3cret" not in res.text and "end" in res.text, res.text
    shell.confiner.allow_secrets_once(command)
    res = await shell(command)
    assert "upper-s3cret" in res.text and "gcp-s3cret" not in res.text, res.text


async def test_a_credential_variable_naming_the_workspace_itself_masked_the_root(shell, monkeypatch):
    """A misset ``$DOCKER_CONFIG`` (the workspace folder, or one above it) named the root as a
    credential folder to hide from the shell: a variable's folder that is or holds a root is not
    masked (the files below it still ask in the file tools); a file it names still is."""
    (shell.ws / "sa.json").write_text("{}\n")
    monkeypatch.setenv("DOCKER_CONFIG", str(shell.ws))
    monkeypatch.setenv("AZURE_CONFIG_DIR", str(shell.ws.parent))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(shell.ws / "sa.json"))
    spec = shell.confiner.spec("workspace-write", False)
    if "masks" not in spec:
        pytest.skip("no mount namespace here: nothing is masked")
    real = os.path.realpath(shell.ws)
    assert real not in spec["masks"] and os.path.dirname(real) not in spec["masks"], spec["masks"]
    assert os.path.join(real, "sa.json") in spec["masks"]
