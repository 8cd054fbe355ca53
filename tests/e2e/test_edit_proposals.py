"""End to end: edits become workspace-edit proposals the (in-memory) editor applies itself, reads
come from the editor's unsaved buffers, stale proposals are refused — through the official ACP
Python SDK, the real server and scripted model streams (PROTOCOL.md "Extensions")."""

import json

import pytest
from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig, MemoryFs
from support.editor import Buffer, MemoryEditor
from support.sessions import events
from support.timeouts import HANG

from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import EventLog


def call(cid, name, **args):
    return (cid, name, json.dumps(args))


def push(endpoint, *steps):
    for step in steps:
        endpoint.push(tool_call_stream([step]) if isinstance(step, tuple) else step)


async def start(factory, endpoint, workspace, editor, *, encodings=("utf-16", "utf-8")):
    config = ClientConfig(read_text_file=editor.read, ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                          agent_server_extension={"version": 1, "bufferVersions": True, "applyWorkspaceEdit": True,
                                                  "positionEncodings": list(encodings)})
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    init = await h.initialize(config.capabilities())
    session = await h.new_session(str(workspace))
    return h, session.session_id, init


def tool_messages(endpoint, n):
    return [m for m in endpoint.requests[n].json()["messages"] if m["role"] == "tool"]


async def test_initialize_advertises_the_extension_with_the_negotiated_encoding(acp_harness_factory, endpoint, workspace):
    h, sid, init = await start(acp_harness_factory, endpoint, workspace, MemoryEditor(), encodings=("utf-32", "utf-16"))
    assert init.agent_capabilities.field_meta["agentServer"] == {"version": 1, "applyWorkspaceEdit": True,
                                                                 "positionEncoding": "utf-32"}


async def test_dirty_buffer_is_read_and_the_proposal_is_computed_against_it(acp_harness_factory, endpoint, workspace):
    path = workspace / "app.py"
    path.write_text("x = 1\nprint(x)\n")  # the disk
    editor = MemoryEditor({str(path): Buffer("x = 1\ny = 2  # unsaved\nprint(x)\n", version=12, dirty=True)})
    push(endpoint, call("r", "read", path="app.py"),
         call("e", "edit", path="app.py", old_string="print(x)", new_string="print(x, y)"),
         text_stream("done"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "print y too")).stop_reason == "end_turn"
    assert "y = 2  # unsaved" in tool_messages(endpoint, 1)[0]["content"]  # the model saw the buffer
    (proposal,) = editor.proposals
    doc = proposal["edit"]["documentChanges"][0]
    assert doc["textDocument"] == {"uri": path.as_uri(), "version": 12}
    assert doc["edits"] == [{"range": {"start": {"line": 2, "character": 7}, "end": {"line": 2, "character": 7}},
                             "newText": ", y"}]
    assert editor.buffers[str(path)].text == "x = 1\ny = 2  # unsaved\nprint(x, y)\n"
    assert path.read_text() == "x = 1\nprint(x)\n"  # a dirty buffer is never saved behind the user's back
    result = tool_messages(endpoint, 2)[-1]["content"]
    assert "unsaved changes" in result and "disk still has the old text" in result
    # the edit's tool call showed the diff before the proposal went out
    diffs = [c for u in h.updates(sid, "tool_call_update") for c in (u.get("content") or []) if c["type"] == "diff"]
    assert diffs and diffs[0]["newText"].endswith("print(x, y)\n")


async def test_stale_proposal_is_refused_and_the_next_after_a_reread_applies(acp_harness_factory, endpoint, workspace):
    path = workspace / "a.txt"
    path.write_text("one\ntwo\n")
    editor = MemoryEditor({str(path): Buffer("one\ntwo\n", version=3)})

    def keystroke(ed, p):  # the user types between the agent's read and its proposal — once
        if len(ed.proposals) == 1:
            ed.buffers[p].text, ed.buffers[p].version = "one\ntwo\nthree\n", 4
    editor.before_apply = keystroke
    push(endpoint, call("r1", "read", path="a.txt"),
         call("e1", "edit", path="a.txt", old_string="two", new_string="TWO"),
         call("r2", "read", path="a.txt"),
         call("e2", "edit", path="a.txt", old_string="two", new_string="TWO"),
         text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "shout two")).stop_reason == "end_turn"
    assert [a["outcome"] for a in editor.answers] == ["stale", "applied"]
    stale = tool_messages(endpoint, 2)[-1]["content"]
    assert "changed in the editor since you read it" in stale and "read it again" in stale.lower()
    assert editor.buffers[str(path)].text == "one\nTWO\nthree\n"
    assert path.read_text() == "one\nTWO\nthree\n"  # a clean buffer is saved


