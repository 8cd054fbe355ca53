"""End to end (issue 28): ``/undo`` keeps the user's bytes — beneath its root, bytes and mode, raw
bytes in the shadow, no secret bytes kept, an ignored file never taken for the agent's creation.
The official ACP Python SDK client, the real server, scripted model streams, a real git workspace."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.client_impl import ClientConfig, Questions
from support.timeouts import until

from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import read_events


def call(cid: str, name: str, **args) -> dict:
    return tool_call_stream([(cid, name, json.dumps(args))])


def git_init(root: Path) -> Path:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


async def start(factory, endpoint, workspace, permission="allow_once"):
    config = ClientConfig(permission=permission)
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    return h, (await h.new_session(str(workspace))).session_id


async def turn(h, sid, endpoint, *calls: dict, text: str = "go") -> None:
    for c in calls:
        endpoint.push(c)
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, text)).stop_reason == "end_turn"


def said(h, sid) -> str:
    return "".join(u["content"]["text"] for u in h.updates(sid, "agent_message_chunk"))


def recorded_by_the_sandbox(state_dir: Path, sid: str) -> bool:
    """Whether the session's last shell call ran with its writes recorded (``sandbox_notify``)."""
    from agent_server.policy.sandbox.sandbox_notify import read_record

    return read_record(str(state_dir / "sessions" / sid / "shell-writes")) is not None


def undo_outcomes(state_dir: Path, sid: str) -> list[dict]:
    return [f for e in read_events(state_dir / "sessions" / sid / "events.jsonl") if e.type == "checkpoint/undo"
            for f in e.data["files"]]


def git_with_flags(workspace: Path) -> Path:
    """A git workspace whose ignored ``flags/`` folder carries a command's signals to the test
    (and back); returns ``flags/``."""
    git_init(workspace)
    (workspace / ".gitignore").write_bytes(b"flags/\n")
    (workspace / "flags").mkdir()
    return workspace / "flags"


@contextlib.asynccontextmanager
async def while_the_command_waits(h, sid, endpoint, step: dict, reached: Path, go: Path, text: str = "go"):
    """A turn whose ``step`` (the model's tool calls) runs a command that creates ``reached`` and
    then waits for ``go``: the body runs while it waits; then ``go`` is created and the turn must end."""
    endpoint.push(step)
    endpoint.push(text_stream("done"))
    prompt = asyncio.create_task(h.prompt(sid, text))
    await until(lambda: reached.exists() or prompt.done(), f"the command to create {reached.name}")
    assert not prompt.done(), f"the turn ended before its command created {reached.name}: {prompt.result()}"
    try:
        yield
    finally:
        go.touch()
    assert (await prompt).stop_reason == "end_turn"


async def assert_recorded_and_kept(h, sid, questions, path: Path, saved: bytes, agent_state_dir) -> None:
    """``path`` holds ``saved`` (the user's save while the command ran), the command ran under the
    sandbox's write record, and ``/undo`` kept ``saved`` (``assert_undo_kept_the_users_save``)."""
    assert path.read_bytes() == saved
    assert recorded_by_the_sandbox(agent_state_dir, sid), "the call must run under the write record"
    await assert_undo_kept_the_users_save(h, sid, questions, path, saved)


async def assert_undo_kept_the_users_save(h, sid, questions, path: Path, saved: bytes) -> None:
    """``/undo`` asked about ``path`` once, got no answer (``reject_once``), and kept ``saved``."""
    questions.asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert path.read_bytes() == saved
    assert questions.titles() == [f"{path.name}: keep yours or take the checkpoint?"]
    assert f"{path.name}: kept the user's version" in said(h, sid)


async def test_outside_file_survives_a_swapped_link(acp_harness_factory, endpoint, workspace, tmp_path, agent_state_dir):
    """Regression: turn 1 creates sub/victim.txt with the bytes of an outside file; turn 2's shell swaps
    ``sub`` for a link to the outside folder; ``/undo`` removed the outside file (plain path calls
    that followed the linked parent)."""
    git_init(workspace)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_bytes(b"the user's precious file\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("w", "write", path="sub/victim.txt", content="the user's precious file\n"))
    await turn(h, sid, endpoint, call("s", "bash", command=f"rm -r sub && ln -s {outside} sub"))
    assert (workspace / "sub").is_symlink()

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (outside / "victim.txt").read_bytes() == b"the user's precious file\n"
    assert sorted(p.name for p in outside.iterdir()) == ["victim.txt"]
    outcomes = [f["outcome"] for f in undo_outcomes(agent_state_dir, sid) if f["path"].endswith("victim.txt")]
    assert outcomes and all("a link now stands in its path" in o for o in outcomes)
    assert "a link now stands in its path" in said(h, sid)


async def test_a_mode_change_is_undone_0644_comes_back(acp_harness_factory, endpoint, workspace):
    """Regression: ``chmod +x run.sh`` in the shell; ``/undo`` said "already as it was" and left 0755."""
    git_init(workspace)
    (workspace / "run.sh").write_bytes(b"#!/bin/sh\necho hi\n")
    (workspace / "run.sh").chmod(0o644)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("s", "bash", command="chmod +x run.sh"))
    assert (workspace / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "run.sh").stat().st_mode & 0o777 == 0o644
    assert (workspace / "run.sh").read_bytes() == b"#!/bin/sh\necho hi\n"
    assert "run.sh: restored" in said(h, sid)


