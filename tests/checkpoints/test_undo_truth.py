"""``/undo`` through an editor says "restored" only when the file, read back, is the checkpoint
(newcomer 4's finding 0): a client answered a restore "applied and saved" after putting its hunk
on the wrong line, and the chat said "restored". The official ACP Python SDK client with our
extension (an in-memory editor), the real server, scripted model streams."""

from __future__ import annotations

import json
from pathlib import Path

from support.editor import MemoryEditor, editor_session, sha, uri_path

from agent_server.offline import text_stream, tool_call_stream

LONE_CR = b"a1\rmid\na2\na3\n"
EDITED = b"a1\rmid\na2\nA3\n"
STRAY = b"a1\rmid\na2\nA3\nA"  # the old plugin's misplaced hunk: the line unchanged, a character at the end


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


def said(h, sid) -> str:
    return "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))


def misplacing(params, hunks):
    """A client that writes its hunk in the wrong place and answers "applied and saved" all the same."""
    doc = params["edit"]["documentChanges"][-1]
    Path(uri_path(doc["textDocument"]["uri"])).write_bytes(STRAY)
    return {"outcome": "applied", "saved": True, "applied": {"documentChanges": [doc]},
            "versions": {doc["textDocument"]["uri"]: {"version": None, "sha256": sha(STRAY.decode())}}}


async def test_undo_said_restored_but_left_the_stray_character_the_editor_answered_applied(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "lonecr.txt"
    path.write_bytes(LONE_CR)
    h, sid, editor, asked = await editor_session(acp_harness_factory, endpoint, workspace, "allow_once")
    endpoint.push(call("r", "read", path="lonecr.txt"))
    endpoint.push(call("e", "edit", path="lonecr.txt", old_string="a3", new_string="A3"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "change a3")).stop_reason == "end_turn"
    assert path.read_bytes() == EDITED, (said(h, sid), editor.answers, [u for u in h.updates(sid, "tool_call_update")][-2:])

    editor.decide = misplacing
    before = len(said(h, sid))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    answer = said(h, sid)[before:]
    assert path.read_bytes() == STRAY
    assert "restored." not in answer and "lonecr.txt: not restored as it was" in answer, answer
    assert "Nothing was undone" in answer, answer

    # the truth told, the next /undo asks about the file and its checkpoint comes back exactly
    editor.decide = MemoryEditor.decide
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert len(asked) == 1 and "lonecr.txt changed since the agent's edit" in asked[0]["toolCall"]["title"]
    assert path.read_bytes() == LONE_CR, said(h, sid)[before:]


CFG = b'{"a":1,"b":2,"c":[1,2,3]}'
CFG_FORMATTED = b'{\n    "a": 1,\n    "b": 3,\n    "c": [\n        1,\n        2,\n        3\n    ]\n}\n'


def formatting_on_save(params, hunks):
    """VS Code with format-on-save: the accepted edit is saved and its save participant pretty-prints the file."""
    doc = params["edit"]["documentChanges"][-1]
    Path(uri_path(doc["textDocument"]["uri"])).write_bytes(CFG_FORMATTED)
    return {"outcome": "applied", "saved": True, "applied": {"documentChanges": [doc]},
            "versions": {doc["textDocument"]["uri"]: {"version": 2, "sha256": sha(CFG_FORMATTED.decode())}}}


def save_never_completes(editor):
    """The restore applied to the document, whose save (behind the formatter) never completes: the
    buffer holds the checkpoint, unsaved; the disk keeps what it held."""
    def decide(params, hunks):
        from support.editor import Buffer, reference_apply

        doc = params["edit"]["documentChanges"][-1]
        uri = doc["textDocument"]["uri"]
        path = uri_path(uri)
        text = reference_apply(Path(path).read_text(), doc["edits"], editor.encoding)
        editor.buffers[path] = Buffer(text, version=3, dirty=True)
        return {"outcome": "applied", "saved": False, "applied": {"documentChanges": [doc]},
                "versions": {uri: {"version": 3, "sha256": sha(text)}},
                "_meta": {"agentServer": {"saveFailed": [uri]}}}
    return decide


async def edited_through_format_on_save(acp_harness_factory, endpoint, workspace):
    """A turn whose edit of ``cfg.json`` (``"b":2`` → ``"b":3``) the editor saved through
    format-on-save; ``(harness, session id, editor, path)``."""
    path = workspace / "cfg.json"
    path.write_bytes(CFG)
    h, sid, editor, _ = await editor_session(acp_harness_factory, endpoint, workspace, "allow_once")
    editor.decide = formatting_on_save
    endpoint.push(call("r", "read", path="cfg.json"))
    endpoint.push(call("e", "edit", path="cfg.json", old_string='"b":2', new_string='"b":3'))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "b is 3")).stop_reason == "end_turn"
    return h, sid, editor, path


