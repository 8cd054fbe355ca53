"""Slash commands over the LSP front end: ``agentServer.ask`` whose prompt is ``/undo``, ``/mode`` …
is run as the command by the session host (``SessionHost.dispatch``), as an ACP prompt is, whatever
context the front end adds (the range's text, the diagnostics)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from lsprotocol import types
from support.sessions import call, events
from support.timeouts import HANG

from agent_server.offline import text_stream, tool_call_stream


def _range(line_count: int = 1) -> dict:
    return {"start": {"line": 0, "character": 0}, "end": {"line": line_count, "character": 0}}


async def ask(editor, uri, prompt, diagnostics=None):
    arg = {"uri": uri, "range": _range(), "prompt": prompt}
    if diagnostics is not None:
        arg["diagnostics"] = diagnostics
    return await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.ask", arguments=[arg])), 90)


async def test_undo_over_lsp_went_to_the_model_as_text_and_now_restores_the_buffer_byte_exact(
        lsp, endpoint, workspace, agent_state_dir):
    """``/undo`` typed into ``agentServer.ask``: the ask always adds the range's text, so the prompt
    was never a single text block and ``/undo`` went to the model as a question. It is the command
    now: the agent's edit is taken back through ``workspace/applyEdit`` — the unsaved buffer's bytes
    exactly (CRLF, no final newline, non-ASCII) — and the model is not asked."""
    path = workspace / "app.py"
    path.write_bytes(b"on disk\n")
    unsaved = "na\u00efve = 1\r\nb = 2\r\n# \U0001f389 end"  # CRLF, no final newline: the user's unsaved text
    endpoint.push(tool_call_stream([call("r", "read", path="app.py")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="app.py", old_string="b = 2", new_string="b = 20")]))
    endpoint.push(text_stream("Changed b."))
    endpoint.push(text_stream("(the model was asked about /undo)"))  # what the old server did with it
    editor = await lsp()
    uri = editor.open(path, unsaved, version=4)
    first = await ask(editor, uri, "set b to 20")
    assert first["stopReason"] == "end_turn"
    assert editor.text(uri) == unsaved.replace("b = 2", "b = 20")
    requests = len(endpoint.requests)

    undone = await ask(editor, uri, "/undo", diagnostics=[{"range": _range(), "message": "unused name", "severity": 2}])
    assert undone["stopReason"] == "end_turn" and undone["sessionId"] == first["sessionId"]
    assert len(endpoint.requests) == requests, "the /undo prompt reached the model"
    assert editor.text(uri) == unsaved  # the buffer holds the user's text again, byte for byte
    assert path.read_bytes() == b"on disk\n"  # the disk was never the agent's to change
    restore = editor.applied[-1]
    assert restore.label == "Undo turn 1: app.py"
    assert all(a.needs_confirmation for a in (restore.edit.change_annotations or {}).values())
    logged = events(agent_state_dir, first["sessionId"])
    assert [e.data["name"] for e in logged if e.type == "command"] == ["undo"]
    assert not any(e.type == "user" and "/undo" in str(e.data) for e in logged)  # never a user message
    assert [e.data["turn"] for e in logged if e.type == "checkpoint/undo"] == [1]
    transcript = Path(undone["transcript"]).read_text(encoding="utf-8")
    assert "## Command /undo" in transcript and "Undo of turn 1: app.py: restored." in transcript

    # the next turn's model is told of the undo (a logged notice), and /redo puts the agent's change back
    endpoint.push(text_stream("ok"))
    assert (await ask(editor, uri, "what changed?"))["stopReason"] == "end_turn"
    assert "undid the file changes of turn 1" in endpoint.requests[-1].body.decode()
    assert (await ask(editor, uri, "/redo"))["stopReason"] == "end_turn"
    assert editor.text(uri) == unsaved.replace("b = 2", "b = 20")


async def test_mode_usage_and_an_unknown_command_over_lsp_are_answered_by_the_server(
        lsp, endpoint, workspace, agent_state_dir):
    (workspace / "a.txt").write_text("alpha\n")
    editor = await lsp()
    uri = editor.open(workspace / "a.txt")
    moded = await ask(editor, uri, "/mode read-only")
    assert moded["stopReason"] == "end_turn"
    assert "Mode: read-only." in Path(moded["transcript"]).read_text(encoding="utf-8")
    assert (await ask(editor, uri, "/usage"))["stopReason"] == "end_turn"
    unknown = await ask(editor, uri, "/frobnicate now")
    assert "Unknown command /frobnicate" in Path(unknown["transcript"]).read_text(encoding="utf-8")
    assert not endpoint.requests  # no command reached the model
    logged = events(agent_state_dir, moded["sessionId"])
    assert [e.data["name"] for e in logged if e.type == "command"] == ["mode", "usage", "frobnicate"]
    assert [e.data["to"] for e in logged if e.type == "mode/changed"][-1] == "read-only"
    # /mode with an unknown mode is invalid params, as ACP's -32602
    try:
        await ask(editor, uri, "/mode nonsense")
    except Exception as exc:  # noqa: BLE001 — pygls raises the error response
        assert "nonsense" in str(exc)
    else:
        raise AssertionError("/mode nonsense was accepted")


async def test_a_path_prompt_over_lsp_is_still_a_turn_with_its_context(lsp, endpoint, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(text_stream("It is the hosts file."))
    editor = await lsp()
    uri = editor.open(workspace / "a.txt")
    assert (await ask(editor, uri, "/etc/hosts: what is it?"))["stopReason"] == "end_turn"
    (request,) = endpoint.requests
    body = request.body.decode()
    assert "/etc/hosts: what is it?" in body and "alpha" in body  # the prompt and the range's text


async def test_the_lsp_front_end_offered_no_completion_for_the_slash_commands_agent_server_ask_runs(
        lsp, endpoint, workspace, agent_state_dir):
    """An LSP editor's user typed ``/undo`` into ``agentServer.ask`` blind: nothing listed the slash
    commands (ACP clients complete them from ``available_commands_update``). ``agentServer.commands``
    is advertised and answers that same list — names, descriptions, argument hints, in its order —
    for the editor to complete the prompt with; each name it lists is run as a command by the ask."""
    from agent_server.host import commands

    (workspace / "a.txt").write_text("alpha\n")
    editor = await lsp()
    assert "agentServer.commands" in editor.init.capabilities.execute_command_provider.commands
    listed = await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.commands", arguments=[])), HANG)
    assert listed == {"commands": commands.COMMANDS}  # the list ACP's available_commands_update sends
    names = [c["name"] for c in listed["commands"]]
    assert {"undo", "redo", "mode", "model", "usage", "compact", "checkpoints", "init"} <= set(names), names
    assert next(c for c in listed["commands"] if c["name"] == "mode")["input"]["hint"].startswith("read-only")
    assert not endpoint.requests  # listing them asks nothing of the model and makes no session
    assert not (agent_state_dir / "sessions").exists() or not any((agent_state_dir / "sessions").iterdir())
    uri = editor.open(workspace / "a.txt")
    used = await ask(editor, uri, "/usage")
    assert used["stopReason"] == "end_turn" and not endpoint.requests  # a listed name is a command
    assert "## Command /usage" in Path(used["transcript"]).read_text(encoding="utf-8")


async def test_undo_over_lsp_offered_no_way_to_take_back_the_agents_change_alone(lsp, endpoint, workspace):
    """Newcomer 3, finding 6, in an LSP editor: the question's actions were the fixed "Allow once" /
    "Allow always" / "Reject", so /undo's first choice — take back the agent's change alone, keep the
    file's other change — could not be chosen there. A question's named options are actions by their
    names, in its order; choosing the first undoes only the agent's line."""
    path = workspace / "abc.txt"
    path.write_bytes(b"alpha\nbeta\ngamma\n")
    endpoint.push(tool_call_stream([call("r", "read", path="abc.txt")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="abc.txt", old_string="alpha", new_string="ALPHA-A")]))
    endpoint.push(text_stream("Changed alpha."))
    editor = await lsp()
    uri = editor.open(path, "alpha\nbeta\ngamma\n")
    assert (await ask(editor, uri, "shout alpha"))["stopReason"] == "end_turn"
    assert editor.text(uri) == "ALPHA-A\nbeta\ngamma\n"
    editor.change(uri, [{"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 5}},
                         "newText": "GAMMA-B"}])  # the file's other change, after the agent's
    editor.answers = ["Undo the agent's change, keep the rest"]
    editor.questions.clear()
    assert (await ask(editor, uri, "/undo"))["stopReason"] == "end_turn"
    (question,) = editor.questions
    assert [a.title for a in question.actions] == ["Undo the agent's change, keep the rest", "Take the checkpoint",
                                                   "Keep the file as it is"]
    assert editor.text(uri) == "alpha\nbeta\nGAMMA-B\n"