async def test_crlf_under_gitattributes_comes_back_exact(acp_harness_factory, endpoint, workspace):
    """Regression: with ``*.bat text eol=crlf`` the shadow's ``git add`` stored LF; ``/undo`` asked a
    false "changed since" question, then wrote LF over the user's CRLF."""
    git_init(workspace)
    (workspace / ".gitattributes").write_bytes(b"*.bat text eol=crlf\n")
    (workspace / "run.bat").write_bytes(b"@echo off\r\necho one\r\n")
    questions = Questions("allow_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    await turn(h, sid, endpoint, call("s", "bash", command="printf 'echo two\\r\\n' >> run.bat"))
    assert (workspace / "run.bat").read_bytes() == b"@echo off\r\necho one\r\necho two\r\n"
    questions.asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "run.bat").read_bytes() == b"@echo off\r\necho one\r\n"
    assert not any("changed since the agent's edit" in t for t in questions.titles())


def shadow_objects(state_dir: Path) -> bytes:
    dump = b""
    for shadow in (state_dir / "shadow").glob("*.git"):
        dump += subprocess.run(["git", f"--git-dir={shadow}", "cat-file", "--batch-all-objects", "--batch"],
                               capture_output=True).stdout
    return dump


def stored_bytes(state_dir: Path) -> bytes:
    """Every blob and every shadow object (decompressed) of the state folder."""
    blobs = b"".join(p.read_bytes() for p in (state_dir / "blobs").rglob("*") if p.is_file())
    return blobs + shadow_objects(state_dir)


async def test_no_env_bytes_in_the_state_folder_also_through_the_edit_path(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Regression: an approved edit of ``.env`` left its old and new bytes in the blob store."""
    git_init(workspace)
    (workspace / ".env").write_bytes(b"API_KEY=hunter2\n")
    (workspace / "a.txt").write_bytes(b"alpha\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("r", "read", path=".env"),
               call("e", "edit", path=".env", old_string="hunter2", new_string="correcthorse"),
               call("s", "bash", command="printf 'alpha2\\n' > a.txt && printf 'API_KEY=batterystaple\\n' > .env"))
    assert (workspace / ".env").read_bytes() == b"API_KEY=batterystaple\n"
    kept = stored_bytes(agent_state_dir)
    assert b"alpha2" in kept  # the store works: the ordinary file's bytes are there
    for secret in (b"hunter2", b"correcthorse", b"batterystaple"):
        assert secret not in kept
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / ".env").read_bytes() == b"API_KEY=batterystaple\n"
    assert ".env: cannot be taken back" in said(h, sid)
    assert (workspace / "a.txt").read_bytes() == b"alpha\n"


async def test_ignored_debug_log_survives_an_agent_edit_of_gitignore(acp_harness_factory, endpoint, workspace):
    """Regression: ``.gitignore`` has ``*.log`` and the user has an untracked ``debug.log``; the agent
    edits ``.gitignore`` in the shell; ``/undo`` deleted ``debug.log`` as "created by the agent"."""
    git_init(workspace)
    (workspace / ".gitignore").write_bytes(b"*.log\n")
    (workspace / "debug.log").write_bytes(b"the user's debugging notes\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("s", "bash", command="printf 'build/\\n' > .gitignore"))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / ".gitignore").read_bytes() == b"*.log\n"
    assert (workspace / "debug.log").read_bytes() == b"the user's debugging notes\n"
    assert "debug.log" not in said(h, sid)


async def test_the_users_save_during_a_command_is_kept_after_undo_with_one_question(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Regression: the user saved ``d.txt`` (a plain disk write by another process, a plain ACP
    client) while the agent's command ran; ``/undo`` silently put ``d.txt`` back to its old text."""
    flags = git_with_flags(workspace)
    (workspace / "c.txt").write_bytes(b"charlie\n")
    (workspace / "d.txt").write_bytes(b"delta\n")
    asked = []

    def answer(params):  # the checkpoint for c.txt; no answer at all about d.txt (silence)
        asked.append(params["toolCall"]["title"])
        if "d.txt" in params["toolCall"]["title"]:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    h, sid = await start(acp_harness_factory, endpoint, workspace, answer)
    step = call("s", "bash", command="touch flags/started; while [ ! -e flags/go ]; do sleep 0.02; done; "
                                     "printf 'CHARLIE\\n' > c.txt")
    async with while_the_command_waits(h, sid, endpoint, step, flags / "started", flags / "go", "shout charlie"):
        (workspace / "d.txt").write_bytes(b"delta, saved by the user during the command\n")
    asked.clear()

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "d.txt").read_bytes() == b"delta, saved by the user during the command\n"
    assert (workspace / "c.txt").read_bytes() == b"charlie\n"
    if recorded_by_the_sandbox(agent_state_dir, sid):
        # the call's complete write record names c.txt only: c.txt is the agent's (not asked), d.txt
        # is not the call's change at all (another process wrote it) — never asked about, never restored
        assert asked == [] and "d.txt" not in said(h, sid)
        assert [f["path"] for f in undo_outcomes(agent_state_dir, sid)] == [str(workspace / "c.txt")]
    else:  # no evidence: d.txt is uncertain — one question, silence keeps it
        assert [t for t in asked if "d.txt" in t] == ["d.txt: keep yours or take the checkpoint?"]
        assert "d.txt: kept the user's version" in said(h, sid) and "no answer, so nothing was replaced" in said(h, sid)


