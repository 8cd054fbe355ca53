"""The LSP front end warms and preconnects as the ACP one does, through the one session host
(``SessionHost.warm``): once the editor is idle after ``initialized``, the configured endpoint's
client is made and its first connection opened (nothing sent), so the first ``agentServer.ask``
does not connect — TLS handshake included, for a remote provider — after the person asked; and
after ``agentServer.newSession``, that session's."""

from __future__ import annotations

import asyncio

from lsprotocol import types
from support.timeouts import HANG

from agent_server.offline import text_stream


async def _until(predicate) -> None:
    async with asyncio.timeout(HANG):
        while not predicate():
            await asyncio.sleep(0.01)


async def _command(editor, command, *arguments):
    return await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=command, arguments=list(arguments))), HANG)


async def test_an_lsp_editors_first_ask_connected_to_the_model_only_after_the_person_asked(lsp, endpoint, workspace):
    endpoint.push(text_stream("It prints."))
    editor = await lsp()
    await _until(lambda: endpoint.idle_connections == 1)  # opened ahead while the editor was idle
    assert endpoint.requests == []  # nothing sent on it
    uri = editor.open(workspace / "app.py", "print(1)\n")
    result = await _command(editor, "agentServer.ask", {"uri": uri, "prompt": "what does it do?"})
    assert result["stopReason"] == "end_turn"
    (request,) = endpoint.requests
    assert request.connection == 1  # the ask's request went out on the connection opened ahead


async def test_an_lsp_new_session_left_its_first_prompts_connection_to_the_prompt(lsp, endpoint, workspace):
    endpoint.push(text_stream("one"))
    endpoint.push(text_stream("two"))
    editor = await lsp()
    uri = editor.open(workspace / "app.py", "print(1)\n")
    await _until(lambda: endpoint.idle_connections == 1)
    assert (await _command(editor, "agentServer.ask", {"uri": uri, "prompt": "first"}))["stopReason"] == "end_turn"
    await _until(lambda: endpoint.idle_connections == 0)  # (this endpoint closes a connection after its answer)
    session = await _command(editor, "agentServer.newSession", {"uri": uri})
    await _until(lambda: endpoint.idle_connections == 1)  # the new session's first connection, opened ahead
    result = await _command(editor, "agentServer.ask", {"uri": uri, "prompt": "second"})
    assert result["sessionId"] == session["sessionId"] and result["stopReason"] == "end_turn"
    assert [r.connection for r in endpoint.requests] == [1, 2]