async def test_partial_accept_tells_the_model_exactly_which_text_landed(acp_harness_factory, endpoint, workspace, agent_state_dir):
    path = workspace / "h.txt"
    original = "".join(f"line {i}\n" for i in range(1, 13))
    path.write_text(original)
    editor = MemoryEditor({str(path): Buffer(original, version=1)}, decide=lambda params, hunks: [0, 2])
    new = original.replace("line 2\n", "LINE 2\n").replace("line 6\n", "LINE 6\n").replace("line 11\n", "LINE 11\n")
    push(endpoint, call("r", "read", path="h.txt"),
         call("w", "write", path="h.txt", content=new), text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "caps")).stop_reason == "end_turn"
    landed = "".join(f"LINE {i}\n" if i in (2, 11) else f"line {i}\n" for i in range(1, 13))
    assert editor.buffers[str(path)].text == landed
    result = tool_messages(endpoint, 2)[-1]["content"]
    assert "Only 2 of 3 hunks" in result and "+LINE 2" in result and "+LINE 11" in result and "LINE 6" not in result
    await h.close()
    log = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl")
    logged = [e.data for e in log.events if e.type == "tool/result" and e.data["call_id"] == "w"][0]
    assert logged["content"] == result
    # the agent's memory of the file is what landed: a second edit needs no re-read


async def test_finding_1_a_partly_applied_edit_sent_the_editor_no_diff_of_what_landed(acp_harness_factory, endpoint, workspace):
    # the VS Code Changes box showed "multi.txt changed" without +/- counts: the card had no diff
    path = workspace / "m.txt"
    original = "".join(f"row {i}\n" for i in range(1, 31))
    path.write_text(original)
    editor = MemoryEditor({str(path): Buffer(original, version=1)}, decide=lambda params, hunks: [0, 2])
    new = original.replace("row 2\n", "ROW 2\n").replace("row 15\n", "ROW 15\n").replace("row 29\n", "ROW 29\n")
    push(endpoint, call("r", "read", path="m.txt"), call("w", "write", path="m.txt", content=new), text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "caps")).stop_reason == "end_turn"
    landed = original.replace("row 2\n", "ROW 2\n").replace("row 29\n", "ROW 29\n")
    diffs = [c for u in h.updates(sid, "tool_call_update") for c in (u.get("content") or []) if c["type"] == "diff"]
    # the proposal's diff came with the call; its result's says what landed (the card shows the last)
    assert (diffs[-1]["path"], diffs[-1]["oldText"], diffs[-1]["newText"]) == (str(path), original, landed)
    await h.close()


async def test_user_adjusted_proposal_is_reported_as_what_landed(acp_harness_factory, endpoint, workspace):
    path = workspace / "c.py"
    path.write_text("a = 1\n")

    def adjust(params, hunks):
        uri = params["edit"]["documentChanges"][0]["textDocument"]["uri"]
        text = "a = 2  # user tweak\n"
        edits = [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 1, "character": 0}}, "newText": text}]
        editor.buffers[str(path)] = Buffer(text, version=2)
        path.write_text(text)
        return {"outcome": "applied", "saved": True, "applied": {"documentChanges": [
            {"textDocument": {"uri": uri, "version": 1}, "edits": edits}]},
            "versions": {uri: {"version": 2, "sha256": "x"}}}
    editor = MemoryEditor({str(path): Buffer("a = 1\n", version=1)}, decide=adjust)
    push(endpoint, call("r", "read", path="c.py"), call("e", "edit", path="c.py", old_string="a = 1", new_string="a = 2"),
         call("e2", "edit", path="c.py", old_string="# user tweak", new_string="# kept"), text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "bump")).stop_reason == "end_turn"
    first = tool_messages(endpoint, 2)[-1]["content"]
    assert "The user adjusted your change" in first and "+a = 2  # user tweak" in first
    second = tool_messages(endpoint, 3)[-1]["content"]
    assert second.startswith("Edited c.py")  # no re-read needed: the agent knows what landed
    assert len(editor.proposals) == 2


