"""A 30 MB file edited through the real server, for each kind of client: no line the server
writes is over its bound (``MAX_SEND_BYTES``, docs/protocol.md "Size limit"), the edit lands byte for
byte, and the edit completes within its tool timeout (a tool update with the whole old and new text
was a 62 MB line the TypeScript SDK refuses). How long it takes is not asserted here (a loaded machine
decides that); difflib never runs over every line (tests/tools/test_diff_view.py counts it)."""

import json

import pytest
from support.acp_client import AGENT_TO_CLIENT
from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig, MemoryFs
from support.editor import MemoryEditor
from support.sessions import events

from agent_server.offline import text_stream, tool_call_stream
from agent_server.server.rpc.bounds import MAX_SEND_BYTES

LINES = 2_500_000


def big_text() -> str:
    return "".join(f"LINE {i}\n" for i in range(1, LINES + 1))  # 31,388,896 bytes


def call(cid, name, **args):
    return tool_call_stream([(cid, name, json.dumps(args))])


def client_config(kind: str, path, text: str) -> tuple[ClientConfig, object]:
    if kind == "extension":
        editor = MemoryEditor()
        return ClientConfig(read_text_file=editor.read, ext_methods={APPLY_WORKSPACE_EDIT: editor.apply_workspace_edit},
                            agent_server_extension=True), editor
    if kind == "plain-fs":
        fs = MemoryFs({str(path): text})
        return ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="allow_once"), fs
    return ClientConfig(permission="allow_once"), None


@pytest.mark.parametrize("kind", ["extension", "plain-fs", "disk"])
async def test_edit_of_a_30_mb_file_never_sends_a_message_over_the_bound(acp_harness_factory, endpoint, workspace, kind,
                                                                        agent_state_dir):
    path = workspace / "big.txt"
    text = big_text()
    path.write_text(text)
    expected = text.replace("LINE 250000\n", "CHANGED 250000\n").encode()
    config, editor = client_config(kind, path, text)
    for stream in (call("r", "read", path="big.txt"),
                   call("e", "edit", path="big.txt", old_string="LINE 250000\n", new_string="CHANGED 250000\n"),
                   text_stream("done")):
        endpoint.push(stream)
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config,
                                  validate={"check": (AGENT_TO_CLIENT,)})
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    # the harness's 30 s default is for a turn's answer, not for 31 MB through the client twice on a loaded machine
    assert (await h.prompt(sid, "change line 250000", timeout=180)).stop_reason == "end_turn"

    assert path.read_bytes() == expected  # byte for byte (plain-fs: its fs/write_text_file would be 31 MB: the guarded disk write)
    sent = [m for m in h.transcript if m.direction == AGENT_TO_CLIENT]
    biggest = max(len(m.raw.encode()) + 1 for m in sent)
    assert biggest <= MAX_SEND_BYTES, f"a {biggest:,}-byte line"
    logged = events(agent_state_dir, sid)
    result = next(e.data for e in logged if e.type == "tool/result" and e.data["name"] == "edit")
    assert result["status"] == "completed", result["content"]
    tool = [m for m in endpoint.requests[2].json()["messages"] if m["role"] == "tool"][-1]
    assert tool["content"].startswith("Edited big.txt: replaced 1 occurrence; changed line 250000.")
    updates = [m.message["params"]["update"] for m in sent if m.method == "session/update"]
    diffs = [c for u in updates if isinstance(u.get("content"), list) for c in u["content"] if c.get("type") == "diff"]
    assert diffs and all(len(d["oldText"]) < 1000 and d["_meta"]["agentServer"]["diff"]["partial"] for d in diffs)
    assert diffs[-1]["newText"].splitlines()[5] == "CHANGED 250000"
    assert diffs[-1]["_meta"]["agentServer"]["diff"]["oldLine"] == 249995
    if kind == "extension":
        (proposal,) = editor.proposals
        assert proposal["edit"]["documentChanges"][0]["edits"] == [
            {"range": {"start": {"line": 249999, "character": 0}, "end": {"line": 249999, "character": 4}},
             "newText": "CHANGED"}]


def test_run_edit_of_a_30_mb_file_prints_completed_and_no_lost_message(agent_env, workspace):
    import os
    import subprocess
    import sys

    from agent_server.offline import OfflineEndpoint

    path = workspace / "big.txt"
    text = big_text()
    path.write_text(text)
    script = [call("r", "read", path="big.txt"),
              call("e", "edit", path="big.txt", old_string="LINE 250000\n", new_string="CHANGED 250000\n"),
              text_stream("done")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        done = subprocess.run([sys.executable, "-m", "agent_server", "run", "-p", "edit", "--cwd", str(workspace),
                               "--allow", "edit,read"], env={**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url},
                              capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "[tool] Edit big.txt: completed" in done.stderr
    assert "invalid id" not in done.stderr and "WARNING" not in done.stderr and "ERROR" not in done.stderr
    assert path.read_bytes() == text.replace("LINE 250000\n", "CHANGED 250000\n").encode()
