"""The user's ssh-agent and confined commands (the last stop's open security item 3): the shell
inherited ``SSH_AUTH_SOCK`` and, with the network on (the default), a confined command could
connect to the agent and sign with every key it holds — a ``git push`` or ``ssh`` anywhere as the
user. Now a confined command gets no ``SSH_AUTH_SOCK`` and the socket it named is masked in its
mount namespace (found by path, it cannot be connected to), unless ``[policy] shell_env_allow``
names ``SSH_AUTH_SOCK``. Real sandbox, a real unix socket standing in for the agent."""

from __future__ import annotations

import os
import socket

import pytest

from agent_server.config.load import PolicySettings
from agent_server.policy.modes import ModeState
from agent_server.policy.sandbox.confiner import ShellConfiner, probe_status
from agent_server.session import EventLog
from agent_server.tools import ToolContext
from agent_server.tools.bash import BashArgs, BashTool

CONNECT = ("import os, socket, sys\n"
           "print('VAR', os.environ.get('SSH_AUTH_SOCK', '-'))\n"
           "try:\n"
           "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(sys.argv[1]); s.sendall(b'sign')\n"
           "    print('CONNECTED')\n"
           "except OSError as exc:\n"
           "    print('REFUSED', exc.strerror)\n")


async def _run(tmp_path, command, env_extra, **settings):
    ws, home, tmp = tmp_path / "ws", tmp_path / "home", tmp_path / "session" / "tmp"
    for folder in (ws, home, tmp):
        folder.mkdir(parents=True, exist_ok=True)
    log = EventLog.create(tmp_path / "session" / f"events-{len(os.listdir(tmp_path / 'session'))}.jsonl",
                          {"cwd": str(ws)})
    policy = PolicySettings(**settings)
    launcher = ShellConfiner(ModeState(log, "workspace-write"), await probe_status(policy), [ws], tmp, policy)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8", **env_extra}
    base = ToolContext.on_disk(ws)
    ctx = ToolContext(base.roots, base.files, base.reads, env=env, shell_launcher=launcher)
    (ws / "connect.py").write_text(CONNECT)
    return await BashTool().run(BashArgs(command=command), ctx)


@pytest.fixture
def agent(tmp_path):
    """A listening unix socket where an ssh-agent's would be (its own folder, as ``ssh-agent`` makes)."""
    folder = tmp_path / "ssh-XXXXagent"
    folder.mkdir(mode=0o700)
    path = str(folder / "agent.4242")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    listener.setblocking(False)
    yield path, listener
    listener.close()


async def test_a_confined_command_used_the_users_ssh_agent_through_ssh_auth_sock(tmp_path, agent):
    path, listener = agent
    res = await _run(tmp_path, f'python3 connect.py "${{SSH_AUTH_SOCK:-{path}}}"', {"SSH_AUTH_SOCK": path})
    assert "VAR -" in res.text, res.text  # not passed
    assert "REFUSED" in res.text and "CONNECTED" not in res.text, res.text  # and its socket masked
    with pytest.raises(BlockingIOError):
        listener.accept()


async def test_shell_env_allow_passes_ssh_auth_sock_to_confined_commands_on_purpose(tmp_path, agent):
    path, listener = agent
    # (with network = true: under the default "ask" a confined command has no unix sockets at all)
    res = await _run(tmp_path, 'python3 connect.py "$SSH_AUTH_SOCK"', {"SSH_AUTH_SOCK": path},
                     shell_env_allow=["SSH_AUTH_SOCK"], network=True)
    assert f"VAR {path}" in res.text and "CONNECTED" in res.text, res.text
    listener.accept()[0].close()
