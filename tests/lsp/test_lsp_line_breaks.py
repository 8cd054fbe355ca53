"""How ``agent-server lsp`` counts a client's lines (docs/protocol.md, *The LSP surface*): as the client
says in ``capabilities.experimental.agentServer.lineBreaks``, else by its ``clientInfo.name`` (Neovim's
LSP client and Emacs's eglot count their buffers' rows, ended by ``\\n`` only), else as LSP says. The
real server under pytest-lsp; the test editor applies edits and syncs its changes counting lines as
the client it plays does."""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types

from agent_server.offline import text_stream, tool_call_stream

LONE_CR = "a1\rmid\na2\na3\n"  # "mid" is a line of its own for LSP, text of row 0 for Neovim and eglot


def push_edit(endpoint, old: str, new: str) -> None:
    endpoint.push(tool_call_stream([("r", "read", json.dumps({"path": "app.py"}))]))
    endpoint.push(tool_call_stream([("e", "edit", json.dumps({"path": "app.py", "old_string": old,
                                                             "new_string": new}))]))
    endpoint.push(text_stream("done"))


async def ask(editor, uri: str, prompt: str) -> dict:
    arg = {"uri": uri, "prompt": prompt}
    return await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.ask", arguments=[arg])), 90)


@pytest.mark.parametrize("name, said, rows", [
    ("Eglot", None, True),  # eglot.el: forward-line / line-number-at-pos over its buffer's text
    ("Neovim", None, True),  # a plain vim.lsp.config, without the plugin's capability
    ("Neovim", "lsp", False),  # what a client says wins over its name
    ("Eglot", "crlf", True),  # not a rule: the name decides
    ("some-editor", None, False),  # LSP's rule
    (None, "lf", True),  # no clientInfo at all
], ids=["eglot", "neovim", "neovim_saying_lsp", "eglot_saying_nonsense", "other", "said_without_a_name"])
async def test_eglot_got_the_agents_edit_a_line_off_as_it_counts_its_buffers_rows_and_each_client_gets_its_own_count(
        lsp, endpoint, workspace, name, said, rows):
    """eglot counts lines as Neovim does (``forward-line``: only ``\\n`` ends one; a lone ``\\r`` is
    text of its line), and says nothing: counted as LSP says, its edit of ``a3`` in a file with a lone
    CR landed past the buffer's end. Then, after the user typed on a row below the lone CR, the agent
    reads what the editor holds (the sync counted as the client counts)."""
    (workspace / "app.py").write_text(LONE_CR, newline="")
    push_edit(endpoint, "a3", "A3")
    endpoint.push(tool_call_stream([("r2", "read", json.dumps({"path": "app.py"}))]))
    endpoint.push(text_stream("read it"))
    experimental = {"agentServer": {"lineBreaks": said}} if said else None
    editor = await lsp(client_name=name, experimental=experimental, rows=rows)
    uri = editor.open(workspace / "app.py", text=LONE_CR)
    assert (await ask(editor, uri, "change a3"))["stopReason"] == "end_turn"
    assert editor.text(uri) == "a1\rmid\na2\nA3\n"
    row = 1 if rows else 2  # "a2", as the client counts
    editor.change(uri, [{"range": {"start": {"line": row, "character": 2}, "end": {"line": row, "character": 2}},
                         "newText": " # mine"}])
    assert editor.text(uri) == "a1\rmid\na2 # mine\nA3\n"
    assert (await ask(editor, uri, "read it again"))["stopReason"] == "end_turn"
    (read,) = [m["content"] for m in endpoint.requests[-1].json()["messages"]
               if m["role"] == "tool" and m["tool_call_id"] == "r2"]
    assert "a2 # mine" in read and "A3 # mine" not in read, read
