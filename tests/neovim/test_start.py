"""Pre-start (issue 27 item 5, Neovim): `setup({ start = "lazy" })` (the default) starts the server
when the chat opens or an :Agent* command other than a prompt runs, `"eager"` right after start-up
(deferred, never blocking it); by the time a prompt is typed the server is up. No server process is
left after Neovim exits (the `make_editor` fixture fails on one)."""

from __future__ import annotations

from agent_server.offline import text_stream

RUNNING = "return require('agent_server.client').state.initialized == true and require('agent_server.client').pid()"


def test_the_server_runs_before_the_first_prompt_when_the_chat_was_opened_first(make_editor, endpoint):
    endpoint.push(text_stream("hello"))
    ed = make_editor()
    assert ed.lua("return require('agent_server.client').pid()") is None  # lazy: nothing at setup()
    ed.cmd("AgentChat")
    pid = ed.wait(RUNNING, what="the server started by :AgentChat")
    assert len(endpoint.requests) == 0
    ed.cmd("AgentAsk hi")
    ed.idle()
    assert "hello" in ed.chat()
    assert ed.lua("return require('agent_server.client').pid()") == pid  # the same server, not a second one


def test_lazy_start_runs_no_server_before_a_command(make_editor):
    ed = make_editor()
    ed.cmd("enew")
    started = ed.lua("return vim.wait(300, function() return require('agent_server.client').pid() ~= nil end)")
    assert started is False


def test_eager_start_runs_the_server_after_setup_without_any_command(make_editor, endpoint):
    ed = make_editor(setup={"start": "eager"})
    ed.wait(RUNNING, what="the server started by start = 'eager'")
    assert len(endpoint.requests) == 0


def test_a_bad_start_option_is_reported_and_lazy_is_used(make_editor):
    ed = make_editor(setup={"start": "sometimes"})
    assert ed.lua("return require('agent_server.config').get().start") == "lazy"
    assert any("start" in e for e in ed.lua("return require('agent_server.config').errors()"))
