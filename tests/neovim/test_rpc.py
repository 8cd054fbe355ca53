"""The plugin's RPC layer against a small scripted ACP agent (``scripted_agent.py``): a flood of
one-character chunks, lines that are not JSON, a server killed mid-turn, no orphans after ``:qa``."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

from support.procs import pid_alive
from support.timeouts import HANG

HERE = Path(__file__).resolve().parent
SCRIPTED = [sys.executable, str(HERE / "scripted_agent.py")]

_spec = importlib.util.spec_from_file_location("scripted_agent", HERE / "scripted_agent.py")
scripted_agent = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(scripted_agent)


def agent_text(chat: str) -> str:
    """The agent's part of the last turn in the chat."""
    body = chat.rsplit("## Agent\n", 1)[1]
    return body.rsplit("\n\n_— stop:", 1)[0].strip("\n")


def test_200kb_answer_in_one_character_chunks_arrives_whole_and_the_editor_keeps_answering(make_editor):
    size = 200_000
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd(f"AgentAsk flood {size}")
    answered_during_stream = 0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        # an RPC round trip from outside while chunks pour in
        busy, drawn = ed.lua("return { require('agent_server.client').busy(), "
                             "vim.api.nvim_buf_line_count(require('agent_server.chat').buffer()) }")
        assert ed.nvim.eval("1 + 1") == 2
        if busy and drawn > 8:
            answered_during_stream += 1
        if not busy:
            break
        time.sleep(0.05)
    ed.idle()
    assert answered_during_stream >= 1, "no round trip was answered while the stream was drawn"
    assert agent_text(ed.chat()) == scripted_agent.flood_text(size).rstrip("\n")
    assert "_— stop: end_turn —_" in ed.chat()


def test_non_json_lines_from_the_server_are_skipped_not_fatal(make_editor):
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd("AgentAsk garbage")
    ed.idle()
    assert "still alive after garbage" in ed.chat()
    assert ed.lua("return require('agent_server.client').state.bad_lines") == 2
    ed.cmd("AgentAsk again")
    ed.idle()
    assert "echo: again" in ed.chat()


def test_server_killed_mid_turn_is_reported_with_its_stderr_and_the_next_ask_starts_a_new_one(make_editor):
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd("AgentChat")  # starts the server
    first = {ed.wait("return require('agent_server.client').pid()", what="the server")}
    ed.cmd("AgentAsk die")
    ed.wait("return require('agent_server.chat').text():find('agent-server exited', 1, true) ~= nil",
            what="the exit report")
    ed.idle()
    chat = ed.chat()
    assert "agent-server exited (exit code 3)** during a turn" in chat
    assert "scripted crash: the agent dies mid-turn" in chat  # the stderr tail
    assert ed.lua("return require('agent_server.chat').state.header.state") != "working"
    ed.cmd("AgentAsk hello again")
    ed.idle()
    assert "echo: hello again" in ed.chat()
    assert ed.server_pids - first, "no new server was started"
    assert not any(pid_alive(p) for p in first)


def test_a_line_over_the_typescript_sdks_32_mib_arrives_whole_and_the_next_ask_works(make_editor):
    ed = make_editor(server_cmd=SCRIPTED)
    size = 33 * 1024 * 1024
    ed.cmd(f"AgentAsk huge {size}")
    ed.idle(timeout=HANG)
    assert ed.lua("local t = require('agent_server.chat').text() return #t") > size
    assert "_— stop: end_turn —_" in ed.chat()[-200:]
    ed.cmd("AgentAsk after")
    ed.idle()
    assert "echo: after" in ed.chat()[-300:]


def test_a_server_whose_output_breaks_is_stopped_reported_and_replaced_by_the_next_ask(make_editor):
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd("AgentAsk closeout")
    ed.wait("return require('agent_server.chat').text():find('the connection broke', 1, true) ~= nil",
            what="the broken connection's report")
    first = ed.server_pids.copy()
    assert "the connection broke (its output closed), so it was stopped" in ed.chat()
    ed.cmd("AgentAsk hello again")
    ed.idle()
    assert "echo: hello again" in ed.chat()
    assert ed.server_pids - first, "no new server was started"
    assert not any(pid_alive(p) for p in first)


def test_agent_restart_stops_the_server_and_starts_a_new_one(make_editor):
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd("AgentAsk one")
    ed.idle()
    first = ed.server_pids.copy()
    ed.cmd("AgentRestart")
    ed.wait("return require('agent_server.chat').text():find('was restarted', 1, true) ~= nil", what="the restart")
    assert "agent-server exited" not in ed.chat()  # a restart is not a crash
    ed.cmd("AgentAsk two")
    ed.idle()
    assert "echo: two" in ed.chat()
    assert ed.server_pids - first and not any(pid_alive(p) for p in first)


def test_no_server_process_is_left_after_qa(make_editor, tmp_path):
    from support.nvim import quit_editor
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd("AgentAsk hello")
    ed.idle()
    (pid,) = ed.server_pids
    assert pid_alive(pid)
    assert quit_editor(ed) == []
    assert not pid_alive(pid)


def test_agent_restart_during_a_turn_wrote_the_server_exited_as_an_error_into_the_chat(make_editor, workspace):
    """The class of N4: ``:AgentRestart`` while a turn waits for a proposal drew the prompt's JSON-RPC
    error, ``**error:** the server exited``, as if something had failed. The user stopped it: the
    chat says so in its words (and the stopped server's proposal is closed)."""
    path = workspace / "p.txt"
    path.write_text("text\n")
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd(f"edit {path}")
    ed.cmd(f"AgentAsk propose 0 ok {path}")
    ed.proposal_open()
    ed.cmd("AgentRestart")
    ed.wait("return require('agent_server.chat').text():find('was restarted', 1, true) ~= nil", what="the restart")
    ed.idle()
    chat = ed.chat()
    assert "**error:**" not in chat and "the server exited" not in chat, chat
    assert "_— stopped: the server was restarted before it answered —_" in chat, chat
    assert ed.lua("return require('agent_server.proposals').latest() == nil")
    assert ed.lua("return #vim.api.nvim_list_tabpages()") == 1  # its diff view closed
    assert ed.buffer_text(path) == "text\n"
    ed.cmd("AgentAsk two")
    ed.idle()
    assert "echo: two" in ed.chat()
