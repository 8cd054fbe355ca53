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
