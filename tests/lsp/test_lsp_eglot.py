"""A real editor: Emacs's own eglot (Emacs >= 29; scripts/setup-emacs.sh installs Emacs 30 from
bookworm-backports), set up with the README's snippet, drives the real ``agent-server lsp``: a
command and an edit each ask permission through ``window/showMessageRequest`` (eglot never
advertises the optional ``window.showMessage`` capability), and the saved file holds the edit.
Fails, never skips, without Emacs >= 29."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support.fixtures import agent_server_command
from support.replay import assert_replay_matches

from agent_server.offline import text_stream, tool_call_stream

DRIVER = Path(__file__).with_name("emacs_eglot_ask.el")
README = Path(__file__).resolve().parents[2] / "README.md"


def emacs() -> str:
    found = shutil.which("emacs")
    assert found, "emacs is missing: scripts/setup-emacs.sh installs emacs-nox 30 from bookworm-backports"
    first = subprocess.run([found, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    major = int(re.match(r"GNU Emacs (\d+)", first).group(1))
    assert major >= 29, f"{first}: eglot needs Emacs >= 29 (scripts/setup-emacs.sh installs Emacs 30)"
    return found


def readme_eglot_snippet() -> str:
    section = README.read_text().split("* **Emacs eglot**", 1)[1]
    return section.split("```elisp\n", 1)[1].split("```", 1)[0]


@pytest.mark.parametrize("first", ["# 🎉 greet\n", "# 🎉 greet\rmid\n"], ids=["plain", "lone_cr"])
async def test_eglot_in_real_emacs_answers_the_permission_questions_and_saves_the_agents_edit(
        endpoint, workspace, agent_env, agent_state_dir, tmp_path, first):
    """Issue 29: eglot could not edit or approve anything (questions were gated on a capability eglot
    does not send), and the README's ``agent-server-ask`` failed outside an eglot buffer. And
    ``agent-server-ask``'s prompt completed no slash command (they are listed by ``agentServer.commands``).
    ``lone_cr``: eglot counts its buffer's lines, ended by ``\\n`` only (``forward-line``), and the
    server counted LSP lines for it (``\\r`` ends one): the edit landed a line off."""
    binary = emacs()
    path = workspace / "app.py"
    path.write_bytes(f"{first}print(mgs)\n".encode())
    (workspace / "build" / "out").mkdir(parents=True)
    endpoint.push(tool_call_stream([("s", "bash", json.dumps({"command": "rm -r build"}))]))  # destructive: asks
    endpoint.push(tool_call_stream([("r", "read", json.dumps({"path": "app.py"}))]))
    endpoint.push(tool_call_stream([("e", "edit", json.dumps({"path": "app.py", "old_string": "print(mgs)",
                                                             "new_string": "print('🎉', msg)"}))]))
    endpoint.push(text_stream("Fixed."))
    snippet = tmp_path / "agent-server-eglot.el"
    snippet.write_text(";; -*- lexical-binding: t -*-\n" + readme_eglot_snippet())
    result_file = tmp_path / "emacs-result.json"
    expect = f"{first}print('🎉', msg)\n"
    bindir = str(Path(agent_server_command()[0]).parent)
    env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": endpoint.base_url,
           "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),  # the README's ("agent-server" "lsp")
           "HOME": str(tmp_path / "home"), "EGLOT_SNIPPET": str(snippet), "EMACS_FILE": str(path),
           "EMACS_RESULT": str(result_file), "EMACS_EXPECT": expect, "EMACS_PROMPT": "fix app.py"}
    proc = await asyncio.create_subprocess_exec(binary, "--batch", "-Q", "-l", str(DRIVER), env=env,
                                                cwd=str(workspace), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert result_file.exists(), f"emacs wrote no result (exit {proc.returncode}): {err.decode()[-3000:]}"
    result = json.loads(result_file.read_text())
    assert result["errors"] == [], (result, err.decode()[-3000:])
    assert result["messages"][0].startswith("agent-server: no agent-server lsp runs")  # asked before eglot ran
    assert result["managed"] is True
    assert result["questions_when_ask_returned"] == 0  # asynchronous: returned before the turn went on
    # a destructive command is never remembered: no "Allow always"
    assert [q["items"] for q in result["questions"]] == [["Allow once", "Reject"],
                                                         ["Allow once", "Allow always", "Reject"]], result
    command_q, edit_q = (q["prompt"] for q in result["questions"])
    assert "rm -r build" in command_q
    assert "Edit app.py" in edit_q and "+print('🎉', msg)" in edit_q
    assert not (workspace / "build").exists()  # the allowed command ran
    assert result["landed"] is True and result["buffer"] == expect
    assert result["ended"] is True and "agent-server: the turn ended (end_turn)" in result["messages"]
    assert path.read_bytes() == expect.encode()  # saved by Emacs: the exact bytes
    assert result["server_exited"] is True
    assert assert_replay_matches(agent_state_dir, endpoint.requests) == 4
    # M-x agent-server-ask: TAB completes the slash commands (agentServer.commands); /usage runs as one
    from agent_server.host import commands
    every = ["/" + c["name"] for c in commands.COMMANDS]
    assert result["completions"] == {"slash": every, "u": ["/usage", "/undo"], "mo": ["/mode", "/model"]}, result
    assert result["command_ended"] is True and len(endpoint.requests) == 4  # the command never reached the model