async def test_a_deletion_in_the_shell_of_a_plain_folder_is_restored(acp_harness_factory, endpoint, workspace):
    """Regression: outside git the agent deleted a file in the shell and ``/undo`` answered
    "Nothing to undo"."""
    (workspace / "notes.txt").write_bytes(b"the user's notes\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("s", "bash", command="rm notes.txt"))
    assert not (workspace / "notes.txt").exists()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "notes.txt").read_bytes() == b"the user's notes\n"
    assert "notes.txt: brought back" in said(h, sid)


async def test_a_change_inside_a_nested_repository_is_restored(acp_harness_factory, endpoint, workspace):
    """Regression: a change inside a nested ``.git`` work tree was left while ``/undo`` reported success."""
    git_init(workspace)
    nested = git_init(workspace / "vendor" / "lib")
    (nested / "lib.c").write_bytes(b"int lib(void) { return 1; }\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("s", "bash", command="printf 'int lib(void) { return 2; }\\n' > vendor/lib/lib.c"
                                                          " && printf 'new\\n' > vendor/lib/new.h"))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (nested / "lib.c").read_bytes() == b"int lib(void) { return 1; }\n"
    assert not (nested / "new.h").exists()
    assert "vendor/lib/lib.c: restored" in said(h, sid)


async def test_a_nested_repository_too_big_to_capture_is_said_at_once_in_the_turn(
        acp_harness_factory, endpoint, workspace):
    """Regression: past the nested walk's budget a nested repository's changes were only logged
    (``checkpoint/failed``): the turn said nothing and ``/undo`` left them without a word."""
    from agent_server.checkpoints.shadow import NESTED_BUDGET

    git_init(workspace)
    nested = git_init(workspace / "vendor" / "big")
    for i in range(NESTED_BUDGET + 1):
        (nested / f"f{i}.txt").write_bytes(b"x\n")
    # a commit: git takes a folder for a nested repository (lists the folder, not its files) once it has a HEAD
    subprocess.run(["git", "-C", str(nested), "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-q",
                    "--allow-empty", "-m", "init"], check=True)
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("s", "bash", command="printf 'y\\n' > vendor/big/f0.txt"))
    await turn(h, sid, endpoint, call("s2", "bash", command="printf 'z\\n' > vendor/big/f1.txt"))
    text = said(h, sid)
    assert text.count("nested repository vendor/big may not be captured for /undo") == 1  # at once, once
    mark = len(h.updates(sid))
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    replayed = "".join(u["content"]["text"] for u in h.updates(sid)[mark:]
                       if u["sessionUpdate"] == "agent_message_chunk")
    assert "nested repository vendor/big may not be captured for /undo" in replayed  # shown as it was


async def test_a_loaded_session_shows_undo_redo_and_checkpoints_as_they_were_shown(
        acp_harness_factory, endpoint, workspace):
    """Regression: a reloaded session dropped the ``/undo``, ``/redo`` and ``/checkpoints`` turns and
    appended the undo's note to the previous answer."""
    (workspace / "a.txt").write_bytes(b"alpha\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("r", "read", path="a.txt"),
               call("e", "edit", path="a.txt", old_string="alpha", new_string="ALPHA"))
    live_from = len(h.updates(sid))
    for command in ("/undo", "/checkpoints", "/redo"):
        assert (await h.prompt(sid, command)).stop_reason == "end_turn"
    live = h.updates(sid)[live_from:]
    mark = len(h.updates(sid))
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    replayed = h.updates(sid)[mark:]
    start_at = next(i for i, u in enumerate(replayed) if u["sessionUpdate"] == "user_message_chunk"
                    and u["content"]["text"] == "/undo")
    replayed = replayed[start_at:]

    def shown(updates):  # what the user sees: the commands, each restore's call as it ended, the answers
        calls: dict[str, dict] = {}
        out = []
        for u in updates:
            kind = u["sessionUpdate"]
            if kind in ("tool_call", "tool_call_update"):
                merged = calls.setdefault(u["toolCallId"], {})
                if not merged:
                    out.append(merged)
                merged.update({k: v for k, v in u.items() if k != "sessionUpdate"})
            elif kind in ("user_message_chunk", "agent_message_chunk"):
                out.append((kind, u["content"]["text"]))
        return out

    replay_shown = shown(replayed)
    # live, the client shows what the user typed itself; on load, each command comes first
    typed = [i for i in replay_shown if isinstance(i, tuple) and i[0] == "user_message_chunk"]
    assert typed == [("user_message_chunk", c) for c in ("/undo", "/checkpoints", "/redo")]
    assert [i for i in replay_shown if i not in typed] == shown(live)
    assert replay_shown[0:3] == [typed[0], shown(live)[0], shown(live)[1]]
    texts = [i[1] for i in replay_shown if isinstance(i, tuple) and i[0] == "agent_message_chunk"]
    assert texts[0] == "Undo of turn 1: a.txt: restored." and texts[2] == "Redo of turn 1: a.txt: restored."
    assert "Turns that changed files" in texts[1] and "Checkpoint storage" in texts[1]


