"""End to end: checkpoints, ``/undo``, ``/redo`` and ``/checkpoints`` never overwrite the user —
the official ACP Python SDK client, the real server, scripted model streams, a real git workspace."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest
from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig
from support.editor import Buffer, MemoryEditor
from support.timeouts import HANG, until

from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import read_events


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


def git_workspace(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    for name, text in {"a.txt": "alpha\n", "b.txt": "bravo\n", "c.txt": "charlie\n", "d.txt": "delta\n",
                       ".env": "API_KEY=hunter2\n"}.items():
        (root / name).write_text(text)
    (root / "c.txt").chmod(0o640)
    return root


async def start(factory, endpoint, workspace, config: ClientConfig | None = None):
    config = config or ClientConfig(permission="allow_once")
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    session = await h.new_session(str(workspace))
    return h, session.session_id


def text_of(h, sid) -> str:
    return "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))


async def two_turns(h, sid, endpoint, workspace, *, hand_edit_between_calls: bool = False):
    """Turn 1 edits a.txt; turn 2 edits b.txt, then a shell call rewrites c.txt (mode kept) — and,
    optionally, the user changes d.txt by hand between those two calls."""
    endpoint.push(call("r1", "read", path="a.txt"))
    endpoint.push(call("e1", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"))
    endpoint.push(text_stream("turn 1 done"))
    assert (await h.prompt(sid, "shout alpha")).stop_reason == "end_turn"
    endpoint.push(call("r2", "read", path="b.txt"))
    endpoint.push(call("e2", "edit", path="b.txt", old_string="bravo", new_string="BRAVO"))
    shell = call("s2", "bash", command="printf 'CHARLIE\\n' > c.txt")
    if hand_edit_between_calls:
        shell = dict(shell, delay=0.3)
    endpoint.push(shell)
    endpoint.push(text_stream("turn 2 done"))
    prompt = asyncio.create_task(h.prompt(sid, "shout bravo and charlie"))
    if hand_edit_between_calls:
        await until(lambda: len(endpoint.requests) >= 6, "the request after the edit of b.txt")
        (workspace / "d.txt").write_text("delta, by hand\n")
    assert (await prompt).stop_reason == "end_turn"
    assert (workspace / "a.txt").read_text() == "ALPHA\n"
    assert (workspace / "b.txt").read_text() == "BRAVO\n"
    assert (workspace / "c.txt").read_text() == "CHARLIE\n"


async def test_undo_restores_the_last_turn_then_the_one_before_and_redo_reapplies(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    git_workspace(workspace)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await two_turns(h, sid, endpoint, workspace, hand_edit_between_calls=True)
    requests_before = len(endpoint.requests)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "b.txt").read_text() == "bravo\n"
    assert (workspace / "c.txt").read_bytes() == b"charlie\n"
    assert (workspace / "c.txt").stat().st_mode & 0o777 == 0o640
    assert (workspace / "a.txt").read_text() == "ALPHA\n"
    assert (workspace / "d.txt").read_text() == "delta, by hand\n"  # the user's own change stays

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "a.txt").read_text() == "alpha\n"
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert (workspace / "a.txt").read_text() == "ALPHA\n"
    assert (workspace / "b.txt").read_text() == "bravo\n"  # turn 2 stays undone
    assert len(endpoint.requests) == requests_before  # the commands never went to the model

    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    report = text_of(h, sid)
    assert "turn 2 [undone, next /redo]: b.txt (changed), c.txt (changed)" in report
    assert "turn 1 [next /undo]: a.txt (changed)" in report

    # the model is told what was undone and redone, in its next request
    endpoint.push(text_stream("noted"))
    assert (await h.prompt(sid, "what changed?")).stop_reason == "end_turn"
    users = [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "user"]
    assert any("undid the file changes of turn 2" in u and "c.txt: restored" in u for u in users)
    assert any("redid the file changes of turn 1" in u for u in users)

    # .env never entered the shadow repository or the blob store
    shadow = list((agent_state_dir / "shadow").glob("*.git"))
    assert shadow
    dump = subprocess.run(["git", f"--git-dir={shadow[0]}", "cat-file", "--batch-all-objects", "--batch"],
                          capture_output=True).stdout
    assert b"hunter2" not in dump and b"charlie" in dump
    assert all(b"hunter2" not in p.read_bytes() for p in (agent_state_dir / "blobs").rglob("*") if p.is_file())


async def test_a_shell_call_that_changed_files_said_nothing_so_the_panel_named_an_older_turn_for_undo(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Newcomer finding F1e: after a turn whose shell command changed a file, the VS Code Changes box
    still offered "Undo this turn" for an earlier turn's edit — /undo then took back the shell's
    change, which the box never showed. Each call that changed files says which, as recorded for
    /undo (``_meta.agentServer.changedFiles`` on a ``tool_call_update`` of that call): an edit, and a
    shell call's file (which has no diff); a call that changed nothing says nothing."""
    git_workspace(workspace)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await two_turns(h, sid, endpoint, workspace)
    endpoint.push(call("s3", "bash", command="cat a.txt"))
    endpoint.push(text_stream("read it"))
    assert (await h.prompt(sid, "show a")).stop_reason == "end_turn"
    said = {}
    titles = {u["toolCallId"]: u.get("title") for u in h.updates(sid, "tool_call")}
    for u in h.updates(sid, "tool_call_update"):
        files = ((u.get("_meta") or {}).get("agentServer") or {}).get("changedFiles")
        if files is not None:
            said.setdefault(titles[u["toolCallId"]], []).extend(files)
    assert said == {"Edit a.txt": [str(workspace / "a.txt")], "Edit b.txt": [str(workspace / "b.txt")],
                    "Run `printf 'CHARLIE\\n' > c.txt`": [str(workspace / "c.txt")]}, said
    # session/load shows the same (the replayed tool_call carries it, from the log's checkpoint/file events)
    from agent_server.host.lifecycle import history_updates

    replayed = {u["title"]: u["_meta"]["agentServer"]["changedFiles"]
                for u in history_updates(read_events(agent_state_dir / "sessions" / sid / "events.jsonl"), [str(workspace)])
                if u["sessionUpdate"] == "tool_call" and "changedFiles" in (u.get("_meta") or {}).get("agentServer", {})}
    assert replayed == said, replayed


