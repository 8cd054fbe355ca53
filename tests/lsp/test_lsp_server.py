"""End to end: the agent as a language server — the real ``agent-server lsp`` under a pytest-lsp
client, scripted model turns from the offline endpoint (PROTOCOL.md "The LSP surface")."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lsprotocol import types

from agent_server.offline import text_stream, tool_call_stream
from support.timeouts import HANG


def call(cid, name, **args):
    return (cid, name, json.dumps(args))


async def test_initialize_advertises_incremental_sync_code_actions_and_the_commands(lsp):
    editor = await lsp(encodings=("utf-8", "utf-16"))
    caps = editor.init.capabilities
    assert caps.position_encoding == "utf-8"
    assert caps.text_document_sync.change == types.TextDocumentSyncKind.Incremental
    assert caps.text_document_sync.open_close is True
    assert caps.code_action_provider.resolve_provider is True
    assert sorted(caps.execute_command_provider.commands) == ["agentServer.answer", "agentServer.ask",
                                                              "agentServer.cancel", "agentServer.commands",
                                                              "agentServer.newSession"]


def tool_results(endpoint, index=-1):
    """The tool messages of model request ``index``, by call id."""
    return {m["tool_call_id"]: m["content"] for m in endpoint.requests[index].json()["messages"] if m["role"] == "tool"}


def rng(l0, c0, l1, c1):
    return types.Range(start=types.Position(line=l0, character=c0), end=types.Position(line=l1, character=c1))


def as_dict(r: types.Range):
    return {"start": {"line": r.start.line, "character": r.start.character},
            "end": {"line": r.end.line, "character": r.end.character}}


async def ask(editor, uri, prompt, r=None, token=None):
    arg = {"uri": uri, "range": as_dict(r or rng(0, 0, 0, 0)), "prompt": prompt}
    return await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.ask", arguments=[arg], work_done_token=token)), 90)


def units(text, encoding):
    """Length of ``text`` in the encoding's code units (independent of the server's own count)."""
    return len(text.encode("utf-16-le")) // 2 if encoding == "utf-16" else len(text.encode("utf-8"))


async def test_code_actions_on_a_diagnostic_are_fix_explain_and_add_tests_resolved_lazily(lsp, workspace):
    path = workspace / "app.py"
    path.write_text("x = 1\nprint(y)\n")
    editor = await lsp()
    uri = editor.open(path)
    diagnostic = types.Diagnostic(range=rng(1, 6, 1, 7), message="undefined name 'y'", source="pyflakes")
    actions = await editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng(1, 0, 1, 8),
        context=types.CodeActionContext(diagnostics=[diagnostic])))
    assert [a.title for a in actions] == ["Agent: fix this diagnostic", "Agent: explain", "Agent: add tests for this"]
    assert actions[0].kind == types.CodeActionKind.QuickFix and list(actions[0].diagnostics) == [diagnostic]
    assert all(a.command is None for a in actions)  # the client resolves them lazily
    fix = await editor.client.code_action_resolve_async(actions[0])
    assert fix.command.command == "agentServer.ask"
    (argument,) = fix.command.arguments
    assert argument["uri"] == uri and argument["range"] == as_dict(diagnostic.range)
    assert "undefined name 'y'" in argument["prompt"] and "app.py line 2" in argument["prompt"]
    tests = await editor.client.code_action_resolve_async(actions[2])
    assert tests.command.arguments[0]["range"] == as_dict(rng(1, 0, 1, 8))
    assert tests.command.arguments[0]["prompt"].startswith("Add tests")


async def test_a_client_without_resolve_support_gets_the_command_at_once(lsp, workspace):
    path = workspace / "app.py"
    path.write_text("print(1)\n")
    editor = await lsp(resolve=False)
    uri = editor.open(path)
    actions = await editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng(0, 0, 0, 8),
        context=types.CodeActionContext(diagnostics=[])))
    assert [a.title for a in actions] == ["Agent: fix this problem", "Agent: explain", "Agent: add tests for this"]
    assert [a.command.command for a in actions] == ["agentServer.ask", "agentServer.ask", "agentServer.ask"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-8"])
async def test_fix_runs_a_turn_on_the_unsaved_text_and_apply_edit_carries_its_version_and_hunks(
        lsp, endpoint, workspace, encoding):
    path = workspace / "app.py"
    path.write_text("print(mgs)\n")  # the disk
    unsaved = 'msg = "héllo 🎉"; print(mgs)\n'
    endpoint.push(tool_call_stream([call("r", "read", path="app.py")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="app.py", old_string="print(mgs)", new_string="print(msg)")]))
    endpoint.push(text_stream("Fixed the typo."))
    editor = await lsp(encodings=(encoding,))
    uri = editor.open(path, unsaved, version=7)
    diagnostic = types.Diagnostic(range=rng(0, 26, 0, 29), message="undefined name 'mgs'")
    (fix, *_) = await editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diagnostic.range,
        context=types.CodeActionContext(diagnostics=[diagnostic])))
    fix = await editor.client.code_action_resolve_async(fix)
    result = await editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=fix.command.command, arguments=fix.command.arguments))
    assert result["stopReason"] == "end_turn"
    assert "héllo 🎉" in tool_results(endpoint, 1)["r"]  # the model read the unsaved text
    (params,) = editor.applied
    ((doc_uri, version, edits),) = editor.edits_of(params)
    prefix = 'msg = "héllo 🎉"; print(m'
    start = units(prefix, encoding)
    assert (doc_uri, version) == (uri, 7)
    assert edits == [{"range": {"start": {"line": 0, "character": start}, "end": {"line": 0, "character": start + 2}},
                      "newText": "sg"}]
    assert editor.text(uri) == 'msg = "héllo 🎉"; print(msg)\n'
    assert path.read_text() == "print(mgs)\n"  # the editor's buffer changed, not the disk
    edit_result = tool_results(endpoint)["e"]
    assert "unsaved changes" in edit_result and "disk still has the old text" in edit_result
    shown = editor.client.shown_documents[-1]
    transcript = types_path(shown.uri)
    assert transcript.suffix == ".md" and "Fixed the typo." in transcript.read_text()


def types_path(uri):
    from urllib.parse import unquote, urlsplit

    return Path(unquote(urlsplit(uri).path))


def two_hunk_file(workspace):
    path = workspace / "calc.py"
    path.write_text("a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n")
    return path


async def test_the_editor_applies_one_hunk_of_two_and_the_model_is_told_exactly_that(lsp, endpoint, workspace):
    path = two_hunk_file(workspace)
    endpoint.push(tool_call_stream([call("r", "read", path="calc.py")]))
    endpoint.push(tool_call_stream([call("w", "write", path="calc.py", content="a = 10\nb = 2\nc = 3\nd = 4\ne = 50\n")]))
    endpoint.push(text_stream("ok"))
    editor = await lsp()
    uri = editor.open(path, version=3)

    def first_hunk_only(ed, params):  # the user unticked the second hunk in the preview
        ((doc, version, edits),) = ed.edits_of(params)
        ed.change(doc, edits[:1])
        return types.ApplyWorkspaceEditResult(applied=True)

    editor.on_apply = first_hunk_only
    assert (await ask(editor, uri, "scale a and e"))["stopReason"] == "end_turn"
    (params,) = editor.applied
    ((_, version, edits),) = editor.edits_of(params)
    assert version == 3 and len(edits) == 2
    # every hunk asks for confirmation (the client supports change annotations)
    annotations = params.edit.change_annotations
    assert [e.annotation_id for e in params.edit.document_changes[0].edits] == list(annotations)
    assert all(a.needs_confirmation for a in annotations.values())
    assert editor.text(uri) == "a = 10\nb = 2\nc = 3\nd = 4\ne = 5\n"
    result = tool_results(endpoint)["w"]
    assert "Only 1 of 2 hunks of your change to calc.py were applied" in result
    assert "+a = 10" in result and "e = 50" not in result  # the diff of what landed


async def test_did_change_between_read_and_edit_is_stale_and_the_agent_reads_again(lsp, endpoint, workspace):
    path = two_hunk_file(workspace)
    endpoint.push(tool_call_stream([call("r1", "read", path="calc.py")]))
    endpoint.push(tool_call_stream([call("e1", "edit", path="calc.py", old_string="b = 2", new_string="b = 20")]))
    endpoint.push(tool_call_stream([call("r2", "read", path="calc.py")]))
    endpoint.push(tool_call_stream([call("e2", "edit", path="calc.py", old_string="b = 2", new_string="b = 20")]))
    endpoint.push(text_stream("done"))
    editor = await lsp()
    uri = editor.open(path, version=1)

    def typing_then_editor(ed, params):
        if len(ed.applied) == 1:  # the user typed meanwhile: the editor refuses the old version
            ed.change(uri, [{"range": as_dict(rng(0, 0, 0, 0)), "newText": "# note\n"}])
            return ed.apply_all(params)
        return ed.apply_all(params)

    editor.on_apply = typing_then_editor
    assert (await ask(editor, uri, "b should be 20"))["stopReason"] == "end_turn"
    assert "read it again" in tool_results(endpoint, 2)["e1"].lower()
    assert "# note" in tool_results(endpoint, 3)["r2"]
    versions = [editor.edits_of(p)[0][1] for p in editor.applied]
    assert versions == [1, 2]
    assert editor.text(uri) == "# note\na = 1\nb = 20\nc = 3\nd = 4\ne = 5\n"


async def test_progress_is_begin_one_report_per_tool_step_and_answer_tail_then_end(lsp, endpoint, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(tool_call_stream([call("r", "read", path="a.txt")]))
    endpoint.push(text_stream("The file says alpha."))
    editor = await lsp()
    uri = editor.open(workspace / "a.txt")
    await ask(editor, uri, "what does it say?")  # no token of its own: the server creates one
    ((token, values),) = editor.client.progress_reports.items()
    assert str(token).startswith("agent-server-turn-")
    kinds = [v.kind for v in values]
    assert kinds[0] == "begin" and kinds[-1] == "end" and set(kinds[1:-1]) == {"report"}
    messages = [v.message for v in values[1:-1]]
    assert messages[0].startswith("Read") and "a.txt" in messages[0]
    assert messages[-1].endswith("The file says alpha.")
    assert values[0].cancellable is True and values[-1].message == "end_turn"


async def test_a_burst_of_one_character_deltas_reaches_the_transcript_whole_in_few_reports(lsp, endpoint, workspace):
    answer = "".join(f"word{i} " for i in range(800)).strip() + " — ✓"
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(text_stream(answer, chunk_size=1))
    editor = await lsp()
    uri = editor.open(workspace / "a.txt")
    result = await ask(editor, uri, "say a lot")
    assert result["stopReason"] == "end_turn"
    transcript = Path(result["transcript"]).read_text(encoding="utf-8")
    assert f"### Answer\n\n{answer}\n" in transcript  # every byte, in order, after coalescing
    ((_, values),) = editor.client.progress_reports.items()
    assert values[-2].message == "…" + answer[-80:]  # the last report shows the answer's real end
    assert len(values) < len(answer) // 100  # not one report per delta


async def wait_until(predicate, timeout=HANG):
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "timed out waiting"
        await asyncio.sleep(0.02)


SLOW = "partial answer " * 100


async def start_slow_turn(lsp, endpoint, workspace, *, token=None, msg_id=None):
    endpoint.push(text_stream(SLOW, chunk_size=6, delay=0.05))
    endpoint.push(text_stream("fine"))
    (workspace / "a.txt").write_text("alpha\n")
    editor = await lsp()
    uri = editor.open(workspace / "a.txt")
    if token is not None:
        editor.client.progress_reports.setdefault(token, [])  # a client registers its own token
    arg = {"uri": uri, "range": as_dict(rng(0, 0, 0, 5)), "prompt": "explain at length"}
    params = types.ExecuteCommandParams(command="agentServer.ask", arguments=[arg], work_done_token=token)
    running = asyncio.ensure_future(editor.client.protocol.send_request_async(
        types.WORKSPACE_EXECUTE_COMMAND, params, msg_id=msg_id or "ask-1"))
    await wait_until(lambda: any(getattr(v, "message", "") and "partial" in v.message
                                 for vs in editor.client.progress_reports.values() for v in vs))
    return editor, uri, running


async def assert_cut_and_next_turn_runs(editor, uri, endpoint):
    messages = [m["role"] for m in endpoint.requests[-1].json()["messages"]]
    assert (await ask(editor, uri, "go on"))["stopReason"] == "end_turn"
    history = endpoint.requests[-1].json()["messages"]
    cut = history[len(messages)]  # the interrupted answer is kept, cut off
    assert cut["role"] == "assistant" and SLOW.startswith(cut["content"]) and cut["content"] != SLOW


async def test_cancel_through_the_progress_token_ends_the_turn_cancelled(lsp, endpoint, workspace):
    editor, uri, running = await start_slow_turn(lsp, endpoint, workspace, token="tok-cancel")
    editor.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token="tok-cancel"))
    result = await asyncio.wait_for(running, HANG)
    assert result["stopReason"] == "cancelled"
    values = editor.client.progress_reports["tok-cancel"]
    assert values[-1].kind == "end" and values[-1].message == "cancelled"
    await assert_cut_and_next_turn_runs(editor, uri, endpoint)


async def test_agent_server_cancel_command_ends_the_running_turn(lsp, endpoint, workspace):
    editor, uri, running = await start_slow_turn(lsp, endpoint, workspace)
    answer = await editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.cancel", arguments=[{"uri": uri}]))
    assert answer == {"cancelled": 1}
    assert (await asyncio.wait_for(running, HANG))["stopReason"] == "cancelled"
    await assert_cut_and_next_turn_runs(editor, uri, endpoint)


async def test_cancel_request_on_the_ask_command_cancels_the_turn(lsp, endpoint, workspace):
    editor, uri, running = await start_slow_turn(lsp, endpoint, workspace, msg_id="ask-9")
    editor.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="ask-9"))
    with pytest.raises(Exception, match="cancel"):
        await asyncio.wait_for(running, HANG)
    await assert_cut_and_next_turn_runs(editor, uri, endpoint)


def secret_read_script(endpoint, workspace):
    (workspace / ".env").write_text("API_KEY=hunter2\n")
    endpoint.push(tool_call_stream([call("s", "read", path=".env")]))
    endpoint.push(text_stream("done"))


@pytest.mark.parametrize("answer, expected", [
    ("Allow once", "hunter2"),
    ("Reject", "Rejected by the user"),
    (None, "Cancelled"),  # the user dismissed the message
    ("never", "Timed out"),  # no answer at all
])
async def test_permission_question_is_a_show_message_request_and_each_answer_reaches_the_model(
        lsp, endpoint, workspace, answer, expected):
    secret_read_script(endpoint, workspace)
    editor = await lsp(env={"AGENT_SERVER_APPROVAL_TIMEOUT": "1"})
    editor.answers = [answer]
    uri = editor.open(workspace / ".env")
    assert (await ask(editor, uri, "show the env"))["stopReason"] == "end_turn"
    (question,) = editor.questions
    assert ".env" in question.message
    assert [a.title for a in question.actions] == ["Allow once", "Allow always", "Reject"]
    result = tool_results(endpoint)["s"]
    assert result.startswith(expected) if expected != "hunter2" else expected in result
    if answer != "Allow once":
        assert "hunter2" not in result


async def test_a_client_without_the_show_message_capability_is_asked_anyway_as_eglot_is(lsp, endpoint, workspace):
    """Emacs eglot answers window/showMessageRequest without advertising the optional capability:
    every edit and question was denied because the server required it."""
    secret_read_script(endpoint, workspace)
    editor = await lsp(show_message=False)
    uri = editor.open(workspace / ".env")
    assert (await ask(editor, uri, "show the env"))["stopReason"] == "end_turn"
    assert len(editor.questions) == 1
    assert "hunter2" in tool_results(endpoint)["s"]


async def code_actions(editor, uri, diagnostics=()):
    return await editor.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=rng(0, 0, 0, 1),
        context=types.CodeActionContext(diagnostics=list(diagnostics))))


async def test_an_editor_that_cannot_show_the_question_answers_it_with_a_code_action(lsp, endpoint, workspace):
    """Helix has not implemented window/showMessageRequest: the waiting question is also offered as
    code actions ("Agent: allow once — …") running agentServer.answer."""
    secret_read_script(endpoint, workspace)
    editor = await lsp(env={"AGENT_SERVER_APPROVAL_TIMEOUT": "60"})
    editor.answers = ["error"]
    uri = editor.open(workspace / ".env")
    turn = asyncio.ensure_future(ask(editor, uri, "show the env"))
    for _ in range(400):
        actions = [a for a in await code_actions(editor, uri) if a.title.startswith("Agent: allow once — ")]
        if actions:
            break
        await asyncio.sleep(0.05)
    (allow,) = actions
    assert ".env" in allow.title and allow.command.command == "agentServer.answer"
    answered = await editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=allow.command.command, arguments=allow.command.arguments))
    assert answered == {"answered": True}
    assert (await turn)["stopReason"] == "end_turn"
    assert "hunter2" in tool_results(endpoint)["s"]
    assert not [a for a in await code_actions(editor, uri) if a.title.startswith("Agent: allow")]  # gone


async def test_a_question_nobody_can_answer_is_denied_with_the_editors_reason(lsp, endpoint, workspace):
    secret_read_script(endpoint, workspace)
    editor = await lsp(env={"AGENT_SERVER_APPROVAL_TIMEOUT": "1"})
    editor.answers = ["error"]
    uri = editor.open(workspace / ".env")
    assert (await ask(editor, uri, "show the env"))["stopReason"] == "end_turn"
    result = tool_results(endpoint)["s"]
    assert "hunter2" not in result and "could not show the question" in result, result


async def test_fix_this_problem_is_offered_on_a_line_without_diagnostics_and_ask_takes_every_sources_diagnostics(
        lsp, endpoint, workspace):
    """In Neovim "Agent: fix this diagnostic" never appeared on gra: Neovim passes a server only its
    own diagnostics, and ours publishes none."""
    path = workspace / "app.py"
    path.write_text("print(y)\n")
    endpoint.push(text_stream("fixed"))
    editor = await lsp()
    uri = editor.open(path)
    (fix, *_rest) = await code_actions(editor, uri)
    assert fix.title == "Agent: fix this problem" and fix.kind == types.CodeActionKind.QuickFix
    fix = await editor.client.code_action_resolve_async(fix)
    (argument,) = fix.command.arguments
    argument["diagnostics"] = [{"range": as_dict(rng(0, 6, 0, 7)), "severity": 1, "source": "pyright",
                                "message": "\"y\" is not defined"}]
    await asyncio.wait_for(editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.ask", arguments=[argument])), 90)
    sent = "\n".join(str(m["content"]) for m in endpoint.requests[0].json()["messages"] if m["role"] == "user")
    assert "Fix the problem in app.py line 1" in sent
    assert "- line 1: error: \"y\" is not defined (pyright)" in sent, sent


async def test_one_transcript_per_session_appended_per_turn_shown_at_the_same_uri(lsp, endpoint, workspace):
    """Every turn opened its transcript in a new split (four windows after three turns)."""
    (workspace / "a.txt").write_text("alpha\n")
    for n in (1, 2, 3):
        endpoint.push(text_stream(f"answer number {n}"))
    editor = await lsp()
    uri = editor.open(workspace / "a.txt")
    results = [await ask(editor, uri, f"question {n}") for n in (1, 2, 3)]
    assert len({r["transcript"] for r in results}) == 1
    shown = [d.uri for d in editor.client.shown_documents]
    assert len(shown) == 3 and len(set(shown)) == 1
    text = Path(results[0]["transcript"]).read_text()
    assert text.count("# agent-server\n") == 1
    assert text.index("question 1") < text.index("answer number 1") < text.index("question 2") < \
        text.index("answer number 3")


async def test_client_without_change_annotations_is_asked_with_the_change_before_the_edit(lsp, endpoint, workspace):
    path = two_hunk_file(workspace)
    endpoint.push(tool_call_stream([call("r", "read", path="calc.py")]))
    endpoint.push(tool_call_stream([call("e1", "edit", path="calc.py", old_string="a = 1", new_string="a = 10")]))
    endpoint.push(tool_call_stream([call("e2", "edit", path="calc.py", old_string="b = 2", new_string="b = 20")]))
    endpoint.push(tool_call_stream([call("e3", "edit", path="calc.py", old_string="c = 3", new_string="c = 30")]))
    endpoint.push(text_stream("done"))
    editor = await lsp(annotations=False)
    editor.answers = ["Reject", "Allow always"]
    uri = editor.open(path)
    assert (await ask(editor, uri, "scale"))["stopReason"] == "end_turn"
    assert len(editor.questions) == 2  # e1 rejected, e2 allowed always, e3 not asked again
    assert "-a = 1" in editor.questions[0].message and "+a = 10" in editor.questions[0].message
    assert tool_results(endpoint)["e1"].startswith("Rejected by the user")
    assert len(editor.applied) == 2 and all(p.edit.change_annotations is None for p in editor.applied)
    assert editor.text(uri) == "a = 1\nb = 20\nc = 30\nd = 4\ne = 5\n"


async def test_one_session_per_workspace_folder_and_new_session_starts_a_fresh_one(lsp, endpoint, tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    for folder in (first, second):
        folder.mkdir()
        (folder / "f.txt").write_text(f"{folder.name}\n")
    for _ in range(4):
        endpoint.push(text_stream("ok"))
    editor = await lsp(folders=[first, second])
    uri_one, uri_two = editor.open(first / "f.txt"), editor.open(second / "f.txt")
    a = await ask(editor, uri_one, "hello one")
    b = await ask(editor, uri_two, "hello two")
    c = await ask(editor, uri_one, "again one")
    assert a["sessionId"] == c["sessionId"] != b["sessionId"]
    users = [m["content"] for m in endpoint.requests[2].json()["messages"] if m["role"] == "user"]
    assert len(users) == 2 and "hello one" in users[0] and "again one" in users[1]  # one folder, one history
    fresh = await editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="agentServer.newSession", arguments=[{"uri": uri_one}]))
    d = await ask(editor, uri_one, "new start")
    assert d["sessionId"] == fresh["sessionId"] not in (a["sessionId"], b["sessionId"])
    assert [m["role"] for m in endpoint.requests[3].json()["messages"]] == ["system", "user"]


async def test_without_show_document_the_answer_comes_as_a_message(lsp, endpoint, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(text_stream("Here is the whole answer."))
    editor = await lsp(show_document=False)
    uri = editor.open(workspace / "a.txt")
    result = await ask(editor, uri, "say it")
    assert editor.client.shown_documents == []
    assert [m.message for m in editor.client.messages] == ["Here is the whole answer."]
    assert "Here is the whole answer." in types_path(Path(result["transcript"]).as_uri()).read_text()


async def test_ask_without_a_prompt_is_invalid_params_and_runs_nothing(lsp, endpoint, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    editor = await lsp()
    uri = editor.open(workspace / "a.txt")
    with pytest.raises(Exception) as failure:
        await editor.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command="agentServer.ask", arguments=[{"uri": uri}]))
    assert getattr(failure.value, "code", None) == -32602 and "prompt" in str(failure.value)
    assert endpoint.requests == []


async def test_a_document_larger_than_the_pipe_buffer_is_read_whole(lsp, endpoint, workspace):
    path = workspace / "big.py"
    big = "".join(f"value_{i} = {i}  # padding padding padding\n" for i in range(8000))  # ~350 KB
    path.write_text("x = 1\n")
    endpoint.push(tool_call_stream([call("r", "read", path="big.py", offset=7990, limit=5)]))
    endpoint.push(text_stream("ok"))
    editor = await lsp()
    uri = editor.open(path, big)
    assert (await ask(editor, uri, "look at the end"))["stopReason"] == "end_turn"
    assert "value_7990 = 7990" in tool_results(endpoint)["r"]


async def test_typing_while_the_edit_question_is_open_makes_the_edit_stale_and_nothing_is_sent(
        lsp, endpoint, workspace):
    path = two_hunk_file(workspace)
    endpoint.push(tool_call_stream([call("r1", "read", path="calc.py")]))
    endpoint.push(tool_call_stream([call("e1", "edit", path="calc.py", old_string="a = 1", new_string="a = 10")]))
    endpoint.push(tool_call_stream([call("r2", "read", path="calc.py")]))
    endpoint.push(tool_call_stream([call("e2", "edit", path="calc.py", old_string="a = 1", new_string="a = 10")]))
    endpoint.push(text_stream("done"))
    editor = await lsp(annotations=False)
    uri = editor.open(path)

    def type_then_allow(ed, params):  # the user types in the file, then answers
        if len(ed.questions) == 1:
            ed.change(uri, [{"range": as_dict(rng(4, 0, 4, 0)), "newText": "# typed\n"}])
        return "Allow once"

    editor.answers = [type_then_allow]
    assert (await ask(editor, uri, "a should be 10"))["stopReason"] == "end_turn"
    stale = tool_results(endpoint, 2)["e1"]
    assert "changed since" in stale and "Read it again" in stale  # the model is told to read again
    assert len(editor.applied) == 1 and editor.edits_of(editor.applied[0])[0][1] == 2
    assert editor.text(uri) == "a = 10\nb = 2\nc = 3\nd = 4\n# typed\ne = 5\n"


async def test_a_file_outside_the_workspace_never_makes_its_own_folder_a_root(lsp, endpoint, workspace, tmp_path):
    """Regression: opening ``~/.bashrc`` (or ``/etc/passwd``) made its folder the session's root, so
    the confined shell could write there."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("alias ll='ls -l'\n")
    endpoint.push(tool_call_stream([("s", "bash", json.dumps({"command": "pwd; echo pwned > " + str(home / "pwned.txt")}))]))
    endpoint.push(text_stream("done"))
    editor = await lsp()
    uri = editor.open(home / ".bashrc")
    result = await ask(editor, uri, "look at this")
    shell = [m["content"] for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"][0]
    assert str(workspace) in shell  # the session's root is the workspace folder
    assert not (home / "pwned.txt").exists()
    assert result["stopReason"] == "end_turn"


@pytest.mark.parametrize("annotations", [True, False])
async def test_accept_edits_sends_the_edit_without_confirmation_and_asks_nothing(
        lsp, endpoint, workspace, tmp_path, annotations):
    path = two_hunk_file(workspace)
    config = tmp_path / "accept-edits.toml"
    config.write_text('[policy]\ndefault_mode = "accept-edits"\n')
    endpoint.push(tool_call_stream([call("r", "read", path="calc.py")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="calc.py", old_string="a = 1", new_string="a = 10")]))
    endpoint.push(text_stream("done"))
    editor = await lsp(annotations=annotations, env={"AGENT_SERVER_CONFIG": str(config)})
    uri = editor.open(path, version=2)
    assert (await ask(editor, uri, "scale a"))["stopReason"] == "end_turn"
    assert editor.questions == []  # no question, and no hunk to confirm
    (params,) = editor.applied
    assert params.edit.change_annotations is None
    assert all(getattr(e, "annotation_id", None) is None for e in params.edit.document_changes[0].edits)
    assert editor.text(uri) == "a = 10\nb = 2\nc = 3\nd = 4\ne = 5\n"


