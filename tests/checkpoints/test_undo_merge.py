"""End to end (newcomer 3, finding 6): ``/undo`` and ``/redo`` of a file that changed since the
agent's edit — another window's agent, the user's save — take back (re-apply) only the agent's
change where it merges cleanly, byte-exact; where the changes overlap they say so and offer the
whole checkpoint or the file as it is. The official ACP Python SDK client, the real server,
scripted model streams, a real git workspace."""

from __future__ import annotations

import json
import os
import subprocess

from support.client_impl import ClientConfig, Questions

from agent_server.offline import text_stream, tool_call_stream


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


async def agent_edit(h, sid, endpoint, path: str, old: str, new: str) -> None:
    endpoint.push(call("r", "read", path=path))
    endpoint.push(call("e", "edit", path=path, old_string=old, new_string=new))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, f"{old} to {new}")).stop_reason == "end_turn"


async def undo_offering_no_merge(h, sid, questions) -> str:
    """``/undo`` asked one question offering no merge ("Take the checkpoint" or "Keep the file as it
    is"): the text it said."""
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    (question,) = questions.asked
    assert [o["name"] for o in question["options"]] == ["Take the checkpoint", "Keep the file as it is"]
    return question["toolCall"]["content"][0]["content"]["text"]


def said(h, sid) -> str:
    return "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))


def diff_of(question) -> dict:
    (diff,) = [c for c in question["toolCall"]["content"] if c.get("type") == "diff"]
    return diff


async def start(factory, endpoint, questions):
    config = ClientConfig(permission=questions)
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    return h


async def test_undo_after_another_windows_agent_edited_the_same_file_threw_away_its_change_or_kept_both(
        acp_harness_factory, endpoint, workspace):
    """Two windows on one folder: window 1's agent changed alpha → ALPHA-A, window 2's gamma →
    GAMMA-B. ``/undo`` in window 1 offered only "Take the checkpoint" (window 2's change thrown away
    too) or "Keep mine" (as if window 2's change were the user's). It offers first to take back the
    agent's change alone — its diff is exactly that —, keeps window 2's change, and ``/redo``
    re-applies only window 1's change, without a question."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    target = workspace / "nonl.txt"
    target.write_bytes(b"alpha\nbeta\ngamma")
    questions = Questions("agents_change_only")
    h = await start(acp_harness_factory, endpoint, questions)
    window1 = (await h.new_session(str(workspace))).session_id
    window2 = (await h.new_session(str(workspace))).session_id
    await agent_edit(h, window1, endpoint, "nonl.txt", "alpha", "ALPHA-A")
    await agent_edit(h, window2, endpoint, "nonl.txt", "gamma", "GAMMA-B")
    assert target.read_bytes() == b"ALPHA-A\nbeta\nGAMMA-B"

    assert (await h.prompt(window1, "/undo")).stop_reason == "end_turn"
    (question,) = questions.asked
    assert question["toolCall"]["title"] == "nonl.txt changed since the agent's edit"
    assert [(o["optionId"], o["name"], o["kind"]) for o in question["options"]] == [
        ("agents_change_only", "Undo the agent's change, keep the rest", "allow_once"),
        ("allow_once", "Take the checkpoint", "allow_once"),
        ("reject_once", "Keep the file as it is", "reject_once")]
    assert "mine" not in json.dumps(question).lower()
    diff = diff_of(question)
    assert (diff["oldText"], diff["newText"]) == ("ALPHA-A\nbeta\nGAMMA-B", "alpha\nbeta\nGAMMA-B")
    assert target.read_bytes() == b"alpha\nbeta\nGAMMA-B"
    assert "only the agent's change taken back" in said(h, window1)

    questions.asked.clear()
    assert (await h.prompt(window1, "/redo")).stop_reason == "end_turn"
    assert questions.asked == []  # the file held what the undo left: nothing to ask
    assert target.read_bytes() == b"ALPHA-A\nbeta\nGAMMA-B"


async def test_undo_of_the_agents_change_alone_keeps_bom_crlf_no_final_newline_and_mode_byte_exact(
        acp_harness_factory, endpoint, workspace):
    """The user's save after the agent's edit, in another part of the file (BOM, CRLF, no final
    newline, mode 0755): the merge works on the file's lines with their own endings, so ``/undo``
    of the agent's change alone and ``/redo`` of it leave every other byte and the mode as they were;
    a ``/redo`` after the user changed the file again merges too."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    target = workspace / "bom.txt"
    target.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\nline four")
    target.chmod(0o755)
    questions = Questions("agents_change_only")
    h = await start(acp_harness_factory, endpoint, questions)
    sid = (await h.new_session(str(workspace))).session_id
    await agent_edit(h, sid, endpoint, "bom.txt", "line one", "LINE ONE ünï")
    assert target.read_bytes() == "\ufeffLINE ONE ünï\r\nline two\r\nline three\r\nline four".encode()
    target.write_bytes("\ufeffLINE ONE ünï\r\nline two\r\nline three\r\nline four, saved".encode())

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert len(questions.asked) == 1
    assert target.read_bytes() == b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\nline four, saved"
    assert os.stat(target).st_mode & 0o7777 == 0o755

    target.write_bytes(b"\xef\xbb\xbfline one\r\nline two\r\nline three\r\nline four, saved\r\nfive")
    questions.asked.clear()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    (question,) = questions.asked  # the file changed since the undo: asked, the redo alone offered first
    assert question["options"][0]["name"] == "Redo the agent's change, keep the rest"
    assert target.read_bytes() == "\ufeffLINE ONE ünï\r\nline two\r\nline three\r\nline four, saved\r\nfive".encode()
    assert os.stat(target).st_mode & 0o7777 == 0o755