async def test_rejected_proposal_changes_nothing_and_says_so(acp_harness_factory, endpoint, workspace):
    path = workspace / "r.txt"
    path.write_text("keep\n")
    editor = MemoryEditor({str(path): Buffer("keep\n", version=1)}, decide=lambda p, h: "reject")
    push(endpoint, call("r", "read", path="r.txt"), call("e", "edit", path="r.txt", old_string="keep", new_string="drop"),
         text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "drop it")).stop_reason == "end_turn"
    assert "rejected the change" in tool_messages(endpoint, 2)[-1]["content"]
    assert editor.buffers[str(path)].text == "keep\n" and path.read_text() == "keep\n"


async def test_utf8_negotiated_emoji_line_edit_lands_exactly(acp_harness_factory, endpoint, workspace):
    path = workspace / "u.py"
    text = 'x = "⚙️😀" # é\n'
    path.write_text(text)
    editor = MemoryEditor({str(path): Buffer(text, version=1)}, encoding="utf-8")
    push(endpoint, call("r", "read", path="u.py"), call("e", "edit", path="u.py", old_string="# é", new_string="# è"),
         text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor, encodings=("utf-8",))
    assert (await h.prompt(sid, "accent")).stop_reason == "end_turn"
    edit = editor.proposals[0]["edit"]["documentChanges"][0]["edits"][0]
    assert edit["range"]["start"]["character"] == 19  # bytes, not UTF-16 units
    assert editor.buffers[str(path)].text == 'x = "⚙️😀" # è\n'


async def test_crlf_proposal_keeps_crlf_and_a_new_file_is_create_plus_insert(acp_harness_factory, endpoint, workspace):
    path = workspace / "w.ps1"
    text = "a\r\nb\r\nc\r\n"
    path.write_bytes(text.encode())
    editor = MemoryEditor({str(path): Buffer(text, version=1)})
    push(endpoint, call("r", "read", path="w.ps1"), call("e", "edit", path="w.ps1", old_string="b\n", new_string="B\nb2\n"),
         call("n", "write", path="new/mod.py", content="print('hi')\n"), text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "go")).stop_reason == "end_turn"
    assert editor.buffers[str(path)].text == "a\r\nB\r\nb2\r\nc\r\n"
    create, insert = editor.proposals[1]["edit"]["documentChanges"]
    assert create["kind"] == "create" and insert["edits"][0]["newText"] == "print('hi')\n"
    assert (workspace / "new" / "mod.py").read_text() == "print('hi')\n"


async def test_plain_acp_client_gets_a_guarded_fs_write(acp_harness_factory, endpoint, workspace):
    path = workspace / "p.txt"
    fs = MemoryFs({str(path): "alpha\n"})
    push(endpoint, call("r", "read", path="p.txt"), call("e", "edit", path="p.txt", old_string="alpha", new_string="beta"),
         text_stream("ok"))
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="allow_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    init = await h.initialize(config.capabilities())
    assert "_meta" not in (init.agent_capabilities.model_dump(by_alias=True) or {}) or \
        not (init.agent_capabilities.field_meta or {}).get("agentServer")
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "beta")).stop_reason == "end_turn"
    assert fs.files[str(path)] == "beta\n" and fs.writes[-1]["content"] == "beta\n"
    assert not path.exists()  # the editor wrote it, not the server
    (question,) = h.transcript.requests("session/request_permission")
    diff = [c for c in question.message["params"]["toolCall"]["content"] if c["type"] == "diff"]
    assert diff and diff[0]["path"] == str(path)
    assert [o["optionId"] for o in question.message["params"]["options"]] == [
        "allow_once", "allow_always", "reject_once", "reject_always"]


async def test_plain_acp_edit_rejected_by_the_user_is_not_written(acp_harness_factory, endpoint, workspace):
    path = workspace / "p.txt"
    fs = MemoryFs({str(path): "alpha\n"})
    push(endpoint, call("r", "read", path="p.txt"), call("e", "edit", path="p.txt", old_string="alpha", new_string="beta"),
         text_stream("ok"))
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="reject_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "beta")).stop_reason == "end_turn"
    assert fs.writes == [] and fs.files[str(path)] == "alpha\n"
    assert "rejected" in tool_messages(endpoint, 2)[-1]["content"]


