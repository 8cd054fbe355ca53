"""End to end (newcomer 4, findings 2 and 3): ``/undo`` and ``/redo`` in an editor of files with a
UTF-8 BOM (CRLF, no final newline). The BOM is a property of the file, never the editor's text
(docs/protocol.md "The text of a document"): a checkpoint holds the file's bytes, the editor's text
is compared, merged and kept as the file's bytes, and no question shows the BOM as a line. The
official ACP Python SDK client with an in-memory editor that reads and saves as our clients do, the
real server, scripted model streams, a real git workspace; every result checked byte for byte."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig, Questions
from support.editor import Buffer, MemoryEditor

from agent_server.offline import text_stream, tool_call_stream

BOM = b"\xef\xbb\xbf"


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


def editor_config(editor: MemoryEditor, questions: Questions) -> ClientConfig:
    """A client as our editors are: buffers read and written through it, proposals reviewed in it."""
    return ClientConfig(permission=questions, read_text_file=editor.read, write_text_file=editor.write,
                        ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                        agent_server_extension=True)


async def started(factory, endpoint, config: ClientConfig):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    return h


async def agent_edit(h, sid, endpoint, name: str, old: str, new: str) -> None:
    endpoint.push(call("r", "read", path=name))
    endpoint.push(call("e", "edit", path=name, old_string=old, new_string=new))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, f"{old} to {new}")).stop_reason == "end_turn"


async def editor_session(factory, endpoint, workspace, option: str = "allow_once"):
    """A session in ``workspace`` opened by a client as our editors are (``editor_config``) answering
    every question ``option``: ``(harness, session id, editor, questions)``."""
    editor, questions = MemoryEditor(), Questions(option)
    h = await started(factory, endpoint, editor_config(editor, questions))
    return h, (await h.new_session(str(workspace))).session_id, editor, questions


async def cli_edit_then_editor(factory, endpoint, workspace, name: str, old: str, new: str,
                               editor: MemoryEditor, questions: Questions):
    """The newcomer's steps: the agent's edit made without an editor (``agent-server run``: the disk),
    then the session opened in the editor (``:AgentSessions``): the editor's harness and the session."""
    cli = await started(factory, endpoint, ClientConfig(permission="allow_once"))
    sid = (await cli.new_session(str(workspace))).session_id
    await agent_edit(cli, sid, endpoint, name, old, new)
    await cli.close()
    h = await started(factory, endpoint, editor_config(editor, questions))
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    return h, sid


def said(h, sid) -> str:
    return "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))


def diff_of(question) -> dict:
    (diff,) = [c for c in question["toolCall"]["content"] if c.get("type") == "diff"]
    return diff


def text_of(question) -> str:
    return question["toolCall"]["content"][0]["content"]["text"]