@pytest.mark.parametrize("said, line", [("lf", 2), ("lsp", 3)])
async def test_a_client_that_counts_lines_as_neovim_does_could_say_so_only_by_being_named_neovim(
        lsp, endpoint, workspace, said, line):
    """The server counted a document's lines as Neovim's LSP client does (only ``\\n`` ends one, a
    lone ``\\r`` is text of its row) for a client whose ``clientInfo.name`` is ``Neovim`` alone: any
    other client counting so (a Vim plugin's) got an edit of ``a3`` in ``a1\\rmid\\na2\\na3\\n`` on the
    wrong line. A client says how it counts: ``capabilities.experimental.agentServer.lineBreaks``
    (docs/protocol.md); its name decides only when it says nothing."""
    path = workspace / "cr.txt"
    text = "a1\rmid\na2\na3\n"
    path.write_bytes(text.encode())
    endpoint.push(tool_call_stream([call("r", "read", path="cr.txt")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="cr.txt", old_string="a3", new_string="A3")]))
    endpoint.push(text_stream("done"))
    editor = await lsp(experimental={"agentServer": {"lineBreaks": said}})
    uri = editor.open(path, text)
    editor.on_apply = lambda ed, params: types.ApplyWorkspaceEditResult(applied=False, failure_reason="looked at only")
    assert (await ask(editor, uri, "change a3"))["stopReason"] == "end_turn"
    (params,) = editor.applied
    ((_, _, edits),) = editor.edits_of(params)
    assert [(e["range"]["start"]["line"], e["range"]["end"]["line"]) for e in edits] == [(line, line)], edits