async def test_edit_of_a_file_never_read_asked_the_user_before_failing_read_it_first(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Plain ACP asks before every edit (the question is the review): an edit that cannot succeed
    — file not read, `old_string` not in it — fails with the tool's own error, unasked."""
    path, other = workspace / "p.txt", workspace / "o.txt"
    fs = MemoryFs({str(path): "alpha\n", str(other): "one\n"})
    push(endpoint, call("e", "edit", path="p.txt", old_string="alpha", new_string="beta"),
         call("w", "write", path="p.txt", content="gamma\n"),
         call("r", "read", path="o.txt"), call("miss", "edit", path="o.txt", old_string="two", new_string="2"),
         call("ok", "edit", path="o.txt", old_string="one", new_string="1"), text_stream("ok"))
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="allow_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "edit")).stop_reason == "end_turn"
    assert tool_messages(endpoint, 1)[-1]["content"].startswith("You have not read p.txt in this session.")
    assert tool_messages(endpoint, 2)[-1]["content"].startswith("You have not read p.txt in this session.")
    assert tool_messages(endpoint, 4)[-1]["content"].startswith("`old_string` was not found in o.txt.")
    (question,) = h.transcript.requests("session/request_permission")  # only the edit that could land asked
    assert question.message["params"]["toolCall"]["title"] == "Edit o.txt"
    assert fs.files == {str(path): "alpha\n", str(other): "1\n"}
    logged = events(agent_state_dir, sid)
    results = {e.data["call_id"]: e.data for e in logged if e.type == "tool/result"}
    assert results["e"]["meta"]["refused"] == "not_read" and "reason" not in results["e"]
    decided = {e.data["call_id"]: e.data for e in logged if e.type == "policy/decision"}
    assert [(decided[c]["outcome"], decided[c]["decided_by"]) for c in ("e", "w", "miss", "ok")] == [
        ("deny", "precondition"), ("deny", "precondition"), ("deny", "precondition"), ("allow", "user")]
    assert decided["e"]["precondition"] == "not_read"


async def test_plain_acp_client_that_changed_the_file_gets_stale_and_no_write(acp_harness_factory, endpoint, workspace):
    path = workspace / "q.txt"
    fs = MemoryFs({str(path): "alpha\n"})
    reads = []

    def read(params):  # the file changes right after the agent's first read
        result = fs.read(params)
        reads.append(1)
        if len(reads) == 3:  # after the precondition's and the edit's freshness checks: the pre-write re-read sees it
            fs.files[str(path)] = "alpha\nomega\n"
        return result
    push(endpoint, call("r", "read", path="q.txt"), call("e", "edit", path="q.txt", old_string="alpha", new_string="beta"),
         text_stream("ok"))
    config = ClientConfig(read_text_file=read, write_text_file=fs.write, permission="allow_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "beta")).stop_reason == "end_turn"
    assert fs.writes == [] and fs.files[str(path)] == "alpha\nomega\n"
    assert "changed since it was read" in tool_messages(endpoint, 2)[-1]["content"]


async def test_cancel_while_a_proposal_is_pending_answers_cancelled_and_applies_nothing(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    import asyncio

    path = workspace / "z.txt"
    path.write_text("zero\n")
    editor = MemoryEditor({str(path): Buffer("zero\n", version=1)})
    arrived = asyncio.Event()

    async def never_answers(params):
        editor.proposals.append(params)
        arrived.set()
        await asyncio.Event().wait()  # never: only the cancel, after its grace, ends the wait
    push(endpoint, call("r", "read", path="z.txt"), call("e", "edit", path="z.txt", old_string="zero", new_string="one"))
    config = ClientConfig(read_text_file=editor.read, ext_methods={APPLY_WORKSPACE_EDIT: never_answers},
                          agent_server_extension=True)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    task = h.start_prompt(sid, "edit")
    await asyncio.wait_for(arrived.wait(), HANG)
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"  # the grace for the editor's answer ran out: never answered
    cancels = [m for m in h.transcript.notifications("$/cancel_request")]
    assert cancels, "the pending proposal was cancelled on the wire"
    assert path.read_text() == "zero\n" and editor.buffers[str(path)].text == "zero\n"
    await h.close()
    log = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl")
    result = [e.data for e in log.events if e.type == "tool/result" and e.data["call_id"] == "e"][0]
    assert result["status"] == "failed" and "cancelled" in result["content"]
    assert log.events[-1].type == "turn/end" and log.events[-1].data["exit"] == "cancelled"


async def test_file_the_editor_does_not_know_is_a_clear_file_not_found_result(acp_harness_factory, endpoint, workspace):
    editor = MemoryEditor()
    push(endpoint, call("r", "read", path="nowhere.py"), text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "read it")).stop_reason == "end_turn"
    result = tool_messages(endpoint, 1)[-1]["content"]
    assert "not found" in result.lower() or "does not exist" in result.lower()
    assert "nowhere.py" in result


async def test_selection_in_the_prompt_reaches_the_model_with_its_path_and_lines(acp_harness_factory, endpoint, workspace):
    path = workspace / "sel.py"
    push(endpoint, text_stream("seen"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, MemoryEditor())
    selection = {"type": "resource", "resource": {"uri": f"{path.as_uri()}#L10-L20", "text": "def f():\n    pass\n",
                                                   "mimeType": "text/x-python"}}
    assert (await h.prompt(sid, [{"type": "text", "text": "explain this"}, selection])).stop_reason == "end_turn"
    user = endpoint.requests[0].json()["messages"][-1]["content"]
    assert f"{path} lines 10-20" in user and "def f():" in user


@pytest.mark.parametrize("answer, expect", [
    ({"outcome": "applied", "saved": True, "versions": ["not", "a", "map"]}, "Edited"),
    ({"outcome": "applied", "saved": True, "versions": "x"}, "Edited"),
    ({"outcome": "partial", "saved": True, "applied": {"documentChanges": [{"textDocument": {"uri": "URI", "version": 1},
      "edits": [{"range": {"start": {"line": -3, "character": 0}, "end": {"line": 0, "character": 1}}, "newText": "?"}]}]}},
     "not a valid WorkspaceEdit"),
])
async def test_odd_editor_answers_are_reported_not_internal_errors(acp_harness_factory, endpoint, workspace, answer, expect):
    path = workspace / "o.txt"
    path.write_text("old\n")

    def decide(params, hunks):
        text = json.dumps(answer).replace("URI", params["edit"]["documentChanges"][0]["textDocument"]["uri"])
        return json.loads(text)
    editor = MemoryEditor({str(path): Buffer("old\n", version=1)}, decide=decide)
    push(endpoint, call("r", "read", path="o.txt"), call("e", "edit", path="o.txt", old_string="old", new_string="new"),
         text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "go")).stop_reason == "end_turn"
    result = tool_messages(endpoint, 2)[-1]["content"]
    assert expect in result and "unexpectedly" not in result


async def test_typing_on_another_line_while_a_proposal_waited_made_it_stale_merged_answer_tells_the_model(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    # NEWCOMER4 finding 7: the editor now merges the agent's hunks with the user's typing on other lines
    # and says so (`_meta.agentServer.merged`); the model learns the file holds text it has not seen
    path = workspace / "crlf.txt"
    path.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    editor = MemoryEditor({str(path): Buffer("one\r\ntwo\r\nthree\r\n", version=1)})

    def merge(params, hunks):
        doc = params["edit"]["documentChanges"][0]
        uri = doc["textDocument"]["uri"]
        editor.buffers[str(path)] = Buffer("one USER\r\nTWO\r\nmore\r\nthree\r\n", version=3)
        return {"outcome": "applied", "saved": False, "applied": {"documentChanges": [doc]},
                "versions": {uri: {"version": 3, "sha256": "hash of the merged text"}},
                "_meta": {"agentServer": {"merged": [uri]}}}
    editor.decide = merge
    push(endpoint, call("r", "read", path="crlf.txt"),
         call("e", "edit", path="crlf.txt", old_string="two\n", new_string="TWO\nmore\n"),
         call("e2", "edit", path="crlf.txt", old_string="three", new_string="THREE"), text_stream("ok"))
    h, sid, _ = await start(acp_harness_factory, endpoint, workspace, editor)
    assert (await h.prompt(sid, "two")).stop_reason == "end_turn"
    first = tool_messages(endpoint, 2)[-1]["content"]
    assert first.startswith("Edited crlf.txt")
    assert "the user edited other lines of crlf.txt" in first and "Read it again before you edit it" in first
    assert "The editor changed the text" not in first  # the user's typing is not the editor's doing
    # the agent's memory is its own change, not the merged text: editing again without a read is refused
    second = tool_messages(endpoint, 3)[-1]["content"]
    assert "has changed since you last read it" in second
    assert len(editor.proposals) == 1
    await h.close()
    log = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl")
    logged = [e.data for e in log.events if e.type == "tool/result" and e.data["call_id"] == "e"][0]
    assert logged["content"] == first  # what the model saw is what the log holds
