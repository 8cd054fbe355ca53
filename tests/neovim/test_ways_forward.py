"""A failed prompt whose error has a way forward offers it (``vim.ui.select``), not only its text:
an endpoint that refuses the key → sign in / give a key / the log; an endpoint that cannot be
reached → its settings / the log / login / restart; a server that cannot start → the log /
:checkhealth / start it again."""

from __future__ import annotations

import sys
from pathlib import Path

from agent_server.offline import text_stream

REFUSED = {"kind": "error", "status": 401, "json": {"error": {"message": "Incorrect API key provided"}}}


def picked(ed) -> dict:
    return ed.wait("local s = _G.selects or {}; return s[#s]", what="a question")


def test_a_401_from_the_endpoint_showed_only_its_text_in_neovim_and_offered_no_way_to_give_a_key(
        make_editor, endpoint, workspace):
    endpoint.push(REFUSED)
    ed = make_editor()
    ed.choose("api-key")
    ed.lua("require('agent_server').read_secret = function() return ' sk-given ' end")
    ed.cmd("AgentChat")
    ed.cmd("AgentAsk hello there")
    question = picked(ed)
    assert [i["id"] for i in question["items"]] == ["sign-in", "api-key", "log", "cancel"], question
    assert "API key" in question["prompt"]
    ed.wait("return require('agent_server.chat').text():find('restarted with the key you gave', 1, true) ~= nil",
            what="the restart with the key")
    chat = ed.chat()
    assert "**error:**" in chat and ":AgentLogin" in chat, chat
    assert ed.lua("return require('agent_server.transcript').prompt_text()") == "hello there"  # to send again
    endpoint.push(text_stream("welcome"))
    ed.lua("require('agent_server').send_typed()")
    ed.idle()
    assert "welcome" in ed.chat()
    assert endpoint.requests[-1].headers["authorization"] == "Bearer sk-given"


def login_terminal_ran_and_stopped(ed) -> None:
    """A terminal opened running the server's ``login``; its job is stopped. Its pid is read once the
    login said its first line: before the child has exec'd the command, ``/proc/PID/cmdline`` is still
    Neovim's own (the forked copy), which a loaded machine made visible (last session's flake)."""
    ed.wait("return vim.bo.buftype == 'terminal' and vim.b.terminal_job_id ~= nil", what="the login terminal")
    ed.wait("return table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\\n')"
            ":find('agent-server login: sign in', 1, true) ~= nil", what="the login's first line in the terminal")
    pid = ed.lua("return vim.fn.jobpid(vim.b.terminal_job_id)")
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"login" in argv, argv
    ed.lua("vim.fn.jobstop(vim.b.terminal_job_id)")


def test_sign_in_runs_the_servers_login_in_a_terminal_and_says_when_it_did_not_sign_in(
        make_editor, endpoint, workspace):
    endpoint.push(REFUSED)
    ed = make_editor()
    ed.choose("sign-in")
    ed.cmd("AgentAsk hello")
    login_terminal_ran_and_stopped(ed)
    ed.wait("return require('agent_server.chat').text():find('not signed in', 1, true) ~= nil",
            what="the failed sign-in said")


def test_sign_in_from_the_readmes_plain_setup_died_with_a_lua_error_about_env(make_editor, workspace):
    """Newcomer 4, finding 4: the README's plain set-up (``setup({ cmd = … })``, no ``env``) left
    ``env`` an empty Lua table, which ``jobstart`` refuses (``E475: Invalid argument: env``):
    :AgentLogin and the auth question's *Sign in* died with a Lua error, so nobody could sign in.
    Now the login terminal runs with Neovim's own environment."""
    ed = make_editor()
    ed.lua("local c = require('agent_server.config').get(); require('agent_server').setup({ cmd = c.cmd })")
    assert ed.lua("return next(require('agent_server.config').get().env) == nil")  # as the README leaves it
    ed.cmd("AgentLogin")
    login_terminal_ran_and_stopped(ed)


def test_a_server_that_cannot_start_offers_its_log_and_a_restart(make_editor, workspace):
    dies = [sys.executable, "-c", "import sys; sys.stderr.write('boom: the config is broken\\n'); sys.exit(3)"]
    ed = make_editor(server_cmd=dies)
    ed.choose("log")
    ed.cmd("AgentAsk hello")
    question = picked(ed)
    assert [i["id"] for i in question["items"]] == ["log", "health", "restart", "cancel"], question
    assert question["prompt"] == "agent-server could not start:", question
    ed.wait("return vim.api.nvim_buf_get_name(0):find('agent-server://log', 1, true) ~= nil", what="the log")
    assert "boom: the config is broken" in "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))