async def test_two_servers_on_one_folder_keep_their_own_changes_apart(
        acp_harness_factory, workspace, agent_state_dir):
    """Regression: two sessions on one folder shared one shadow index (concurrent ``git add`` failed on
    ``index.lock``), and one session's after-snapshot counted the other session's agent edits as its
    own shell changes — its ``/undo`` took them back silently."""
    from agent_server.offline import OfflineEndpoint

    flags = git_with_flags(workspace)
    for name in ("a.txt", "x.txt"):
        (workspace / name).write_bytes(name.encode() + b" before\n")
    questions: list[str] = []

    def answer_a(params):  # server A takes its own file back, keeps everything else
        title = params["toolCall"]["title"]
        questions.append(title)
        option = "allow_once" if title.startswith("a.txt") or params["toolCall"].get("kind") == "execute" else "reject_once"
        return {"outcome": {"outcome": "selected", "optionId": option}}

    async with OfflineEndpoint() as ep_a, OfflineEndpoint() as ep_b:
        a, sid_a = await start(acp_harness_factory, ep_a, workspace, answer_a)
        b, sid_b = await start(acp_harness_factory, ep_b, workspace)
        step = call("s", "bash", command="touch flags/a-started; while [ ! -e flags/a-go ]; do sleep 0.02; done; "
                                         "printf 'a after\\n' > a.txt")
        async with while_the_command_waits(a, sid_a, ep_a, step, flags / "a-started", flags / "a-go", "change a"):
            # server B's agent edits x.txt and runs a shell call while A's command still runs
            await turn(b, sid_b, ep_b, call("r", "read", path="x.txt"),
                       call("e", "edit", path="x.txt", old_string="before", new_string="after, by B"),
                       call("s", "bash", command="printf 'y by B\\n' > y.txt"))

        assert (await a.prompt(sid_a, "/undo")).stop_reason == "end_turn"
        assert (workspace / "a.txt").read_bytes() == b"a.txt before\n"  # A's own change, taken back
        assert (workspace / "x.txt").read_bytes() == b"x.txt after, by B\n"  # B's: asked, kept
        assert (workspace / "y.txt").read_bytes() == b"y by B\n"
        assert (await b.prompt(sid_b, "/undo")).stop_reason == "end_turn"
        assert (workspace / "x.txt").read_bytes() == b"x.txt before\n"
        assert not (workspace / "y.txt").exists()
        for sid in (sid_a, sid_b):
            events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
            assert not [e.data for e in events if e.type == "checkpoint/failed"]
        assert (agent_state_dir / "sessions" / sid_a / "shadow-index").exists()
        assert (agent_state_dir / "sessions" / sid_b / "shadow-index").exists()


async def test_a_file_an_mcp_tool_changed_is_captured_and_asked_about_at_undo(
        acp_harness_factory, endpoint, workspace):
    """Regression: a non-read-only MCP tool's changes were not snapshotted — ``/undo`` answered
    "Nothing to undo" and said nothing."""
    import sys

    git_init(workspace)
    (workspace / "notes.txt").write_bytes(b"the user's notes\n")
    config = workspace.parent / "mcp-config.toml"
    config.write_text("[agent]\nmcp_start_wait = 120\n")
    questions = Questions("allow_once")
    client = ClientConfig(permission=questions)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(config)},
                                  config=client)
    await h.initialize(client.capabilities())
    server = {"name": "writing", "command": sys.executable,
              "args": [str(Path(__file__).with_name("writing_server.py")), "stdio"], "env": []}
    sid = (await h.new_session(str(workspace), mcp_servers=[server])).session_id
    await turn(h, sid, endpoint, call("m", "mcp__writing__write_note", path=str(workspace / "notes.txt"),
                                      text="overwritten by the MCP tool\n"))
    assert (workspace / "notes.txt").read_bytes() == b"overwritten by the MCP tool\n"
    questions.asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "notes.txt").read_bytes() == b"the user's notes\n"
    # an MCP server's writes have no record: the change is uncertain, so it was asked about
    assert questions.titles() == ["notes.txt: keep yours or take the checkpoint?"]


async def test_a_file_over_the_size_limit_is_never_copied_and_its_undo_says_so(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    git_init(workspace)
    (workspace / "data.csv").write_bytes(b"row,0123456789\n" * 200)  # 3,000 bytes
    config = workspace.parent / "limit.toml"
    config.write_text("[agent]\ncheckpoint_max_file_bytes = 1000\n")
    client = ClientConfig(permission="allow_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_CONFIG": str(config)},
                                  config=client)
    await h.initialize(client.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    await turn(h, sid, endpoint, call("s", "bash", command="printf 'row,appended\\n' >> data.csv"))
    assert b"row,0123456789" not in stored_bytes(agent_state_dir)
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "data.csv").read_bytes().endswith(b"row,appended\n")
    assert "data.csv: cannot be taken back" in said(h, sid)


async def saved_while_the_command_appends(h, sid, endpoint, flags: Path, path: Path, saved: bytes) -> None:
    """A turn whose shell command waits (``flags/started``) while the user saves ``saved`` into
    ``path``, then appends ``agent`` to it: whose change that is, nothing shows (uncertain)."""
    step = call("s", "bash", command="touch flags/started; while [ ! -e flags/go ]; do sleep 0.02; done; "
                                     "echo agent >> a.txt")
    async with while_the_command_waits(h, sid, endpoint, step, flags / "started", flags / "go", "append"):
        path.write_bytes(saved)