@pytest.mark.parametrize("open_in_editor", [True, False])
async def test_undo_in_an_editor_of_an_agent_edit_to_a_bom_file_asked_changed_since_the_agents_edit_with_a_phantom_feff_line(
        acp_harness_factory, endpoint, workspace, open_in_editor):
    """Finding 2: the file untouched since the agent's edit (bytes identical, open or closed in the
    editor); ``/undo`` asked "bomx.txt changed since the agent's edit" with ``+<feff>p1`` in its diff
    and, the BOM counting as a change of line 1 next to the agent's line 2, no three-way option. The
    editor's text never holds the BOM: the file holds what the agent left, so no question — the
    undo and the redo are proposals, and the bytes come back exact."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "bomx.txt"
    path.write_bytes(BOM + b"p1\r\np2\r\np3")
    editor, questions = MemoryEditor(), Questions()
    h, sid = await cli_edit_then_editor(acp_harness_factory, endpoint, workspace, "bomx.txt", "p2", "P2 cli",
                                        editor, questions)
    assert path.read_bytes() == BOM + b"p1\r\nP2 cli\r\np3"
    if open_in_editor:
        editor.buffers[str(path)] = Buffer("p1\r\nP2 cli\r\np3", version=4)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == BOM + b"p1\r\np2\r\np3"
    assert [p["label"] for p in editor.proposals] == ["Undo turn 1: bomx.txt"]
    assert "<feff>" not in json.dumps(editor.proposals) and "\\ufeff" not in json.dumps(editor.proposals)
    if open_in_editor:
        assert editor.buffers[str(path)].text == "p1\r\np2\r\np3"
    assert "bomx.txt: restored" in said(h, sid)

    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == BOM + b"p1\r\nP2 cli\r\np3"


async def test_undo_without_an_editor_of_an_edit_made_in_an_editor_dropped_the_files_bom(
        acp_harness_factory, endpoint, workspace):
    """The other way round: the agent's edit went through the editor, whose text has no BOM, and the
    checkpoint kept that text — ``/undo`` without an editor (``agent-server run --resume``) then asked
    about a file nobody touched and "Take the checkpoint" wrote it without its BOM. A checkpoint
    holds the file's bytes."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "e.txt"
    path.write_bytes(BOM + b"e1\r\ne2\r\ne3")
    h, sid, editor, questions = await editor_session(acp_harness_factory, endpoint, workspace)
    await agent_edit(h, sid, endpoint, "e.txt", "e2", "E2 editor")
    assert path.read_bytes() == BOM + b"e1\r\nE2 editor\r\ne3"
    await h.close()

    cli_questions = Questions()
    cli = await started(acp_harness_factory, endpoint, ClientConfig(permission=cli_questions))
    await cli.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert (await cli.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert cli_questions.asked == []
    assert path.read_bytes() == BOM + b"e1\r\ne2\r\ne3"
    assert (await cli.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert cli_questions.asked == []
    assert path.read_bytes() == BOM + b"e1\r\nE2 editor\r\ne3"


LINES = [f"c{n}" for n in range(1, 10)]


def crlf(lines: list[str]) -> bytes:
    return BOM + "\r\n".join(lines).encode()


async def test_redo_right_after_an_undo_that_took_the_checkpoint_asked_changed_since_the_agents_edit(
        acp_harness_factory, endpoint, workspace):
    """Finding 3 (bom3.txt): the agent changed line 8, the user line 4 and saved; ``/undo`` → "Take
    the checkpoint" (line 4 went too, as announced); ``/redo`` at once asked "changed since the
    agent's edit" though the file was exactly what the undo left. Now it re-applies without a
    question: the file as it was just before the undo, the user's line 4 with it, byte-exact."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "bom3.txt"
    path.write_bytes(crlf(LINES))
    editor, questions = MemoryEditor(), Questions("allow_once")
    h, sid = await cli_edit_then_editor(acp_harness_factory, endpoint, workspace, "bom3.txt", "c8", "C8 agent",
                                        editor, questions)
    mine = crlf([*LINES[:3], "c4 mine", *LINES[4:7], "C8 agent", LINES[8]])
    path.write_bytes(mine)  # the user's :w
    editor.buffers[str(path)] = Buffer(mine[3:].decode(), version=5)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert [q["toolCall"]["title"] for q in questions.asked] == ["bom3.txt changed since the agent's edit"]
    assert path.read_bytes() == crlf(LINES)
    questions.asked.clear()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == mine
    assert editor.buffers[str(path)].text == mine[3:].decode()


@pytest.mark.parametrize("front", ["editor", "disk"])
async def test_redo_asked_to_redo_only_the_agents_lines_but_its_diff_brought_back_the_users_line_too(
        acp_harness_factory, endpoint, workspace, front):
    """Finding 3's question: after an undo that took the checkpoint over the user's line 4, a file
    changed since (line 1) made ``/redo`` offer "Redo the agent's change, keep the rest: only the lines
    the agent changed change again" — its diff (and its result) brought line 4 back too. The question
    says what it does: it re-applies what the /undo took back, the user's line with the agent's, and
    keeps line 1; its title says the file changed since the /undo."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "bom3.txt"
    path.write_bytes(crlf(LINES))
    editor, questions = MemoryEditor(), Questions("allow_once")
    config = editor_config(editor, questions) if front == "editor" else ClientConfig(permission=questions)
    h = await started(acp_harness_factory, endpoint, config)
    sid = (await h.new_session(str(workspace))).session_id
    await agent_edit(h, sid, endpoint, "bom3.txt", "c8", "C8 agent")
    mine = crlf([*LINES[:3], "c4 mine", *LINES[4:7], "C8 agent", LINES[8]])
    path.write_bytes(mine)
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert path.read_bytes() == crlf(LINES)
    later = crlf(["c1 later", *LINES[1:]])
    path.write_bytes(later)
    questions.asked.clear()
    questions.option = "agents_change_only"
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    (question,) = questions.asked
    assert question["toolCall"]["title"] == "bom3.txt changed since the /undo"
    assert [o["name"] for o in question["options"]] == [
        "Redo what the /undo took back, keep the rest", "Take the checkpoint", "Keep the file as it is"]
    body = text_of(question)
    assert "only the lines the agent changed" not in body and "your own changes it replaced" in body
    diff = diff_of(question)
    assert "\ufeff" not in diff["oldText"] + diff["newText"]
    assert (diff["oldText"], diff["newText"]) == (later[3:].decode(), crlf(
        ["c1 later", *LINES[1:3], "c4 mine", *LINES[4:7], "C8 agent", LINES[8]])[3:].decode())
    assert path.read_bytes() == crlf(["c1 later", *LINES[1:3], "c4 mine", *LINES[4:7], "C8 agent", LINES[8]])


@pytest.mark.parametrize("bom_now", [False, True], ids=["bom-removed", "bom-added"])
async def test_undo_in_an_editor_after_the_user_removed_or_added_the_bom_took_it_for_a_change_of_line_one(
        acp_harness_factory, endpoint, workspace, bom_now):
    """The rest of the class: the user saved the file without its BOM (or with one added) after the
    agent's edit of line 2. It changed since the edit (the user's change: asked), but the BOM is no
    line: the agent's change alone is offered (not "cannot be taken back alone" because of line 1),
    the diff has no U+FEFF, the question says the BOM differs; taking back only the agent's change
    keeps the user's choice of BOM. "Take the checkpoint" of a clean buffer restores the BOM too."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "b.txt"
    body = b"b1\r\nb2\r\nb3"
    path.write_bytes(body if bom_now else BOM + body)
    h, sid, editor, questions = await editor_session(acp_harness_factory, endpoint, workspace, "agents_change_only")
    await agent_edit(h, sid, endpoint, "b.txt", "b2", "B2 agent")
    edited = b"b1\r\nB2 agent\r\nb3"
    assert path.read_bytes() == (edited if bom_now else BOM + edited)
    path.write_bytes(BOM + edited if bom_now else edited)  # the user's save, its BOM changed
    editor.buffers[str(path)] = Buffer(edited.decode(), version=7)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    (question,) = questions.asked
    assert question["options"][0]["optionId"] == "agents_change_only"
    diff = diff_of(question)
    assert (diff["oldText"], diff["newText"]) == (edited.decode(), body.decode())
    assert "byte order mark (BOM)" in text_of(question)
    assert path.read_bytes() == (BOM + body if bom_now else body)

    # the whole checkpoint, over a clean buffer: the BOM as the checkpoint had it
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert path.read_bytes() == (BOM + edited if bom_now else edited)
    path.write_bytes(BOM + edited if bom_now else edited)
    questions.asked.clear()
    questions.option = "allow_once"
    editor.proposals.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert len(questions.asked) == 1
    assert path.read_bytes() == (body if bom_now else BOM + body)
    # (written on disk: the editor reloads a clean buffer of a file that changed on disk)


async def test_an_editor_edit_then_a_shell_change_of_a_bom_file_in_one_turn_counted_as_someone_elses_save_between_them(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The rest of the class, within one turn: the agent's ``edit`` through the editor (its checkpoint
    the editor's text, without the BOM), then its shell call changed the same file (snapshotted from
    the disk, with the BOM) — the two did not join up, so the turn's change counted as spanning a save
    of someone else's and ``/undo`` asked "keep yours or take the checkpoint?" about a file only the
    agent had changed. Both are the file's bytes now: taken back without a question where the sandbox
    records the command's writes, byte-exact."""
    from agent_server.policy.sandbox.sandbox_notify import read_record

    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "s.txt"
    path.write_bytes(BOM + b"s1\r\ns2\r\ns3")
    h, sid, editor, questions = await editor_session(acp_harness_factory, endpoint, workspace, "reject_once")
    endpoint.push(call("r", "read", path="s.txt"))
    endpoint.push(call("e", "edit", path="s.txt", old_string="s2", new_string="S2"))
    endpoint.push(call("b", "bash", command="sed -i s/s3/S3/ s.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "edit, then the shell")).stop_reason == "end_turn"
    assert path.read_bytes() == BOM + b"s1\r\nS2\r\nS3"
    if read_record(str(agent_state_dir / "sessions" / sid / "shell-writes")) is None:
        pytest.skip("the sandbox does not record the command's writes here: a shell change is always asked about")
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == BOM + b"s1\r\ns2\r\ns3"


async def test_take_the_checkpoint_of_a_bom_the_user_removed_while_the_buffer_holds_unsaved_text_says_the_bom_stays_off(
        acp_harness_factory, endpoint, workspace):
    """The rest of the class: the user saved the file without its BOM and typed on (unsaved) — an
    editor's text cannot bring a BOM back, and the disk is not the restore's to write under unsaved
    text. "Take the checkpoint" puts the checkpoint's text in the buffer (left unsaved), the disk keeps
    the user's bytes, and the outcome says the file has no BOM, not a bare "restored"."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "d.txt"
    path.write_bytes(BOM + b"d1\r\nd2\r\nd3")
    h, sid, editor, questions = await editor_session(acp_harness_factory, endpoint, workspace, "allow_once")
    await agent_edit(h, sid, endpoint, "d.txt", "d2", "D2 agent")
    path.write_bytes(b"d1\r\nD2 agent\r\nd3")  # saved without the BOM …
    editor.buffers[str(path)] = Buffer("d1\r\nD2 agent\r\nd3 typing", version=9, dirty=True)  # … then typed on
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    (question,) = questions.asked
    assert "The file as it is has no byte order mark (BOM); the checkpoint has a UTF-8 byte order mark" in \
        text_of(question)
    assert editor.buffers[str(path)].text == "d1\r\nd2\r\nd3"
    assert path.read_bytes() == b"d1\r\nD2 agent\r\nd3"
    assert "d.txt: restored (its text; the file has no byte order mark" in said(h, sid)


def _old_editor_log(agent_state_dir, sid: str) -> None:
    """The session's log as a server before 0912347 wrote it for an edit made through an editor: the
    ``checkpoint/file`` states are the editor's text (no BOM, blobs of their own) and carry no
    ``file_bytes`` — the log's other lines untouched."""
    import hashlib

    log = agent_state_dir / "sessions" / sid / "events.jsonl"
    blobs = agent_state_dir / "blobs"
    lines = []
    for line in log.read_bytes().splitlines(keepends=True):
        event = json.loads(line)
        if event["type"] == "checkpoint/file":
            data = event["data"]
            assert data.pop("file_bytes") is True and data["source"] == "edit"
            for side in ("before", "after"):
                raw = (blobs / data[side]["blob"][:2] / data[side]["blob"][2:]).read_bytes()
                assert raw.startswith(BOM)
                text = raw[len(BOM):]
                sha = hashlib.sha256(text).hexdigest()
                (blobs / sha[:2]).mkdir(mode=0o700, exist_ok=True)
                (blobs / sha[:2] / sha[2:]).write_bytes(text)
                data[side]["blob"] = sha
            line = (json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        lines.append(line)
    log.write_bytes(b"".join(lines))


@pytest.mark.parametrize("answer", ["allow_once", "reject_once"])
async def test_take_the_checkpoint_of_an_old_logs_editor_edit_without_an_editor_wrote_the_file_without_its_bom(
        acp_harness_factory, endpoint, workspace, agent_state_dir, answer):
    """An old log (before 0912347): the agent's edit of a BOM file went through the editor and the
    checkpoint kept the editor's text, without the BOM. ``/undo`` without an editor then saw a file
    "changed since the agent's edit" (its BOM) and "Take the checkpoint" wrote it without its BOM.
    Such a checkpoint (an ``edit`` without ``file_bytes``) is the file's text: the file's BOM is kept,
    and the file, exactly what the agent left, is restored unasked; ``/redo`` the same. Mode kept."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "old.txt"
    path.write_bytes(BOM + b"o1\r\no2\r\no3")
    path.chmod(0o640)
    cli = await started(acp_harness_factory, endpoint, ClientConfig(permission="allow_once"))
    sid = (await cli.new_session(str(workspace))).session_id
    await agent_edit(cli, sid, endpoint, "old.txt", "o2", "O2 agent")
    await cli.close()
    assert path.read_bytes() == BOM + b"o1\r\nO2 agent\r\no3"
    _old_editor_log(agent_state_dir, sid)

    questions = Questions(answer)
    h = await started(acp_harness_factory, endpoint, ClientConfig(permission=questions))
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == BOM + b"o1\r\no2\r\no3"
    assert path.stat().st_mode & 0o7777 == 0o640
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == BOM + b"o1\r\nO2 agent\r\no3"
    assert path.stat().st_mode & 0o7777 == 0o640


async def test_an_old_logs_editor_edit_of_a_file_the_user_changed_since_keeps_the_bom_whichever_the_answer(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The same old checkpoint, the user's line added since: asked (the user's change), and "Take the
    checkpoint" gives the checkpoint's text with the file's BOM — never the file without it."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "old2.txt"
    path.write_bytes(BOM + b"o1\r\no2\r\no3")
    cli = await started(acp_harness_factory, endpoint, ClientConfig(permission="allow_once"))
    sid = (await cli.new_session(str(workspace))).session_id
    await agent_edit(cli, sid, endpoint, "old2.txt", "o2", "O2 agent")
    await cli.close()
    _old_editor_log(agent_state_dir, sid)
    path.write_bytes(BOM + b"o1\r\nO2 agent\r\no3\r\nmine")

    questions = Questions("allow_once")
    h = await started(acp_harness_factory, endpoint, ClientConfig(permission=questions))
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert [q["toolCall"]["title"] for q in questions.asked] == ["old2.txt changed since the agent's edit"]
    assert "byte order mark" not in text_of(questions.asked[0])
    assert path.read_bytes() == BOM + b"o1\r\no2\r\no3"


async def test_undo_into_a_buffer_holding_the_agents_change_with_unsaved_text_did_not_say_the_disk_still_holds_it(
        acp_harness_factory, endpoint, workspace):
    """The agent's shell command changed bd.txt; the user's buffer was reloaded with it, then typed
    into (unsaved). ``/undo`` took the agent's change out of the buffer — unsaved, the user's typing
    kept — and said "restored" while the disk still held the agent's change: reverting the buffer, or
    another program reading the file, gets the agent's text. The outcome says so."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "bd.txt"
    path.write_bytes(b"b1\nb2\nb3\nb4\nb5\n")
    editor, questions = MemoryEditor(), Questions("agents_change_only")
    h = await started(acp_harness_factory, endpoint, editor_config(editor, questions))
    sid = (await h.new_session(str(workspace))).session_id
    endpoint.push(call("s", "bash", command="sed -i s/b5/B5shell/ bd.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shell")).stop_reason == "end_turn"
    agents = b"b1\nb2\nb3\nb4\nB5shell\n"
    assert path.read_bytes() == agents
    editor.buffers[str(path)] = Buffer("b1 typed\nb2\nb3\nb4\nB5shell\n", version=4, dirty=True)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert editor.buffers[str(path)].text == "b1 typed\nb2\nb3\nb4\nb5\n" and editor.buffers[str(path)].dirty
    assert path.read_bytes() == agents
    assert ("bd.txt: restored (only the agent's change taken back; the file's other changes kept) (in the editor's "
            "buffer only, which has unsaved changes: the file on disk keeps the agent's change until you save it)"
            in said(h, sid)), said(h, sid)


async def test_undo_of_a_shell_chmod_and_edit_into_a_buffer_with_unsaved_text_left_the_file_executable(
        acp_harness_factory, endpoint, workspace):
    """Newcomer 6 finding 4: ``chmod +x calc.py && sed -i …`` by the agent's command, then the user typed
    into the open (reloaded) buffer without saving; ``/undo`` → "Undo the agent's change, keep the rest"
    took the text back in the buffer and said "restored", marked the turn undone — and the file stayed
    ``rwxr-xr-x`` on disk, even after the user saved. The permission bits are the disk's, whatever the
    buffer holds: set back at once."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    path = workspace / "calc.py"
    path.write_bytes(b"c1\nc2\nc3\nc4\nHUNKY\n")
    path.chmod(0o644)
    editor, questions = MemoryEditor(), Questions("agents_change_only")
    h = await started(acp_harness_factory, endpoint, editor_config(editor, questions))
    sid = (await h.new_session(str(workspace))).session_id
    endpoint.push(call("s", "bash", command="chmod +x calc.py && sed -i s/HUNKY/SHELLED/ calc.py"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "shell")).stop_reason == "end_turn"
    assert os.stat(path).st_mode & 0o7777 == 0o755
    editor.buffers[str(path)] = Buffer("c1 typed\nc2\nc3\nc4\nSHELLED\n", version=4, dirty=True)

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert editor.buffers[str(path)].text == "c1 typed\nc2\nc3\nc4\nHUNKY\n" and editor.buffers[str(path)].dirty
    assert os.stat(path).st_mode & 0o7777 == 0o644, said(h, sid)
    assert "calc.py: restored" in said(h, sid) and "mode" not in said(h, sid).split("calc.py: restored")[1][:200]