async def test_undo_when_the_files_other_change_overlaps_the_agents_says_so_and_offers_the_whole_checkpoint(
        acp_harness_factory, endpoint, workspace):
    """A save in the lines next to the agent's change: no merge is offered — the question says the
    agent's change cannot be taken back alone, and why; "Take the checkpoint" replaces the whole file."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    target = workspace / "a.txt"
    target.write_bytes(b"alpha\nbeta\ngamma\n")
    questions = Questions("allow_once")
    h = await start(acp_harness_factory, endpoint, questions)
    sid = (await h.new_session(str(workspace))).session_id
    await agent_edit(h, sid, endpoint, "a.txt", "beta", "BETA")
    target.write_bytes(b"alpha\nBETA\ngamma, saved\n")
    text = await undo_offering_no_merge(h, sid, questions)
    assert "cannot be taken back alone" in text and "touch the same lines" in text
    assert target.read_bytes() == b"alpha\nbeta\ngamma\n"


async def test_undo_of_a_file_the_user_replaced_by_a_link_showed_the_links_target_path_as_the_files_text(
        acp_harness_factory, endpoint, workspace, tmp_path):
    """After the agent's edit the user made ``a.txt`` a symbolic link to a shared file outside the
    workspace. ``/undo``'s question showed the link's target path as if it were the file's text
    ("changed since the agent's edit", a diff from a path to the file) and offered no word of the
    link. It says the file is a link now and where to, offers no merge (a link's text is no file's
    lines), and "Take the checkpoint" replaces the link itself: the shared file is never written."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    target = workspace / "a.txt"
    target.write_bytes(b"alpha\nbeta\n")
    shared = tmp_path / "shared.txt"
    shared.write_bytes(b"the shared file\n")
    questions = Questions("allow_once")
    h = await start(acp_harness_factory, endpoint, questions)
    sid = (await h.new_session(str(workspace))).session_id
    await agent_edit(h, sid, endpoint, "a.txt", "alpha", "ALPHA")
    target.unlink()
    target.symlink_to(shared)

    text = await undo_offering_no_merge(h, sid, questions)
    assert f"is a symbolic link now (to {shared})" in text and "never read or written" in text
    assert not target.is_symlink() and target.read_bytes() == b"alpha\nbeta\n"
    assert shared.read_bytes() == b"the shared file\n"