async def test_undo_said_restored_while_the_disk_kept_the_reformatted_agents_change(
        acp_harness_factory, endpoint, workspace):
    """Newcomer 5, finding 0.2: /undo's restore went through a proposal whose save never completed
    (stuck behind format-on-save); the chat said "restored." while the disk still held the agent's
    change, reformatted, and only the editor's dirty buffer held the original. The read-back now
    compares the disk when the buffer had nothing unsaved of the user's."""
    h, sid, editor, path = await edited_through_format_on_save(acp_harness_factory, endpoint, workspace)
    assert path.read_bytes() == CFG_FORMATTED

    editor.decide = save_never_completes(editor)
    before = len(said(h, sid))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    answer = said(h, sid)[before:]
    assert path.read_bytes() == CFG_FORMATTED
    assert "cfg.json: restored." not in answer and "which has unsaved changes" not in answer, answer
    assert "restored in the editor, not saved (the editor's save did not complete" in answer, answer
    assert "the file on disk still holds the agent's change" in answer, answer


async def test_an_accepted_edit_whose_save_never_completed_told_the_model_the_user_had_unsaved_changes(
        acp_harness_factory, endpoint, workspace):
    """Newcomer 5, finding 0.3: an accepted edit of small.js (no unsaved text of the user's) whose save
    never reached the disk told the model "The change is in the editor's buffer of small.js, which has
    unsaved changes" — the user had none. The model is now told the save did not complete."""
    path = workspace / "small.js"
    path.write_bytes(b"var a=1;var b=2;\nfunction f(x){return x}")
    h, sid, editor, _ = await editor_session(acp_harness_factory, endpoint, workspace, "allow_once")
    editor.decide = save_never_completes(editor)
    endpoint.push(call("r", "read", path="small.js"))
    endpoint.push(call("e", "edit", path="small.js", old_string="var b=2;", new_string="var b=3;"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "b is 3")).stop_reason == "end_turn"
    told = json.dumps(endpoint.requests[-1].json()["messages"][-1])
    assert "which has unsaved changes" not in told, told
    assert "the editor's save did not complete" in told and "not on disk" in told, told


def formatting_restore(params, hunks):
    """The restore's save pretty-prints the restored text (VS Code's JSON format-on-save)."""
    doc = params["edit"]["documentChanges"][-1]
    Path(uri_path(doc["textDocument"]["uri"])).write_bytes(CFG_FORMATTED.replace(b"3,\n    \"c\"", b"2,\n    \"c\""))
    saved = CFG_FORMATTED.replace(b"3,\n    \"c\"", b"2,\n    \"c\"").decode()
    return {"outcome": "applied", "saved": True, "applied": {"documentChanges": [doc]},
            "versions": {doc["textDocument"]["uri"]: {"version": 4, "sha256": sha(saved)}}}


async def test_undo_whose_restore_was_reformatted_at_save_said_why_it_is_not_the_checkpoint(
        acp_harness_factory, endpoint, workspace):
    """Newcomer 5, finding 0.2: the restore's save ran format-on-save, so the disk is not the
    checkpoint's bytes; /undo says so and names the editor's save as the cause."""
    h, sid, editor, path = await edited_through_format_on_save(acp_harness_factory, endpoint, workspace)
    editor.decide = formatting_restore
    before = len(said(h, sid))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    answer = said(h, sid)[before:]
    assert path.read_bytes() != CFG and "cfg.json: restored." not in answer, answer
    assert "cfg.json: not restored as it was (the editor's save changed it" in answer, answer


def reformatting_restore(put_back: bytes | None = None, before_save: str | None = None):
    """VS Code with format-on-save answering a restore it applied exactly: its save pretty-prints the
    restored text (``put_back``: writes those bytes instead), and the answer names the hash of the
    document's text before the save (``_meta.agentServer.beforeSave``; ``before_save``: another)."""
    def decide(params, hunks):
        from support.editor import reference_apply

        doc = params["edit"]["documentChanges"][-1]
        uri = doc["textDocument"]["uri"]
        path = Path(uri_path(uri))
        applied = reference_apply(path.read_text(), doc["edits"], "utf-16")
        saved = put_back if put_back is not None else json.dumps(json.loads(applied), indent=4).encode() + b"\n"
        path.write_bytes(saved)
        return {"outcome": "applied", "saved": True, "applied": {"documentChanges": [doc]},
                "versions": {uri: {"version": 4, "sha256": sha(saved.decode())}},
                "_meta": {"agentServer": {"beforeSave": {uri: before_save or sha(applied)}}}}
    return decide