async def test_a_session_reopened_from_the_picker_listed_edited_files_as_changed_not_their_line_counts(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Newcomer 4, finding 8: the VS Code Changes box showed "+1 −1" for an edited file live (from the
    edit's diff), and "changed" once the session was re-opened from the picker (a replayed call carries
    no diff). A call that changed files says how many lines each gained and lost
    (``_meta.agentServer.lineCounts``, counted when the checkpoint was recorded), live and on load —
    a shell call's file too, which never had a diff."""
    git_workspace(workspace)
    (workspace / "multi.txt").write_bytes(b"one\ntwo\nthree\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("r1", "read", path="a.txt"))
    endpoint.push(call("e1", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"))
    endpoint.push(call("s1", "bash", command="printf 'one\\nTWO\\nthree\\nfour\\n' > multi.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shout")).stop_reason == "end_turn"
    live = {u["toolCallId"]: u["_meta"]["agentServer"].get("lineCounts") for u in h.updates(sid, "tool_call_update")
            if "changedFiles" in ((u.get("_meta") or {}).get("agentServer") or {})}
    assert sorted(live.values(), key=str) == sorted([{str(workspace / "a.txt"): [1, 1]},
                                                    {str(workspace / "multi.txt"): [2, 1]}], key=str), live
    from agent_server.host.lifecycle import history_updates

    replayed = [u["_meta"]["agentServer"].get("lineCounts") for u in history_updates(
        read_events(agent_state_dir / "sessions" / sid / "events.jsonl"), [str(workspace)])
        if u["sessionUpdate"] == "tool_call" and "changedFiles" in (u.get("_meta") or {}).get("agentServer", {})]
    assert sorted(replayed, key=str) == sorted(live.values(), key=str), replayed


async def test_the_redo_summary_said_removed_the_agent_had_created_it_for_a_file_the_agent_deleted(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Newcomer 3, finding 7: a shell call changed one file, created one and deleted one; after /undo,
    /redo said "multi.txt: removed (the agent had created it)" for the file the agent had deleted, and
    the Changes box called all three "changed". The redo says what it did again (created / deleted),
    and the call that changed files says which it created and deleted (``_meta.agentServer.created`` /
    ``deleted`` beside ``changedFiles``, live and on load)."""
    git_workspace(workspace)
    (workspace / "multi.txt").write_bytes(b"one\ntwo\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("s", "bash", command="sed -i s/alpha/ALPHA/ a.txt; printf new > new.txt; rm multi.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shell")).stop_reason == "end_turn"
    metas = [u["_meta"]["agentServer"] for u in h.updates(sid, "tool_call_update")
             if "changedFiles" in ((u.get("_meta") or {}).get("agentServer") or {})]
    assert [(sorted(m["changedFiles"]), m.get("created"), m.get("deleted")) for m in metas] == [
        (sorted(str(workspace / n) for n in ("a.txt", "new.txt", "multi.txt")), [str(workspace / "new.txt")],
         [str(workspace / "multi.txt")])]
    from agent_server.host.lifecycle import history_updates

    replayed = [u["_meta"]["agentServer"] for u in history_updates(
        read_events(agent_state_dir / "sessions" / sid / "events.jsonl"), [str(workspace)])
        if u["sessionUpdate"] == "tool_call" and "changedFiles" in (u.get("_meta") or {}).get("agentServer", {})]
    assert replayed == metas
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "multi.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    redo = text_of(h, sid).split("Redo of turn")[-1]
    assert "multi.txt: deleted again (the agent had deleted it)" in redo, redo
    assert "new.txt: created again (the agent had created it)" in redo, redo
    assert "a.txt: restored" in redo and "had created it)" not in redo.replace("new.txt: created again (the agent had created it)", "")
    assert not (workspace / "multi.txt").exists() and (workspace / "new.txt").read_bytes() == b"new"


async def test_undo_asks_about_a_file_the_user_changed_and_keep_mine_keeps_it(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    git_workspace(workspace)
    asked = []

    def answer(params):  # keep mine for b.txt, take the checkpoint for the rest
        asked.append(params)
        keep = params["toolCall"]["title"].startswith("b.txt")
        return {"outcome": {"outcome": "selected", "optionId": "reject_once" if keep else "allow_once"}}

    h, sid = await start(acp_harness_factory, endpoint, workspace, ClientConfig(permission=answer))
    await two_turns(h, sid, endpoint, workspace)
    asked.clear()
    (workspace / "b.txt").write_text("BRAVO, and the user's own line\n")
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "b.txt").read_text() == "BRAVO, and the user's own line\n"
    assert (workspace / "c.txt").read_text() == "charlie\n"  # taken back: the user chose the checkpoint
    # one question per file: b.txt changed since the edit tool wrote it; c.txt, changed by a shell
    # call, is asked about only where the sandbox could not record the call's own writes
    recorded = not any(e.data.get("uncertain") for e in read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
                       if e.type == "checkpoint/file" and e.data["path"].endswith("c.txt"))
    assert [q["toolCall"]["title"] for q in asked] == ["b.txt changed since the agent's edit"] + (
        [] if recorded else ["c.txt: keep yours or take the checkpoint?"])
    assert {o["name"] for o in asked[0]["options"]} == {"Take the checkpoint", "Keep the file as it is"}
    assert all({o["name"] for o in q["options"]} == {"Take the checkpoint", "Keep mine"} for q in asked[1:])
    assert "kept the user's version" in text_of(h, sid)


async def test_undo_removes_a_file_the_agent_created_and_brings_back_one_it_deleted(
        acp_harness_factory, endpoint, workspace):
    git_workspace(workspace)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("w", "write", path="new.txt", content="fresh\n"))
    endpoint.push(call("s", "bash", command="rm d.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "make new, drop d")).stop_reason == "end_turn"
    assert (workspace / "new.txt").exists() and not (workspace / "d.txt").exists()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert not (workspace / "new.txt").exists()
    assert (workspace / "d.txt").read_text() == "delta\n"


async def test_undo_with_the_editor_extension_is_a_proposal_and_a_changed_buffer_makes_it_stale(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    path = workspace / "a.txt"
    path.write_text("alpha\n")
    editor = MemoryEditor({str(path): Buffer("alpha\n", version=1)})
    config = ClientConfig(permission="allow_once", read_text_file=editor.read,
                          ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                          agent_server_extension=True)
    h, sid = await start(acp_harness_factory, endpoint, workspace, config)
    endpoint.push(call("r", "read", path="a.txt"))
    endpoint.push(call("e", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shout")).stop_reason == "end_turn"
    assert editor.buffers[str(path)].text == "ALPHA\n"
    def keystroke(ed, p):  # the user types just before the undo lands
        buffer = ed.buffers[p]
        buffer.text, buffer.version, buffer.dirty = "ALPHA, typed\n", buffer.version + 1, True

    editor.before_apply = keystroke
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert len(editor.proposals) == 2  # the undo arrived as a proposal
    undo = editor.proposals[1]["edit"]["documentChanges"][0]["edits"]
    assert undo[0]["newText"] == "alpha"
    assert editor.buffers[str(path)].text == "ALPHA, typed\n"  # nothing was written
    assert path.read_text() == "ALPHA\n"
    logged = [e for e in read_events(agent_state_dir / "sessions" / sid / "events.jsonl") if e.type == "checkpoint/undo"]
    assert "stale" in logged[0].data["files"][0]["outcome"]


async def test_undo_proposal_is_titled_as_an_undo(acp_harness_factory, endpoint, workspace):
    """Issue 30, item 7: the editor's review of an /undo restore was titled "Edit a.txt", as if the
    agent proposed a new change; now it says it is the undo of the turn."""
    path = workspace / "a.txt"
    path.write_text("alpha\n")
    editor = MemoryEditor({str(path): Buffer("alpha\n", version=1)})
    config = ClientConfig(permission="allow_once", read_text_file=editor.read,
                          ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                          agent_server_extension=True)
    h, sid = await start(acp_harness_factory, endpoint, workspace, config)
    endpoint.push(call("r", "read", path="a.txt"))
    endpoint.push(call("e", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shout")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert [p["label"] for p in editor.proposals] == ["Edit a.txt", "Undo turn 1: a.txt"]
    assert editor.buffers[str(path)].text == "alpha\n"


async def test_files_changed_outside_a_git_workspace_by_edits_are_still_undone(acp_harness_factory, endpoint, workspace):
    (workspace / "plain.txt").write_text("one\n")
    os.chmod(workspace / "plain.txt", 0o600)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("r", "read", path="plain.txt"))
    endpoint.push(call("e", "edit", path="plain.txt", old_string="one", new_string="two"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "bump")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "plain.txt").read_text() == "one\n"
    assert (workspace / "plain.txt").stat().st_mode & 0o777 == 0o600
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert "Nothing to undo" in text_of(h, sid)


async def test_undo_of_a_created_file_that_is_now_a_folder_says_so_instead_of_failing(
        acp_harness_factory, endpoint, workspace):
    """Regression: /undo ended the run with an internal IsADirectoryError."""
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("w", "write", path="new.txt", content="fresh\n"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "make new")).stop_reason == "end_turn"
    (workspace / "new.txt").unlink()
    (workspace / "new.txt").mkdir()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert "new.txt: not restored (it cannot be read now" in text_of(h, sid)
    assert (workspace / "new.txt").is_dir()


@pytest.mark.replay_exempt("a session is deleted")
async def test_deleting_a_session_takes_its_checkpoints_and_keeps_blobs_another_session_shares(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    (workspace / "shared.txt").write_text("same start\n")
    (workspace / "own.txt").write_text("only mine\n")
    h, first = await start(acp_harness_factory, endpoint, workspace)
    second = (await h.new_session(str(workspace))).session_id
    for sid, path in ((first, "own.txt"), (first, "shared.txt"), (second, "shared.txt")):
        endpoint.push(call("r", "read", path=path))
        endpoint.push(call("e", "edit", path=path, old_string=(workspace / path).read_text().strip(),
                           new_string="same end" if path == "shared.txt" else "changed"))
        endpoint.push(text_stream("done"))
        assert (await h.prompt(sid, f"change {path}")).stop_reason == "end_turn"
        if path == "shared.txt" and sid == first:
            (workspace / "shared.txt").write_text("same start\n")  # both sessions make the same change

    def blobs() -> set[bytes]:
        return {p.read_bytes() for p in (agent_state_dir / "blobs").rglob("*") if p.is_file()}

    assert {b"only mine\n", b"changed\n", b"same start\n", b"same end\n"} <= blobs()
    await h.request("session/delete", {"sessionId": first})
    left = blobs()
    assert b"only mine\n" not in left and b"changed\n" not in left  # only the deleted session had them
    assert {b"same start\n", b"same end\n"} <= left  # still referenced by the other session


def extension_editor_config(editor: MemoryEditor, answer) -> ClientConfig:
    """A client as our editors are: buffers read and written through it, proposals reviewed in it."""
    return ClientConfig(permission=answer, read_text_file=editor.read, write_text_file=editor.write,
                        ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                        agent_server_extension=True)


async def shell_turn_then_the_user_saves_mine(h, sid, endpoint, workspace, editor) -> None:
    """The newcomer's case: one shell call changes a.txt and mine.txt; after the turn the user opens
    mine.txt in the editor, replaces its text and saves it."""
    endpoint.push(call("s", "bash", command="echo agent >> a.txt; echo agent > mine.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "run the shell")).stop_reason == "end_turn"
    assert (workspace / "mine.txt").read_text() == "agent\n"
    (workspace / "mine.txt").write_text("MY SAVED WORK\n")
    editor.buffers[str(workspace / "mine.txt")] = Buffer("MY SAVED WORK\n", version=3)


@pytest.mark.parametrize("choice", ["reject_once", "no answer"])
async def test_undo_in_an_editor_overwrote_a_file_the_user_saved_without_asking(
        acp_harness_factory, endpoint, workspace, choice):
    """The newcomer's report: with our extension, /undo sent a file the user had saved since the
    agent's change as an ordinary proposal ("Edit mine.txt"), Accept put the checkpoint over the
    user's text and nothing said the text was theirs. Now the question comes first, kind other,
    "Take the checkpoint" / "Keep mine"; Keep mine or no answer keeps it, and no proposal is sent."""
    (workspace / "a.txt").write_text("orig a\n")
    (workspace / "mine.txt").write_text("orig mine\n")
    editor = MemoryEditor()
    asked = []

    def answer(params):
        asked.append(params)
        if params["toolCall"]["title"].startswith("mine.txt"):
            if choice == "no answer":
                return {"outcome": {"outcome": "cancelled"}}
            return {"outcome": {"outcome": "selected", "optionId": choice}}
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    h, sid = await start(acp_harness_factory, endpoint, workspace, extension_editor_config(editor, answer))
    await shell_turn_then_the_user_saves_mine(h, sid, endpoint, workspace, editor)
    asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    mine = [q for q in asked if q["toolCall"]["title"].startswith("mine.txt")]
    assert [q["toolCall"]["title"] for q in mine] == ["mine.txt changed since the agent's edit"]
    assert mine[0]["toolCall"]["kind"] == "other"
    assert {o["name"] for o in mine[0]["options"]} == {"Take the checkpoint", "Keep the file as it is"}
    assert not any(p["edit"]["documentChanges"][-1]["textDocument"]["uri"].endswith("/mine.txt")
                   for p in editor.proposals)
    assert not any(w["path"].endswith("mine.txt") for w in editor.writes)
    assert (workspace / "mine.txt").read_text() == "MY SAVED WORK\n"
    assert editor.buffers[str(workspace / "mine.txt")].text == "MY SAVED WORK\n"
    assert (workspace / "a.txt").read_text() == "orig a\n"  # the agent's own change is still taken back
    assert "mine.txt: kept the user's version" in text_of(h, sid)


async def test_undo_in_an_editor_takes_the_checkpoint_over_the_users_save_only_after_the_question(
        acp_harness_factory, endpoint, workspace):
    """Take the checkpoint: asked once, then written into the buffer without a second review."""
    (workspace / "a.txt").write_text("orig a\n")
    (workspace / "mine.txt").write_text("orig mine\n")
    editor = MemoryEditor()
    order = []

    def answer(params):
        order.append(("asked", params["toolCall"]["title"]))
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    h, sid = await start(acp_harness_factory, endpoint, workspace, extension_editor_config(editor, answer))
    await shell_turn_then_the_user_saves_mine(h, sid, endpoint, workspace, editor)
    order.clear()
    editor.proposals.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert ("asked", "mine.txt changed since the agent's edit") in order
    assert not any(p["edit"]["documentChanges"][-1]["textDocument"]["uri"].endswith("/mine.txt")
                   for p in editor.proposals)
    assert editor.buffers[str(workspace / "mine.txt")].text == "orig mine\n"
    assert (workspace / "mine.txt").read_text() == "orig mine\n"


@pytest.mark.parametrize("front", ["editor", "disk"])
async def test_redo_after_taking_the_checkpoint_lost_the_line_the_user_had_saved(
        acp_harness_factory, endpoint, workspace, front):
    """A fresh user's report (data loss): the agent's shell call appended to shared.txt, the user
    added a line and saved, ``/undo`` asked and the user took the checkpoint; ``/redo`` then put
    back the agent's post-turn state and the saved line was gone for good. ``/redo`` undoes the
    undo: it brings back the file as it was just before the undo replaced it, byte-exact (on disk:
    BOM, CRLF and no final newline too)."""
    (workspace / "shared.txt").write_bytes(b"shared\n")
    editor = MemoryEditor()
    asked = []

    def answer(params):
        asked.append(params["toolCall"]["title"])
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    config = extension_editor_config(editor, answer) if front == "editor" else ClientConfig(permission=answer)
    h, sid = await start(acp_harness_factory, endpoint, workspace, config)
    endpoint.push(call("s", "bash", command="printf 'agent-shell\\n' >> shared.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "run the shell")).stop_reason == "end_turn"
    assert (workspace / "shared.txt").read_bytes() == b"shared\nagent-shell\n"
    saved = (b"shared\nagent-shell\nuser-line\n" if front == "editor"
             else b"\xef\xbb\xbfshared\r\nagent-shell\r\nuser-line")
    (workspace / "shared.txt").write_bytes(saved)
    if front == "editor":
        editor.buffers[str(workspace / "shared.txt")] = Buffer(saved.decode(), version=3)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert "shared.txt changed since the agent's edit" in asked
    assert (workspace / "shared.txt").read_bytes() == b"shared\n"
    asked.clear()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert (workspace / "shared.txt").read_bytes() == saved
    if front == "editor":
        assert editor.buffers[str(workspace / "shared.txt")].text == saved.decode()
    assert asked == []  # the file held what the undo put back: nothing of the user's is replaced
    # /undo again: the file holds the user's bytes, not the agent's, so it is asked about again
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert "shared.txt changed since the agent's edit" in asked
    assert (workspace / "shared.txt").read_bytes() == b"shared\n"


def restore_cards(h, sid) -> list[dict]:
    """The finished restore cards (``tool_call_update`` of an ``undo-``/``redo-`` call) in order."""
    return [u for u in h.updates(sid, "tool_call_update")
            if str(u.get("toolCallId", "")).startswith(("undo-", "redo-")) and u.get("status") == "completed"]


def logged(state_dir: Path, sid: str, kind: str) -> list:
    return [e for e in read_events(state_dir / "sessions" / sid / "events.jsonl") if e.type == kind]


# the user's bytes: CRLF, no final newline (the editor's buffers hold them as text)
BOM_CRLF = b"one\r\ntwo\r\nthree"


async def two_edit_turns(h, sid, endpoint, workspace, editor=None) -> None:
    """Turn 1 edits a.txt; turn 2 edits b.txt and c.txt (CRLF, no final newline; c.txt 0640), all
    three open in ``editor``."""
    (workspace / "a.txt").write_bytes(b"alpha\n")
    for name in ("b.txt", "c.txt"):
        (workspace / name).write_bytes(BOM_CRLF)
    (workspace / "c.txt").chmod(0o640)
    if editor is not None:
        for name in ("a.txt", "b.txt", "c.txt"):
            editor.buffers[str(workspace / name)] = Buffer((workspace / name).read_bytes().decode(), version=1)
    endpoint.push(call("r1", "read", path="a.txt"))
    endpoint.push(call("e1", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"))
    endpoint.push(text_stream("turn 1 done"))
    assert (await h.prompt(sid, "shout alpha")).stop_reason == "end_turn"
    endpoint.push(call("r2", "read", path="b.txt"))
    endpoint.push(call("e2", "edit", path="b.txt", old_string="two", new_string="TWO"))
    endpoint.push(call("r3", "read", path="c.txt"))
    endpoint.push(call("e3", "edit", path="c.txt", old_string="three", new_string="THREE"))
    endpoint.push(text_stream("turn 2 done"))
    assert (await h.prompt(sid, "shout two and three")).stop_reason == "end_turn"
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF.replace(b"two", b"TWO")
    assert (workspace / "c.txt").read_bytes() == BOM_CRLF.replace(b"three", b"THREE")


def proposal_file(params) -> str:
    return Path(params["edit"]["documentChanges"][-1]["textDocument"]["uri"]).name


async def test_a_fully_rejected_undo_counted_as_undone_and_the_next_undo_went_a_turn_further_back(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The second newcomer's N5: /undo, the editor showed the restores as proposals, the user
    rejected all of them — nothing was restored, yet the server counted turn 2 as undone: the next
    /undo took back turn 1, and /redo offered to redo what never was undone. An undo whose restores
    were all declined is no undo: the next /undo asks about the same turn again and says so."""
    decisions: list[str] = []
    editor = MemoryEditor(decide=lambda params, hunks: decisions.pop(0) if decisions else list(range(len(hunks))))
    h, sid = await start(acp_harness_factory, endpoint, workspace, extension_editor_config(editor, "allow_once"))
    await two_edit_turns(h, sid, endpoint, workspace, editor)
    editor.proposals.clear()

    decisions[:] = ["reject", "reject"]
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert [p["label"] for p in editor.proposals] == ["Undo turn 2: b.txt", "Undo turn 2: c.txt"]
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF.replace(b"two", b"TWO")
    assert "Nothing was undone: turn 2 is still the one /undo takes back" in text_of(h, sid)
    assert restore_cards(h, sid)[-1]["_meta"]["agentServer"]["restore"] == {
        "which": "undo", "turn": 2, "done": False, "changed": []}

    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"  # nothing was undone: nothing to redo
    assert text_of(h, sid).endswith("Nothing to redo: the last /undo (turn 2) changed no file.")
    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    assert "turn 2 [next /undo]" in text_of(h, sid) and "turn 1: a.txt (changed)" in text_of(h, sid)

    editor.proposals.clear()
    decisions[:] = [[0], [0]]
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert [p["label"] for p in editor.proposals] == ["Undo turn 2: b.txt", "Undo turn 2: c.txt"]
    assert "Undo of turn 2 again (the last /undo of it changed no file)" in text_of(h, sid)
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF and (workspace / "c.txt").read_bytes() == BOM_CRLF
    assert (workspace / "a.txt").read_bytes() == b"ALPHA\n"  # turn 1 untouched
    assert (workspace / "c.txt").stat().st_mode & 0o777 == 0o640
    # the model is told only of the undo that changed files
    notices = [e.data["text"] for e in logged(agent_state_dir, sid, "notice") if e.data.get("reason") == "checkpoint_undo"]
    assert len(notices) == 1 and "b.txt: restored" in notices[0]


async def test_a_partly_accepted_undo_is_the_turns_undo_for_the_files_restored_and_redo_redoes_only_those(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """A partly accepted undo: b.txt restored, c.txt's restore rejected. Turn 2 counts as undone for
    b.txt: the next /undo takes back turn 1; /redo re-applies b.txt only (c.txt, which the undo did
    not change, gets no proposal and keeps its bytes); both replay on load as they were shown."""
    decisions: list = []
    editor = MemoryEditor(decide=lambda params, hunks: decisions.pop(0) if decisions else list(range(len(hunks))))
    h, sid = await start(acp_harness_factory, endpoint, workspace, extension_editor_config(editor, "allow_once"))
    await two_edit_turns(h, sid, endpoint, workspace, editor)

    decisions[:] = [[0], "reject"]
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF
    assert (workspace / "c.txt").read_bytes() == BOM_CRLF.replace(b"three", b"THREE")
    assert "Turn 2 is undone for the files restored: /redo re-applies only those" in text_of(h, sid)
    assert restore_cards(h, sid)[-1]["_meta"]["agentServer"]["restore"] == {
        "which": "undo", "turn": 2, "done": True, "changed": [str(workspace / "b.txt")]}
    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    assert ("turn 2 [partly undone, next /redo]: b.txt (changed), c.txt (changed, kept)") in text_of(h, sid)

    editor.proposals.clear()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert [p["label"] for p in editor.proposals] == ["Redo turn 2: b.txt"]  # nothing aimed at c.txt
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF.replace(b"two", b"TWO")
    assert (workspace / "c.txt").read_bytes() == BOM_CRLF.replace(b"three", b"THREE")
    assert "c.txt: left as it is (the /undo did not change it)" in text_of(h, sid)

    decisions[:] = [[0], [0]]  # turn 2 again, now all of it; then turn 1
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF and (workspace / "c.txt").read_bytes() == BOM_CRLF
    decisions[:] = [[0]]
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "a.txt").read_bytes() == b"alpha\n"
    assert "Undo of turn 1: a.txt: restored." in text_of(h, sid)

    # session/load shows each run as it was shown live: the cards with their outcome and _meta, the answers
    live = [(u["toolCallId"], u["content"], u["_meta"]) for u in restore_cards(h, sid)]
    answers = [u["content"]["text"] for u in h.updates(sid, "agent_message_chunk")
               if u["content"]["text"].startswith(("Undo of", "Redo of"))]
    assert len(answers) == 4
    from agent_server.host.lifecycle import history_updates

    replay = list(history_updates(read_events(agent_state_dir / "sessions" / sid / "events.jsonl"), [str(workspace)]))
    assert [(u["toolCallId"], u["content"], u["_meta"]) for u in replay if u["sessionUpdate"] == "tool_call"
            and u["toolCallId"].startswith(("undo-", "redo-"))] == live
    assert [u["content"]["text"] for u in replay if u["sessionUpdate"] == "agent_message_chunk"
            and u["content"]["text"].startswith(("Undo of", "Redo of"))] == answers


async def test_redo_of_a_file_answered_keep_mine_aimed_at_the_agents_version(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """At /undo the user answered Keep mine for c.txt (they had changed it after the agent): it was
    not restored. /redo then still aimed at the agent's version of c.txt (it asked first). /redo
    redoes only what the undo changed: c.txt is left alone, asked about nothing, byte-exact."""
    asked: list[str] = []

    def answer(params):
        asked.append(params["toolCall"]["title"])
        keep = params["toolCall"]["title"].startswith("c.txt")
        return {"outcome": {"outcome": "selected", "optionId": "reject_once" if keep else "allow_once"}}

    h, sid = await start(acp_harness_factory, endpoint, workspace, ClientConfig(permission=answer))
    await two_edit_turns(h, sid, endpoint, workspace)
    mine = b"\xef\xbb\xbfone\r\ntwo\r\nTHREE\r\nthe user's line"  # BOM, CRLF, no final newline
    (workspace / "c.txt").write_bytes(mine)
    (workspace / "c.txt").chmod(0o600)
    asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert asked == ["c.txt changed since the agent's edit"]
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF
    asked.clear()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert asked == []
    assert (workspace / "c.txt").read_bytes() == mine and (workspace / "c.txt").stat().st_mode & 0o777 == 0o600
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF.replace(b"two", b"TWO")
    assert text_of(h, sid).endswith("Redo of turn 2: b.txt: restored; c.txt: left as it is (the /undo did not change it).")
    redo = logged(agent_state_dir, sid, "checkpoint/redo")[-1].data
    assert [(Path(f["path"]).name, f["changed"]) for f in redo["files"]] == [("b.txt", True), ("c.txt", False)]


async def test_a_crash_between_the_undos_proposals_and_the_answers_lost_what_was_already_restored(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """kill -9 of the server while the undo's second proposal waits for the user: b.txt was already
    restored, c.txt not. The load closes that undo as interrupted (b.txt logged as restored, the
    model told, the command shown); the turn is not undone (the user never answered about c.txt):
    the next /undo takes turn 2 again — b.txt as it is, c.txt proposed — and /redo then re-applies
    both, byte-exact."""
    import signal

    decisions: list = []
    waiting = asyncio.Event()

    editor = MemoryEditor(decide=lambda params, hunks: decisions.pop(0) if decisions else list(range(len(hunks))))

    async def apply(params):
        if proposal_file(params) == "c.txt" and params["label"].startswith("Undo") and not decisions:
            waiting.set()
            await asyncio.Event().wait()  # the user has not answered yet
        return editor.apply_workspace_edit(params)

    config = extension_editor_config(editor, "allow_once")
    config = ClientConfig(**{**config.__dict__, "ext_methods": {APPLY_WORKSPACE_EDIT: apply}})
    first = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config, validate=False)
    await first.initialize(config.capabilities())
    sid = (await first.new_session(str(workspace))).session_id
    await two_edit_turns(first, sid, endpoint, workspace, editor)
    undo = first.start_prompt(sid, "/undo")
    await asyncio.wait_for(waiting.wait(), HANG)
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF  # restored before the crash
    os.killpg(first.pid, signal.SIGKILL)
    await first.wait_exit()
    with pytest.raises(Exception):
        await undo

    second = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await second.initialize(config.capabilities())
    await second.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    undone = logged(agent_state_dir, sid, "checkpoint/undo")
    assert len(undone) == 1 and undone[0].data["done"] is False and undone[0].data["interrupted"] is True
    assert [(Path(f["path"]).name, f["outcome"]) for f in undone[0].data["files"]] == [("b.txt", "restored")]
    shown = "".join(u["content"]["text"] for u in second.updates(sid, "agent_message_chunk"))
    assert "Undo of turn 2 was interrupted (agent-server stopped before it ended): b.txt: restored." in shown
    assert [u["content"]["text"] for u in second.updates(sid, "user_message_chunk")][-1] == "/undo"

    editor.proposals.clear()
    decisions[:] = [[0]]
    assert (await second.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert [p["label"] for p in editor.proposals] == ["Undo turn 2: c.txt"]  # b.txt already as it was
    assert (workspace / "c.txt").read_bytes() == BOM_CRLF and (workspace / "a.txt").read_bytes() == b"ALPHA\n"
    editor.proposals.clear()
    assert (await second.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert sorted(p["label"] for p in editor.proposals) == ["Redo turn 2: b.txt", "Redo turn 2: c.txt"]
    assert (workspace / "b.txt").read_bytes() == BOM_CRLF.replace(b"two", b"TWO")
    assert (workspace / "c.txt").read_bytes() == BOM_CRLF.replace(b"three", b"THREE")
    # the model was told of the interrupted undo's restore in the next request after the load
    endpoint.push(text_stream("noted"))
    assert (await second.prompt(sid, "what changed?")).stop_reason == "end_turn"
    users = [m["content"] for m in endpoint.requests[-1].json()["messages"] if m["role"] == "user"]
    assert sum("The user's /undo of the file changes of turn 2 was interrupted (agent-server stopped before it "
               "ended) after it had restored: b.txt: restored." in str(u) for u in users) == 1


async def test_an_undo_whose_restore_went_stale_counted_as_undone(acp_harness_factory, endpoint, workspace):
    """The rest of the class of the fully rejected undo: the user typed into the buffer while the
    undo's proposal was shown, the editor answered stale and nothing was restored — yet the turn
    counted as undone and the next /undo said there was nothing left. Now it is no undo: /undo
    again takes the same turn (the typed text makes it a question first)."""
    path = workspace / "a.txt"
    path.write_text("alpha\n")
    editor = MemoryEditor({str(path): Buffer("alpha\n", version=1)})
    asked = []

    def answer(params):
        asked.append(params["toolCall"]["title"])
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    config = ClientConfig(permission=answer, read_text_file=editor.read,
                          ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit}, agent_server_extension=True)
    h, sid = await start(acp_harness_factory, endpoint, workspace, config)
    endpoint.push(call("r", "read", path="a.txt"))
    endpoint.push(call("e", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shout")).stop_reason == "end_turn"

    def keystroke(ed, p):
        buffer = ed.buffers[p]
        buffer.text, buffer.version, buffer.dirty = "ALPHA, typed\n", buffer.version + 1, True
        ed.before_apply = None

    editor.before_apply = keystroke
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert "Nothing was undone: turn 1 is still the one /undo takes back" in text_of(h, sid)
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert asked == ["a.txt changed since the agent's edit"]  # the same turn, the typed text asked about
    assert editor.buffers[str(path)].text == "ALPHA, typed\n"


async def test_undo_of_a_created_vscode_settings_file_left_the_empty_folder_the_agents_write_made(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Newcomer 4, finding 8: ``/undo`` of a turn that created ``.vscode/settings.json`` (no ``.vscode``
    before) removed the file but left the empty ``.vscode/`` the agent's write had made. Undo also removes
    the folders the agent's write (or shell call) created, when they are empty then — never one holding
    anything, never one that existed before —, and ``/redo`` makes them again."""
    git_workspace(workspace)
    (workspace / "there").mkdir()  # existed before: stays, though empty after the undo
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("w1", "write", path=".vscode/settings.json", content='{ "editor.tabSize": 2 }'))
    endpoint.push(call("w2", "write", path="there/new/deep/x.txt", content="x\n"))
    endpoint.push(call("w3", "write", path="held/y.txt", content="y\n"))
    endpoint.push(call("s1", "bash", command="mkdir -p sh/out && printf z > sh/out/z.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "settings")).stop_reason == "end_turn"
    assert (workspace / ".vscode" / "settings.json").read_bytes() == b'{ "editor.tabSize": 2 }'
    (workspace / "held" / "mine.txt").write_text("the user's\n")  # a folder the agent made, now holding the user's file
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert not (workspace / ".vscode").exists(), "the empty folder the agent's write made stays"
    assert not (workspace / "there" / "new").exists() and (workspace / "there").is_dir()
    assert (workspace / "held" / "mine.txt").read_text() == "the user's\n" and not (workspace / "held" / "y.txt").exists()
    from agent_server.checkpoints.recorder import _birth_ns

    if _birth_ns(workspace) is not None:  # a shell call's folders are told by their birth time
        assert not (workspace / "sh").exists()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert (workspace / ".vscode" / "settings.json").read_bytes() == b'{ "editor.tabSize": 2 }'
    assert (workspace / "there" / "new" / "deep" / "x.txt").read_bytes() == b"x\n"
    assert (workspace / "sh" / "out" / "z.txt").read_bytes() == b"z"
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"  # and again, from the redo
    assert not (workspace / ".vscode").exists() and not (workspace / "there" / "new").exists()


async def test_the_outcome_of_a_removed_created_file_did_not_name_the_folders_removed_with_it(
        acp_harness_factory, endpoint, workspace):
    """``/undo`` removed the folders a created file's write had made (``.vscode/``) but its outcome said
    only "removed (the agent had created it)": the user saw a folder vanish unsaid. The outcome names
    them, innermost first, in the answer, the tool call's result and the log's ``checkpoint/undo``."""
    git_workspace(workspace)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("w1", "write", path=".vscode/settings.json", content="{}"))
    endpoint.push(call("w2", "write", path="gen/out/x.txt", content="x\n"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "settings")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert not (workspace / ".vscode").exists() and not (workspace / "gen").exists()
    said = text_of(h, sid)
    assert (".vscode/settings.json: removed (the agent had created it), and the empty folder its creation had "
            "made: .vscode/") in said
    assert ("gen/out/x.txt: removed (the agent had created it), and the empty folders its creation had made: "
            "gen/out/, gen/") in said
    (result,) = [u for u in h.updates(sid, "tool_call_update") if u.get("status") == "completed"
                 and u["toolCallId"].startswith("undo-")]
    assert "empty folder its creation had made: .vscode/" in result["content"][0]["content"]["text"]


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o7777


async def test_undo_of_a_shell_chmod_left_the_files_mode_and_did_not_name_it(acp_harness_factory, endpoint, workspace):
    """Newcomer 5 finding 3: after ``chmod 644 run.sh; chmod 600 plain.txt`` (run.sh 755, plain.txt
    644) /undo said "run.sh: restored." and left plain.txt 600, named nowhere (/checkpoints neither);
    after ``chmod 700 run.sh`` run.sh stayed 700 — the shadow git tree keeps only the executable bit.
    Each shell checkpoint records the files' whole permission bits; /undo restores them, /redo takes
    them again, and a mode the user changed after the agent is asked about, not overwritten."""
    git_workspace(workspace)
    (workspace / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (workspace / "run.sh").chmod(0o755)
    (workspace / "plain.txt").write_text("plain\n")
    (workspace / "plain.txt").chmod(0o644)
    asked: list[str] = []

    def answer(params):  # "keep mine" once the user changed the mode by hand
        asked.append(params["toolCall"]["title"])
        return {"outcome": {"outcome": "selected", "optionId": "reject_once" if keep else "allow_once"}}

    keep = False
    h, sid = await start(acp_harness_factory, endpoint, workspace, ClientConfig(permission=answer))
    endpoint.push(call("s1", "bash", command="chmod 644 run.sh; chmod 600 plain.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "tighten")).stop_reason == "end_turn"
    assert (_mode(workspace / "run.sh"), _mode(workspace / "plain.txt")) == (0o644, 0o600)

    metas = [u["_meta"]["agentServer"] for u in h.updates(sid, "tool_call_update")
             if "changedFiles" in ((u.get("_meta") or {}).get("agentServer") or {})]
    assert metas[-1]["modes"] == {str(workspace / "run.sh"): ["755", "644"], str(workspace / "plain.txt"): ["644", "600"]}
    assert (await h.prompt(sid, "/checkpoints")).stop_reason == "end_turn"
    assert "run.sh (mode 755 → 644)" in text_of(h, sid) and "plain.txt (mode 644 → 600)" in text_of(h, sid)
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (_mode(workspace / "run.sh"), _mode(workspace / "plain.txt")) == (0o755, 0o644)
    said = text_of(h, sid)
    assert "plain.txt: restored" in said and "run.sh: restored" in said, said
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert (_mode(workspace / "run.sh"), _mode(workspace / "plain.txt")) == (0o644, 0o600)
    assert (workspace / "plain.txt").read_bytes() == b"plain\n"

    endpoint.push(call("s2", "bash", command="chmod 700 run.sh"))
    endpoint.push(text_stream("done"))
    (workspace / "run.sh").chmod(0o755)
    assert (await h.prompt(sid, "private")).stop_reason == "end_turn"
    assert _mode(workspace / "run.sh") == 0o700
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert _mode(workspace / "run.sh") == 0o755

    # the user changes the mode after the agent did: asked about, "keep mine" keeps it
    endpoint.push(call("s3", "bash", command="chmod 600 plain.txt"))
    endpoint.push(text_stream("done"))
    (workspace / "plain.txt").chmod(0o644)
    assert (await h.prompt(sid, "again")).stop_reason == "end_turn"
    assert _mode(workspace / "plain.txt") == 0o600
    (workspace / "plain.txt").chmod(0o640)
    keep, asked[:] = True, []
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert _mode(workspace / "plain.txt") == 0o640
    assert any("plain.txt" in title for title in asked), asked


async def test_undo_of_a_chmod_u_s_said_restored_though_the_setuid_bit_was_not_set_back(
        acp_harness_factory, endpoint, workspace):
    """/undo never sets the setuid or setgid bit (a restore must not make a program run as its owner);
    where the checkpoint had it, the file is restored without it and the outcome says so — never a
    plain "restored" for a mode that is not the checkpoint's."""
    git_workspace(workspace)
    tool = workspace / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o4755)
    if _mode(tool) != 0o4755:
        pytest.skip("this filesystem does not keep the setuid bit")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("s1", "bash", command="chmod u-s tool"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "drop setuid")).stop_reason == "end_turn"
    assert _mode(tool) == 0o755
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert _mode(tool) == 0o755
    said = text_of(h, sid)
    assert "tool: restored, but its mode is 755, not 4755 (/undo and /redo never set the setuid or setgid bit)" in said, said



async def test_a_shell_fchmod_through_a_read_only_descriptor_was_taken_for_another_process_and_not_undone(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The sandbox's record of a call's own writes named ``chmod`` and ``fchmodat`` but not
    ``fchmod``: a program that opened a file to read and changed its mode through that descriptor
    (Python's ``os.fchmod``) left a change its record did not name — taken for another process's, it
    was not recorded, and /undo said "Nothing to undo"."""
    git_workspace(workspace)
    (workspace / "plain.txt").write_text("plain\n")
    (workspace / "plain.txt").chmod(0o644)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    endpoint.push(call("s1", "bash", command="python3 -c \"import os; fd = os.open('plain.txt', os.O_RDONLY); "
                                            "os.fchmod(fd, 0o600)\""))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "make it private")).stop_reason == "end_turn"
    assert _mode(workspace / "plain.txt") == 0o600
    (event,) = [e.data for e in read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
                if e.type == "checkpoint/file"]
    assert (event["before"]["mode"], event["after"]["mode"]) == (0o644, 0o600)
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert _mode(workspace / "plain.txt") == 0o644, text_of(h, sid)
    assert "plain.txt: restored" in text_of(h, sid)
