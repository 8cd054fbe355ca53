"""`agent-server lsp` in Neovim with the plugin loaded (issue 29 item 4): "progress is invisible in
stock Neovim and cannot be cancelled from the UI" — the plugin echoes the LSP turn's progress and
`:AgentCancel` cancels it (`agentServer.cancel`) when no chat turn runs."""

from __future__ import annotations

import json

from support.fixtures import agent_server_command
from support.nvim import call, push

from agent_server.offline import text_stream


ECHOED = "for _, e in ipairs(_G.echoed) do if e:find(..., 1, true) then return true end end"


def start_lsp(ed, server_env, path) -> None:
    """``agent-server lsp`` as the README sets it up, attached to ``path``; what the plugin echoes
    (the LSP turn's progress) is kept in ``_G.echoed``."""
    ed.lua("""
        local env = vim.json.decode(...)
        _G.echoed = {}
        local echo = vim.api.nvim_echo
        vim.api.nvim_echo = function(chunks, ...)
          table.insert(_G.echoed, chunks[1] and chunks[1][1] or '')
          return echo(chunks, ...)
        end
        vim.lsp.config('agent_server', { cmd = env.cmd, cmd_env = env.env, filetypes = { 'python' },
                                         root_markers = { 'pyproject.toml' } })
        vim.lsp.enable('agent_server')
    """, json.dumps({"cmd": [*agent_server_command(), "lsp"], "env": server_env}))
    ed.cmd(f"edit {path}")
    ed.wait("local c = vim.lsp.get_clients({ bufnr = 0, name = 'agent_server' })[1]; return c and c.initialized",
            what="agent-server lsp attached")


def ask_over_lsp(ed, prompt: str) -> None:
    """``agentServer.ask`` on the current buffer; its answer (the stop reason) lands in ``_G.lsp_answer``."""
    ed.lua("""
        local c = vim.lsp.get_clients({ bufnr = 0, name = 'agent_server' })[1]
        _G.lsp_answer = nil
        c:exec_cmd({ title = 'ask', command = 'agentServer.ask', arguments = { {
          uri = vim.uri_from_bufnr(0), prompt = ... } } }, { bufnr = 0 }, function(err, result)
          _G.lsp_answer = err and ('error: ' .. tostring(err.message)) or result.stopReason
        end)
    """, prompt)


def stop_lsp(ed) -> None:
    ed.lua("for _, c in ipairs(vim.lsp.get_clients({ name = 'agent_server' })) do c:stop(true) end")
    ed.wait("return #vim.lsp.get_clients({ name = 'agent_server' }) == 0", what="agent-server lsp stopped")


def test_agent_cancel_cancels_an_agent_server_lsp_turn_whose_progress_the_plugin_echoes(
        make_editor, endpoint, workspace, server_env):
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = workspace / "slow.py"
    path.write_text("print(1)\n")
    push(endpoint, call("b", "bash", command="sleep 60", description="Wait a long time"), text_stream("stopped"))
    ed = make_editor()
    start_lsp(ed, server_env, path)
    ask_over_lsp(ed, "wait")
    ed.wait(ECHOED, "Wait a long time", what="the tool step's progress echoed")
    ed.cmd("AgentCancel")
    assert ed.wait("return _G.lsp_answer", what="the LSP turn's answer") == "cancelled"
    stop_lsp(ed)


def test_ctrl_c_in_the_chat_did_not_reach_an_agent_server_lsp_turn_once_the_chat_had_a_session(
        make_editor, endpoint, workspace, server_env):
    """<C-c> in the chat (and :AgentCancel) cancelled the chat's turn, else — only when the chat had
    no session — the turns of ``agent-server lsp``: once the chat had asked anything, it said
    "nothing to cancel" and the LSP turn ran on. Cancelling reaches both front ends: the chat's turn
    and the LSP's, at once."""
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = workspace / "slow.py"
    path.write_text("print(1)\n")
    endpoint.push(text_stream("the chat's first answer"))
    ed = make_editor()
    ed.cmd("AgentAsk hello")
    ed.idle()
    assert ed.lua("return require('agent_server.client').state.session_id") is not None
    start_lsp(ed, server_env, path)
    push(endpoint, call("b", "bash", command="sleep 60", description="Wait a long time"))  # cancelled during it
    ask_over_lsp(ed, "wait")
    ed.wait(ECHOED, "Wait a long time", what="the LSP turn running its tool")
    ed.cmd("AgentChat")
    ed.lua("vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('<C-c>', true, false, true), 'mx', false)")
    assert ed.wait("return _G.lsp_answer", what="the LSP turn's answer") == "cancelled"
    assert "nothing to cancel" not in ed.chat(), ed.chat()
    # a chat turn and an LSP turn at once: both cancelled
    push(endpoint, call("c", "bash", command="sleep 60", description="Wait in the chat"),
         call("d", "bash", command="sleep 60", description="Wait over LSP"))
    ed.cmd("AgentAsk wait too")
    ed.wait("return require('agent_server.chat').text():find('Wait in the chat', 1, true) ~= nil", what="the chat's tool")
    ed.cmd(f"edit {path}")
    ask_over_lsp(ed, "wait again")
    ed.wait(ECHOED, "Wait over LSP", what="the LSP turn's tool")
    ed.cmd("AgentCancel")
    assert ed.wait("return _G.lsp_answer", what="the LSP turn's answer") == "cancelled"
    ed.idle()
    assert "_— cancelled —_" in ed.chat(), ed.chat()
    stop_lsp(ed)


def test_the_transcript_window_shows_each_new_turn_of_agent_server_lsp(make_editor, endpoint, workspace, server_env):
    """One transcript per session, shown every turn at the same URI: the window it is in already
    must show the new turn (Neovim does not read a loaded buffer again by itself)."""
    (workspace / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    path = workspace / "two.py"
    path.write_text("print(2)\n")
    push(endpoint, text_stream("first answer"), text_stream("second answer"))
    ed = make_editor()
    start_lsp(ed, server_env, path)
    for n, answer in ((1, "first answer"), (2, "second answer")):
        ed.lua("""
            local c = vim.lsp.get_clients({ name = 'agent_server' })[1]
            c:exec_cmd({ title = 'ask', command = 'agentServer.ask', arguments = { {
              uri = vim.uri_from_fname(...), prompt = 'question' } } }, {}, function() end)
        """, str(path))
        ed.wait("""for _, b in ipairs(vim.api.nvim_list_bufs()) do
                     if vim.api.nvim_buf_get_name(b):match('transcript%.md$') and vim.api.nvim_buf_is_loaded(b) then
                       return table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\\n'):find(..., 1, true)
                     end
                   end""", answer, what=f"turn {n} in the transcript window")
    stop_lsp(ed)