async def test_undo_through_format_on_save_said_nothing_was_undone_while_the_agents_change_was_taken_back(
        acp_harness_factory, endpoint, workspace):
    """Newcomer 6, finding 2: with format-on-save, /undo's restore was applied exactly and its save
    reformatted it — the agent's change taken back on disk — yet the chat said "not restored as it
    was … Nothing was undone", and /undo stayed on that turn for ever (no answer ever gives the
    checkpoint's bytes back). Restored, said so with the save's part, the turn undone: the next
    /undo takes back the turn before; /redo of it starts from what the save left, unasked."""
    notes = workspace / "notes.txt"
    notes.write_bytes(b"one\n")
    path = workspace / "cfg.json"
    path.write_bytes(CFG)
    h, sid, editor, asked = await editor_session(acp_harness_factory, endpoint, workspace, "allow_once")
    endpoint.push(call("r1", "read", path="notes.txt"))
    endpoint.push(call("e1", "edit", path="notes.txt", old_string="one", new_string="ONE"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shout one")).stop_reason == "end_turn"
    editor.decide = formatting_on_save
    endpoint.push(call("r2", "read", path="cfg.json"))
    endpoint.push(call("e2", "edit", path="cfg.json", old_string='"b":2', new_string='"b":3'))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "b is 3")).stop_reason == "end_turn"
    assert notes.read_bytes() == b"ONE\n" and path.read_bytes() == CFG_FORMATTED

    editor.decide = reformatting_restore()
    before = len(said(h, sid))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    answer = said(h, sid)[before:]
    assert json.loads(path.read_bytes()) == {"a": 1, "b": 2, "c": [1, 2, 3]} and path.read_bytes() != CFG
    assert "Undo of turn 2: cfg.json: restored (then the editor's save changed it" in answer, answer
    assert "only by what that save changed" in answer, answer
    assert "Nothing was undone" not in answer and "not restored as it was" not in answer, answer

    editor.decide = MemoryEditor.decide
    before = len(said(h, sid))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    answer = said(h, sid)[before:]
    assert "Undo of turn 1: notes.txt: restored." in answer and notes.read_bytes() == b"one\n", answer
    assert asked == []

    # /redo turn 1, then turn 2: from what the save left, no question, the agent's change back
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    editor.decide = formatting_on_save
    before = len(said(h, sid))
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    answer = said(h, sid)[before:]
    assert "Redo of turn 2: cfg.json: restored." in answer, answer
    assert path.read_bytes() == CFG_FORMATTED and notes.read_bytes() == b"ONE\n" and asked == []


async def test_undo_whose_save_put_the_agents_change_back_or_whose_editor_held_other_text_is_not_restored(
        acp_harness_factory, endpoint, workspace):
    """The rest of finding 2's class: "restored" only where the save alone made the difference — not
    when the save put the agent's text back (the change is still on disk), nor when the editor's text
    before its save was not the restore sent (its hash in ``beforeSave`` another's)."""
    h, sid, editor, path = await edited_through_format_on_save(acp_harness_factory, endpoint, workspace)
    for decide in (reformatting_restore(put_back=CFG_FORMATTED),
                   reformatting_restore(before_save=sha("something else"))):
        editor.decide = decide
        path.write_bytes(CFG_FORMATTED)
        before = len(said(h, sid))
        assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
        answer = said(h, sid)[before:]
        assert "cfg.json: not restored as it was" in answer and "Nothing was undone" in answer, answer


async def test_take_the_checkpoint_through_format_on_save_said_nothing_was_undone_while_it_was(
        acp_harness_factory, endpoint, workspace):
    """Finding 2's class, the unreviewed write: the user changed cfg.json after the agent's edit,
    /undo asked, "Take the checkpoint" wrote it through the editor (fs/write_text_file into the open,
    clean buffer) and its save reformatted it — the agent's change gone — yet /undo said "not restored
    as it was … Nothing was undone" and asked again for ever. The editor names the text's hash before
    its save (beforeSave): restored, said with the save's part."""
    from support.editor import Buffer

    path = workspace / "cfg.json"
    path.write_bytes(CFG)
    h, sid, editor, asked = await editor_session(acp_harness_factory, endpoint, workspace, "allow_once", writes=True)
    editor.buffers[str(path)] = Buffer(CFG.decode())
    endpoint.push(call("r", "read", path="cfg.json"))
    endpoint.push(call("e", "edit", path="cfg.json", old_string='"b":2', new_string='"b":3'))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "b is 3")).stop_reason == "end_turn"
    mine = '{"a":1,"b":3,"c":[1,2,3],"d":4}'
    buffer = editor.buffers[str(path)]
    buffer.text, buffer.version = mine, buffer.version + 1
    path.write_text(mine)  # the user's change, saved

    editor.format_on_save = lambda text: json.dumps(json.loads(text), indent=4) + "\n"
    before = len(said(h, sid))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    answer = said(h, sid)[before:]
    assert len(asked) == 1 and "cfg.json changed since the agent's edit" in asked[0]["toolCall"]["title"], (asked, editor.writes, editor.proposals[-1:], answer)
    assert json.loads(path.read_bytes()) == json.loads(CFG) and path.read_bytes() != CFG, (editor.writes, answer)
    assert "cfg.json: restored (then the editor's save changed it" in answer, answer
    assert "Nothing was undone" not in answer, answer