async def test_undo_over_lsp_of_an_agent_edit_to_a_bom_file_asked_changed_since_the_agents_edit_and_put_the_bom_in_the_text(
        lsp, endpoint, workspace):
    """Newcomer 4's finding 2 in an LSP editor: the agent changed a file with a BOM (CRLF, no final
    newline) that was not open — its checkpoint holds the file's bytes — and the user opened it
    afterwards (an LSP document's text never holds the BOM). ``/undo`` asked "changed since the
    agent's edit" about a file nobody touched, and "Take the checkpoint" sent the BOM as a U+FEFF
    character into the document's first line. Now no question, and the document gets its text back
    without one."""
    bom = workspace / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfp1\r\np2\r\np3")
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(tool_call_stream([call("r", "read", path="bom.txt")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="bom.txt", old_string="p2", new_string="P2 agent")]))
    endpoint.push(text_stream("Changed p2."))
    editor = await lsp()
    assert (await ask(editor, editor.open(workspace / "a.txt"), "change p2"))["stopReason"] == "end_turn"
    assert bom.read_bytes() == b"\xef\xbb\xbfp1\r\nP2 agent\r\np3"
    uri = editor.open(bom, "p1\r\nP2 agent\r\np3", version=1)
    editor.answers = ["Take the checkpoint"]
    editor.questions.clear()
    assert (await ask(editor, uri, "/undo"))["stopReason"] == "end_turn"
    assert editor.questions == []
    assert editor.text(uri) == "p1\r\np2\r\np3"
    assert "\ufeff" not in str(editor.applied[-1].edit)