async def test_undo_silently_removed_what_the_user_saved_while_the_agents_command_ran(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The newcomer's second report: the user saved a line into ``a.txt`` while the agent's command
    slept, then the command appended to it; the sandbox's record named ``a.txt`` (the command did
    write it), so the change counted as the command's alone and ``/undo`` said "a.txt: restored" —
    the user's line gone, no question. The record's stamp of ``a.txt`` at the command's first write
    shows the change during the call: the file is uncertain, asked about, and no answer keeps it."""
    flags = git_with_flags(workspace)
    (workspace / "a.txt").write_bytes(b"orig\n")
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    await saved_while_the_command_appends(h, sid, endpoint, flags, workspace / "a.txt",
                                          b"orig\nMY WORK SAVED DURING THE COMMAND\n")
    both = b"orig\nMY WORK SAVED DURING THE COMMAND\nagent\n"
    assert (workspace / "a.txt").read_bytes() == both

    await assert_undo_kept_the_users_save(h, sid, questions, workspace / "a.txt", both)


async def test_a_file_only_the_command_wrote_is_still_undone_without_a_question(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The other side of the rule: a file nobody else touched during the call, under a complete
    record, is the command's — restored without a question."""
    git_init(workspace)
    (workspace / "a.txt").write_bytes(b"orig\n")
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    await turn(h, sid, endpoint, call("s", "bash", command="echo agent >> a.txt; echo more >> a.txt"))
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    if recorded_by_the_sandbox(agent_state_dir, sid):
        assert questions.asked == [] and (workspace / "a.txt").read_bytes() == b"orig\n"
    else:
        assert questions.titles() == ["a.txt: keep yours or take the checkpoint?"]


