"""A server that died is started again at once, as VS Code does, and the session the chat shows
resumed — nothing waits for the next prompt, and the prompt being typed and the unsaved buffers stay
as they are; a server that dies again while that session is being resumed keeps it to resume — a
real Neovim against the real server (behind a relay that dies on cue) and the offline endpoint."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from support.fixtures import agent_server_command
from support.nvim import push

from agent_server.offline import text_stream

HERE = Path(__file__).resolve().parent
SESSION = "return require('agent_server.client').state.session_id"
PROMPT = "return require('agent_server.transcript').prompt_text()"
RESUMED_AFTER_EXIT = """local text = require('agent_server.chat').text()
local exited = select(2, text:find('agent-server exited', 1, true))
for _ = 2, (... or 1) do exited = exited and select(2, text:find('agent-server exited', exited + 1, true)) end
return exited ~= nil and text:find('resumed: the agent still has everything above', exited, true) ~= nil"""


def kill(ed) -> int:
    pid = ed.lua("return require('agent_server.client').pid()")
    ed.server_pids.add(pid)
    os.killpg(pid, signal.SIGKILL)
    return pid


def test_after_the_server_died_the_plugin_started_it_again_only_at_the_next_prompt(make_editor, endpoint, workspace):
    """Last session's report: after ``kill -9`` of the server the plugin started it again (and resumed
    the session) only when the next prompt was sent; VS Code restarts it at once. Now it is started
    again at once and the session resumed, while the prompt half typed and a buffer's unsaved text
    stay untouched."""
    path = workspace / "u.txt"
    path.write_text("saved\n")
    push(endpoint, text_stream("first answer"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.keys("ccunsaved<Esc>")
    ed.cmd("AgentAsk remember the word fig")
    ed.idle()
    session = ed.lua(SESSION)
    ed.lua("require('agent_server.transcript').set_prompt('half typed')")
    asked = len(endpoint.requests)
    old = kill(ed)
    ed.wait(RESUMED_AFTER_EXIT, what="the session resumed with no prompt sent")
    new = ed.lua("return require('agent_server.client').pid()")
    assert new not in (None, old) and ed.lua(SESSION) == session, ed.chat()
    assert len(endpoint.requests) == asked  # nothing was sent: the restart did it alone
    assert ed.lua(PROMPT) == "half typed"
    assert ed.buffer_text(path) == "unsaved\n" and ed.modified(path) and path.read_text() == "saved\n"
    push(endpoint, text_stream("the word was fig"))
    ed.lua("require('agent_server').send_typed()")
    ed.idle()
    said = [m["content"] for m in json.loads(endpoint.requests[-1].body)["messages"] if m["role"] == "user"]
    assert said[0].startswith("remember the word fig") and said[-1].startswith("half typed"), said
    assert "the word was fig" in ed.chat()


def test_a_server_that_died_again_while_the_session_was_being_resumed_opened_a_new_session(
        make_editor, endpoint, workspace, tmp_path):
    """e7654a7's fix, tested directly: the server started again after a kill died while it resumed the
    session (``session/resume`` unanswered), a prompt waiting for that resume. The prompt is not sent
    (it goes back to the prompt area), the session stays the one to resume, and the server started
    once more resumes it — never a new session the agent would start blank in."""
    relay = tmp_path / "relay"
    relay.mkdir()
    os.mkfifo(relay / "go")
    cmd = [sys.executable, str(HERE / "dying_server.py"), str(relay), "--", *agent_server_command()]
    push(endpoint, text_stream("first answer"), text_stream("the word was plum"))
    ed = make_editor(server_cmd=cmd)
    ed.cmd("AgentAsk remember the word plum")
    ed.idle()
    session = ed.lua(SESSION)
    (relay / "armed").touch()
    kill(ed)
    ed.wait("return vim.uv.fs_stat(...) ~= nil", str(relay / "seen"), what="the resume held by the relay")
    ed.choose("cancel")  # the way forward offered after the prompt failed: dismissed
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('which word')")
    ed.lua("require('agent_server').send_typed()")  # waits for that resume
    with open(relay / "go", "w") as go:
        go.write("die\n")
    ed.wait(RESUMED_AFTER_EXIT, 2, what="the session resumed by the server started after the second death")
    assert ed.lua(SESSION) == session, ed.chat()
    ed.wait(f"return ({PROMPT.removeprefix('return ')}) == 'which word'", what="the prompt given back")
    assert "Not sent:" in ed.chat(), ed.chat()
    ed.lua("require('agent_server').send_typed()")
    ed.idle()
    assert ed.lua(SESSION) == session, ed.chat()
    said = [m["content"] for m in json.loads(endpoint.requests[-1].body)["messages"] if m["role"] == "user"]
    assert said[0].startswith("remember the word plum") and said[-1].startswith("which word"), said
    assert "the word was plum" in ed.chat()


def test_a_server_that_keeps_dying_is_started_again_at_most_three_times_a_minute(make_editor):
    """The class: a restart at once must not become a loop. A server that died more than three times
    within a minute is left stopped, the chat says why, and the next prompt starts it."""
    ed = make_editor(server_cmd=[sys.executable, str(HERE / "scripted_agent.py")])
    for n in range(1, 5):
        ed.cmd("AgentAsk die")
        ed.wait("local _, count = require('agent_server.chat').text():gsub('agent%-server exited', '') "
                "return count >= ...", n, what=f"exit {n}")
        ed.idle()
        if n < 4:  # started again at once, before any prompt
            ed.wait("return require('agent_server.client').pid() ~= nil", what=f"the restart after exit {n}")
    chat = ed.chat()
    assert chat.count("it is started again now") == 3, chat
    assert "not started again: it exited 4 times within a minute; the next command starts a new one" in chat, chat
    assert ed.lua("return require('agent_server.client').pid()") is None
    ed.cmd("AgentAsk hello again")
    ed.idle()
    assert "echo: hello again" in ed.chat()