def test_an_unreachable_endpoint_offered_restart_the_server_first_although_the_server_was_fine(
        make_editor, tmp_path, workspace):
    """Newcomer 3 (Neovim): a prompt whose model endpoint could not be reached (``NETWORK``; the
    server ran and answered) was asked about as "could not reach the model endpoint, or could not
    start" with *Restart the server* first — which does not fix an endpoint. The question says the
    endpoint failed and the server runs, and offers first what fixes it: the endpoint and model the
    server uses (:checkhealth), the request's error (the log), the endpoint's set-up (login); a
    restart comes last. The chat's line says the same, and the server is the same process after."""
    import socket

    with socket.socket() as s:  # a port nothing listens on: the connection is refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "nvim-home" / "config" / "agent-server"
    config.mkdir(parents=True)
    (config / "config.toml").write_text("[agent]\nmax_attempts = 1\n")  # no retries to wait through
    ed = make_editor(env={"AGENT_SERVER_BASE_URL": f"http://127.0.0.1:{port}/v1"})
    ed.choose("health")
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('hello')")
    ed.lua("require('agent_server').send_typed()")
    question = picked(ed)
    assert [i["id"] for i in question["items"]] == ["health", "log", "sign-in", "restart", "cancel"], question
    assert question["prompt"] == "The model endpoint could not be reached (the server itself runs):", question
    ed.wait("return vim.bo.filetype == 'checkhealth'", what=":checkhealth")
    health = "\n".join(ed.lua("return vim.api.nvim_buf_get_lines(0, 0, -1, false)"))
    assert f"http://127.0.0.1:{port}/v1" in health, health  # the endpoint it could not reach, named
    chat = ed.chat()
    assert "The model endpoint could not be reached (the server itself runs)" in chat, chat
    assert "`:AgentRestart`" not in chat, chat
    assert ed.lua("return require('agent_server.client').pid()") is not None  # it ran all along
    assert ed.lua("return require('agent_server.transcript').prompt_text()") == "hello"


def test_the_ways_forward_were_asked_over_a_chat_not_yet_drawn_with_the_error(make_editor, endpoint, workspace):
    """F9's class: a picker (the default is inputlist(), which blocks) opened before the screen was
    drawn, so the chat behind the question did not show the error it answers."""
    from support.nvim import screens_at_select, shown

    endpoint.push(REFUSED)
    ed = make_editor()
    screens_at_select(ed)
    ed.cmd("AgentChat")
    ed.cmd("AgentAsk hello there")
    ed.wait("return #_G.screens > 0", what="the question")
    drawn = shown(ed.lua("return _G.screens")[0])
    assert "error:" in drawn and "Incorrect API key" in drawn, drawn


def test_a_first_run_without_a_model_said_session_new_failed_authentication_required_in_the_chat(
        make_editor, endpoint, workspace):
    """The first-run path (nothing configured): the chat's one line read "agent-server: session/new
    failed: Authentication required: no model endpoint configured … Sign in with `agent-server
    login` (run it in a terminal, then sign in again or start a new session) …" — a method name,
    the JSON-RPC code's name, and a way that is not this editor's. It says that the prompt was not
    sent and why, names the editor's sign-in (the plugin runs the login: ``auth.terminal``) and the
    ways to set a model up here; the prompt waits in the prompt area, the sign-in is offered."""
    ed = make_editor(env={"AGENT_SERVER_BASE_URL": "", "AGENT_SERVER_API_KEY": "", "AGENT_SERVER_MODEL": ""})
    ed.choose()  # the way forward dismissed
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('hello')")
    ed.lua("require('agent_server').send_typed()")
    question = picked(ed)
    assert [i["id"] for i in question["items"]] == ["sign-in", "api-key", "log", "cancel"], question
    chat = ed.chat()
    assert "session/new" not in chat and "Authentication required" not in chat, chat
    assert "run it in a terminal, then" not in chat and "(the editor's sign-in runs it)" in chat, chat
    assert "Not sent: could not start a session: no model endpoint configured" in chat, chat
    assert "No model is set up for this Neovim's server yet" in chat and ":AgentLogin" in chat, chat
    assert ed.lua("return require('agent_server.transcript').prompt_text()") == "hello"
    assert not endpoint.requests