async def test_undo_silently_removed_what_the_user_saved_after_the_command_wrote_the_file_while_it_still_ran(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The gap left by the previous fix (its stamp is taken at the command's first write only): the
    command wrote ``a.txt`` and went on running (a formatter, a watcher); the user saved ``a.txt`` in
    the editor meanwhile; the command ended. The record names ``a.txt`` and its stamp is from before
    the user's save, so it counted as the command's alone: ``/undo`` restored the checkpoint without
    a question and the user's save was gone. Now a change to a file after the command let go of it
    is seen, the file is uncertain, asked about, and no answer keeps it."""
    flags = git_with_flags(workspace)
    (workspace / "a.txt").write_bytes(b"orig\n")
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    saved = b"orig\nagent\nMY WORK SAVED AFTER THE COMMAND WROTE\n"
    step = call("s", "bash", command="echo agent >> a.txt; touch flags/wrote; while [ ! -e flags/go ]; do sleep 0.02; done")
    async with while_the_command_waits(h, sid, endpoint, step, flags / "wrote", flags / "go", "format"):
        (workspace / "a.txt").write_bytes(saved)
    await assert_recorded_and_kept(h, sid, questions, workspace / "a.txt", saved, agent_state_dir)


async def test_undo_silently_removed_what_the_user_saved_between_two_commands_of_one_turn(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """Two commands of one turn wrote ``a.txt``; between them (while a third, which never touched
    it, ran) the user saved it. Each call alone is the command's, but the turn's change runs from
    before the first to after the last, across the user's save: ``/undo`` put back the turn's
    first state without a question. A turn whose changes of a file do not chain (one call's after
    is not the next one's before) is someone else's too: asked about, no answer keeps it."""
    flags = git_with_flags(workspace)
    (workspace / "a.txt").write_bytes(b"orig\n")
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    step = tool_call_stream([
        ("s1", "bash", json.dumps({"command": "echo one >> a.txt"})),
        ("s2", "bash", json.dumps({"command": "touch flags/waiting; while [ ! -e flags/go ]; do sleep 0.02; done"})),
        ("s3", "bash", json.dumps({"command": "echo two >> a.txt"}))])
    async with while_the_command_waits(h, sid, endpoint, step, flags / "waiting", flags / "go", "twice"):
        (workspace / "a.txt").write_bytes(b"orig\none\nMY WORK SAVED BETWEEN THE COMMANDS\n")
    both = b"orig\none\nMY WORK SAVED BETWEEN THE COMMANDS\ntwo\n"
    await assert_recorded_and_kept(h, sid, questions, workspace / "a.txt", both, agent_state_dir)


async def test_redo_over_what_the_user_saved_after_the_undo_asks_and_no_answer_keeps_it(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The same rule for ``/redo``: the command's change was undone without a question (only the
    command wrote it), then the user saved the file; ``/redo`` must not put the command's version
    over that save without asking."""
    git_init(workspace)
    (workspace / "a.txt").write_bytes(b"orig\n")
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    await turn(h, sid, endpoint, call("s", "bash", command="echo agent >> a.txt"))
    assert recorded_by_the_sandbox(agent_state_dir, sid), "the call must run under the write record"
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.asked == [] and (workspace / "a.txt").read_bytes() == b"orig\n"
    (workspace / "a.txt").write_bytes(b"orig\nMY WORK SAVED AFTER THE UNDO\n")

    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert (workspace / "a.txt").read_bytes() == b"orig\nMY WORK SAVED AFTER THE UNDO\n"
    assert len(questions.asked) == 1 and "a.txt" in questions.titles()[0]


async def test_with_the_editor_extension_the_users_save_is_asked_about_before_any_proposal(
        acp_harness_factory, endpoint, workspace):
    """The user's save over the agent's change, with our extension on: ``/undo`` asks first (kind
    other, "Take the checkpoint" / "Keep mine") — an editor's review of the restore read as a plain
    edit and never said the text it replaced was the user's — and Keep mine sends no proposal.
    (A save *during* a command that a complete write record does not name is not the call's
    change at all: test_the_users_save_during_a_command_is_kept_after_undo_with_one_question.)"""
    from support.editor import editor_session

    git_with_flags(workspace)
    (workspace / "d.txt").write_bytes(b"delta\n")
    h, sid, editor, asked = await editor_session(acp_harness_factory, endpoint, workspace, "reject_once")
    endpoint.push(call("s", "bash", command="printf 'delta, by the agent\\n' > d.txt"))
    endpoint.push(text_stream("done"))
    assert (await h.prompt(sid, "change d")).stop_reason == "end_turn"
    assert (workspace / "d.txt").read_bytes() == b"delta, by the agent\n"
    (workspace / "d.txt").write_bytes(b"delta, saved by the user\n")
    asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert (workspace / "d.txt").read_bytes() == b"delta, saved by the user\n"
    assert editor.proposals == []
    (question,) = asked
    assert question["toolCall"]["title"] == "d.txt changed since the agent's edit"
    assert question["toolCall"]["kind"] == "other"
    assert "d.txt: kept the user's version (changed since the agent's edit)" in said(h, sid)


async def test_symbolic_links_are_restored_as_links_never_followed(acp_harness_factory, endpoint, workspace, tmp_path):
    git_init(workspace)
    (workspace / "a.txt").write_bytes(b"alpha\n")
    (workspace / "link").symlink_to("a.txt")
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"outside\n")
    h, sid = await start(acp_harness_factory, endpoint, workspace)
    await turn(h, sid, endpoint, call("s", "bash", command=f"rm link && printf 'now a file\\n' > link && ln -s {outside} out"))
    assert not (workspace / "link").is_symlink() and (workspace / "out").is_symlink()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert os.readlink(workspace / "link") == "a.txt"
    assert not (workspace / "out").is_symlink() and not (workspace / "out").exists()
    assert outside.read_bytes() == b"outside\n" and (workspace / "a.txt").read_bytes() == b"alpha\n"


def without_inotify(command: list[str]) -> list[str]:
    """``command`` in a user namespace of its own whose inotify instance limit is 0: every
    ``inotify_init1`` fails with EMFILE, as for a user whose 128 instances are taken (the machine's
    limit and everyone else's watchers are untouched)."""
    return ["unshare", "-Ur", "sh", "-c", 'echo 0 > /proc/sys/user/max_inotify_instances && exec "$@"', "sh", *command]


async def test_without_an_inotify_instance_every_shell_change_was_asked_about_at_undo_without_a_word(
        acp_harness_factory, agent_command, endpoint, workspace, agent_state_dir):
    """No inotify instance left (Linux allows 128 per user by default): the shell's attribution
    cannot see who saved a file while the command ran, so every file a shell call changed is asked
    about at /undo — with no word why. It is said once a session, in the turn (logged
    ``checkpoint/unwatched``, replayed on load), and the fallback stays safe: asked, never restored
    over the user's file without a Take the checkpoint."""
    git_init(workspace)
    (workspace / "a.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo")
    questions = Questions("reject_once")
    config = ClientConfig(permission=questions)
    h = await acp_harness_factory(without_inotify(agent_command), env={"AGENT_SERVER_BASE_URL": endpoint.base_url},
                                  config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    await turn(h, sid, endpoint, call("s", "bash", command="printf 'three\\r\\n' >> a.txt"))
    assert recorded_by_the_sandbox(agent_state_dir, sid)  # the command's own writes are still recorded
    await turn(h, sid, endpoint, call("s2", "bash", command="printf 'four\\r\\n' >> a.txt"))
    warned = [u for u in h.updates(sid, "agent_message_chunk") if "inotify" in u["content"]["text"]]
    assert len(warned) == 1, warned  # once a session
    assert "/undo will ask you about every file a shell command changes" in warned[0]["content"]["text"]
    assert warned[0]["_meta"]["agentServer"]["notice"]["severity"] == "warning"
    events = read_events(agent_state_dir / "sessions" / sid / "events.jsonl")
    assert [e.data["reason"] for e in events if e.type == "checkpoint/unwatched"] == ["EMFILE"]

    # nothing shows whose write it was: asked (even though the file holds what the command left), kept
    questions.asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.titles() == ["a.txt: keep yours or take the checkpoint?"]
    assert (workspace / "a.txt").read_bytes() == b"\xef\xbb\xbfone\r\ntwothree\r\nfour\r\n"

    from agent_server.host.lifecycle import history_updates

    replayed = [u for u in history_updates(events, [str(workspace)])
                if u["sessionUpdate"] == "agent_message_chunk" and "inotify" in u["content"]["text"]]
    assert [u["content"]["text"] for u in replayed] == [warned[0]["content"]["text"]]


# A seccomp filter with a listener of its own on the server (inherited by its commands), as inside
# another sandbox or container that uses one: the sandbox's own listener is refused (EBUSY).
OTHER_LISTENER = r"""
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0  # no_new_privs
prog = [(0x20, 0, 0, 0), (0x15, 0, 1, 163), (0x06, 0, 0, 0x7FC00000), (0x06, 0, 0, 0x7FFF0000)]  # acct: notify
raw = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
buf = ctypes.create_string_buffer(raw, len(raw))
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
fprog = Fprog(len(prog), ctypes.cast(buf, ctypes.c_void_p))
libc.syscall.restype = ctypes.c_long
fd = libc.syscall(ctypes.c_long(317), ctypes.c_long(1), ctypes.c_long(1 << 3), ctypes.byref(fprog))
assert fd >= 0, ctypes.get_errno()
os.set_inheritable(fd, True)  # the listener stays open while the server runs
os.execvp(sys.argv[1], sys.argv[1:])
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the other listener's filter is written for x86_64")
async def test_without_a_seccomp_listener_every_shell_change_was_asked_about_at_undo_without_a_word(
        acp_harness_factory, agent_command, endpoint, workspace, agent_state_dir):
    """The rest of the no-inotify class: the sandbox's seccomp listener refused (another one is in
    place — a container's), so the command ran without a record of its own writes and every file it
    changed was asked about at /undo, silently. Said once a session, with the error."""
    git_init(workspace)
    (workspace / "a.txt").write_bytes(b"one\n")
    questions = Questions("reject_once")
    config = ClientConfig(permission=questions)
    h = await acp_harness_factory([sys.executable, "-c", OTHER_LISTENER, *agent_command],
                                  env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    await turn(h, sid, endpoint, call("s", "bash", command="echo two >> a.txt"))
    await turn(h, sid, endpoint, call("s2", "bash", command="echo three >> a.txt"))
    assert not recorded_by_the_sandbox(agent_state_dir, sid)
    warned = [u["content"]["text"] for u in h.updates(sid, "agent_message_chunk") if "seccomp listener" in u["content"]["text"]]
    assert len(warned) == 1 and "EBUSY" in warned[0], warned
    assert "/undo will ask you about every file a shell command changes" in warned[0]
    questions.asked.clear()
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.titles() == ["a.txt: keep yours or take the checkpoint?"]
    assert (workspace / "a.txt").read_bytes() == b"one\ntwo\nthree\n"


@contextlib.asynccontextmanager
async def while_the_command_holds(h, sid, endpoint, command: str, path: Path, holds: bytes, fifo: Path,
                                  text: str = "go"):
    """A turn whose command writes ``path`` until it ``holds`` those bytes, then waits for a line on
    ``fifo`` (a path it only reads: no event of a watched folder between the test's last step and
    the command's next one, so the kernel may merge their equal events); the body runs while it
    waits, then the line is sent and the turn must end."""
    os.mkfifo(fifo)
    endpoint.push(call("s", "bash", command=command))
    endpoint.push(text_stream("done"))
    prompt = asyncio.create_task(h.prompt(sid, text))
    # its size, not its bytes: a read opens the file, and an open while the command opens it is a reader
    # the watch must count (an editor's read there makes /undo ask, the safe side)
    await until(lambda: (path.exists() and path.stat().st_size == len(holds)) or prompt.done(),
                f"the command to write {path.name}")
    assert not prompt.done(), f"the turn ended before its command wrote {path.name}: {prompt.result()}"
    assert path.read_bytes() == holds
    try:
        yield
    finally:
        await asyncio.to_thread(fifo.write_bytes, b"go\n")
    assert (await prompt).stop_reason == "end_turn"


async def test_undo_removed_a_file_the_command_created_and_the_user_then_saved_into(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The command created ``notes.txt`` and kept it open for writing; the user saved into it in place
    meanwhile, and the command's close came right after the save's (the kernel merged the two). The
    open count watched a created file only from the first event of it, so the save was counted
    nowhere: ``/undo`` said "removed (the agent had created it)" — the user's save gone, unasked. Its
    folder now counts its opens from before the command's: asked, and no answer keeps it."""
    flags = git_with_flags(workspace)
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    path = workspace / "notes.txt"
    command = "exec 3>notes.txt; echo agent >&3; read go < flags/go; exec 3>&-"
    async with while_the_command_holds(h, sid, endpoint, command, path, b"agent\n", flags / "go", "note"):
        with open(path, "ab") as fh:  # the user's in-place save
            fh.write(b"MY WORK SAVED INTO THE AGENT'S NEW FILE\n")
    saved = b"agent\nMY WORK SAVED INTO THE AGENT'S NEW FILE\n"
    await assert_recorded_and_kept(h, sid, questions, path, saved, agent_state_dir)


async def test_undo_reverted_a_file_the_command_replaced_by_a_rename_and_the_user_then_saved_into(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The rename variant: the user follows ``a.txt`` (``tail -f``: the old file stays open); the
    command replaces it by a file it created (``.a.tmp`` renamed over it) and appends to it; the
    user saves into it in place, the closes merged. The save was counted for ``.a.tmp`` (a name gone
    at the end) and the old file's count stood for the new one: ``/undo`` put ``orig`` back unasked."""
    flags = git_with_flags(workspace)
    path = workspace / "a.txt"
    path.write_bytes(b"orig\n")
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    command = ("echo agent >> a.txt; echo new > .a.tmp; mv .a.tmp a.txt; exec 3>>a.txt; echo more >&3; "
               "read go < flags/go; exec 3>&-")
    with open(path, "rb") as tail:  # the user's tail -f of the old file
        tail.read()
        async with while_the_command_holds(h, sid, endpoint, command, path, b"new\nmore\n", flags / "go", "swap"):
            with open(path, "ab") as fh:
                fh.write(b"MY WORK SAVED INTO THE REPLACED FILE\n")
    saved = b"new\nmore\nMY WORK SAVED INTO THE REPLACED FILE\n"
    await assert_recorded_and_kept(h, sid, questions, path, saved, agent_state_dir)


async def test_undo_asked_about_a_file_a_reader_held_open_when_the_command_ended(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The user opened the log the agent's command was writing (an editor tab, ``tail -f``) and still
    had it open when the command ended: that open was taken for a writer whose close the kernel merged
    with the command's, and ``/undo`` asked about a file only the command wrote. One reader, still
    there, nobody writing: restored without a question."""
    flags = git_with_flags(workspace)
    path = workspace / "build.log"
    path.write_bytes(b"orig\n")
    questions = Questions("reject_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    command = "exec 3>>build.log; echo step1 >&3; read go < flags/go; echo step2 >&3; exec 3>&-"
    with contextlib.ExitStack() as stack:
        async with while_the_command_holds(h, sid, endpoint, command, path, b"orig\nstep1\n", flags / "go", "log"):
            stack.enter_context(open(path, "rb")).read()  # the user's tail -f, open past the command's end
        assert recorded_by_the_sandbox(agent_state_dir, sid), "the call must run under the write record"
        assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == b"orig\n"
    assert "build.log: restored" in said(h, sid)


async def test_undo_of_a_file_a_shell_command_changed_uncertainly_and_the_user_changed_again_offered_no_merge(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The user saved ``a.txt`` while the agent's command ran (so the call's change of it is
    uncertain: whose, nothing shows) and changed its first line again after the turn. ``/undo``
    offered only the whole checkpoint (the later change lost too) or "Keep mine" (the command's
    line kept). The call's change alone is offered first — its diff saying exactly what goes: the
    lines changed while the command ran, the user's line of that time too — and the later change stays."""
    flags = git_with_flags(workspace)
    path = workspace / "a.txt"
    path.write_bytes(b"one\ntwo\nthree\n")
    questions = Questions("agents_change_only")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    await saved_while_the_command_appends(h, sid, endpoint, flags, path, b"one\ntwo\nthree\nMY LINE\n")
    assert path.read_bytes() == b"one\ntwo\nthree\nMY LINE\nagent\n"
    path.write_bytes(b"ONE\ntwo\nthree\nMY LINE\nagent\n")  # after the turn

    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    (question,) = questions.asked
    assert question["toolCall"]["title"] == "a.txt: keep yours or take the checkpoint?"
    assert [(o["optionId"], o["name"]) for o in question["options"]] == [
        ("agents_change_only", "Undo the command's change, keep later changes"),
        ("allow_once", "Take the checkpoint"), ("reject_once", "Keep mine")]
    (diff,) = [c for c in question["toolCall"]["content"] if c.get("type") == "diff"]
    assert (diff["oldText"], diff["newText"]) == ("ONE\ntwo\nthree\nMY LINE\nagent\n", "ONE\ntwo\nthree\n")
    assert path.read_bytes() == b"ONE\ntwo\nthree\n"
    assert "a.txt: restored (only the command's change taken back; what changed after it kept)" in said(h, sid)

    questions.asked.clear()  # /redo from what the undo left: the file as it was just before it, unasked
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert questions.asked == []
    assert path.read_bytes() == b"ONE\ntwo\nthree\nMY LINE\nagent\n"


async def test_redo_of_an_uncertain_files_undo_asked_again_though_it_only_brings_back_the_users_bytes(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    """The user saved ``a.txt`` while the agent's command ran (uncertain), then took the checkpoint at
    ``/undo`` (what it replaced kept). ``/redo`` asked "keep yours or take the checkpoint?" again,
    although the file held exactly what the undo wrote and the redo only brings the user's own bytes
    back: nothing to lose, so no question. (A file changed since the undo is still asked about.)"""
    flags = git_with_flags(workspace)
    path = workspace / "a.txt"
    path.write_bytes(b"orig\n")
    questions = Questions("allow_once")
    h, sid = await start(acp_harness_factory, endpoint, workspace, questions)
    await saved_while_the_command_appends(h, sid, endpoint, flags, path, b"orig\nMY LINE\n")
    both = b"orig\nMY LINE\nagent\n"
    assert (await h.prompt(sid, "/undo")).stop_reason == "end_turn"
    assert questions.titles() == ["a.txt: keep yours or take the checkpoint?"]
    assert path.read_bytes() == b"orig\n"

    questions.asked.clear()
    assert (await h.prompt(sid, "/redo")).stop_reason == "end_turn"
    assert questions.asked == [] and path.read_bytes() == both
