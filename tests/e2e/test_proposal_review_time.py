"""The time the user spends on an edit proposal is not the write/edit tool's run time: a proposal
the editor holds longer than the tool's timeout still lands when accepted, and one nobody answers
ends at the approval timeout with a clear result — through the real server (its tool timeouts
shortened by the launcher below, so the test does not wait 30 s)."""

import asyncio
import json
import sys

from support.client_impl import APPLY_WORKSPACE_EDIT, ClientConfig
from support.editor import Buffer, MemoryEditor

from agent_server.offline import text_stream, tool_call_stream
from agent_server.session import EventLog

TOOL_TIMEOUT = 3.0  # 1 s was too little for the tool's own work on a loaded 2-core machine
# the real server, with write/edit bounded by TOOL_TIMEOUT s (and no grace) instead of 30 s
SHORT_TIMEOUTS = [sys.executable, "-c", (
    "import agent_server.tools.write_edit as w, agent_server.tools.pipeline as p\n"
    f"w.WriteTool.default_timeout = w.EditTool.default_timeout = {TOOL_TIMEOUT}\n"
    "p.TIMEOUT_GRACE = 0.0\n"
    "from agent_server.cli import main\n"
    "raise SystemExit(main())\n")]


def call(cid, name, **args):
    return tool_call_stream([(cid, name, json.dumps(args))])


def results(state_dir, sid):
    log = EventLog.open(state_dir / "sessions" / sid / "events.jsonl")
    try:
        return {e.data["call_id"]: e.data for e in log.events if e.type == "tool/result"}
    finally:
        log.close()


async def test_write_proposal_reviewed_longer_than_the_tool_timeout_lands_when_accepted(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    path = workspace / "multi.py"
    path.write_text("a = 1\nb = 2\nc = 3\n")
    editor = MemoryEditor({str(path): Buffer("a = 1\nb = 2\nc = 3\n", version=1)})

    class Reviewer:  # the user looks at the diff for longer than the tool's timeout, then accepts
        async def review(self, params):
            await asyncio.sleep(1.5 * TOOL_TIMEOUT)
            return editor.apply_workspace_edit(params)
    for step in (call("r", "read", path="multi.py"),
                 call("w", "write", path="multi.py", content="a = 10\nb = 2\nc = 30\n"),
                 call("b", "bash", command="echo after"), text_stream("done")):
        endpoint.push(step)
    config = ClientConfig(read_text_file=editor.read, ext_methods={APPLY_WORKSPACE_EDIT: Reviewer().review},
                          agent_server_extension=True)
    h = await acp_harness_factory(SHORT_TIMEOUTS, env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "change two lines")).stop_reason == "end_turn"
    assert editor.buffers[str(path)].text == "a = 10\nb = 2\nc = 30\n"
    assert not h.transcript.notifications("$/cancel_request")  # the proposal was never withdrawn
    await h.close()
    written = results(agent_state_dir, sid)["w"]
    assert written["status"] == "completed", written["content"]
    assert "timed out" not in written["content"] and written["content"].startswith("Wrote multi.py")


async def test_unanswered_proposal_ends_at_the_approval_timeout_not_the_tool_timeout(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    path = workspace / "z.txt"
    path.write_text("zero\n")
    editor = MemoryEditor({str(path): Buffer("zero\n", version=1)})

    async def never_answers(params):
        editor.proposals.append(params)
        await asyncio.sleep(120)
    for step in (call("r", "read", path="z.txt"), call("e", "edit", path="z.txt", old_string="zero", new_string="one"),
                 text_stream("ok")):
        endpoint.push(step)
    config = ClientConfig(read_text_file=editor.read, ext_methods={APPLY_WORKSPACE_EDIT: never_answers},
                          agent_server_extension=True)
    h = await acp_harness_factory(SHORT_TIMEOUTS, env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                                       "AGENT_SERVER_APPROVAL_TIMEOUT": "6"}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "edit")).stop_reason == "end_turn"  # a clear answer, then the turn goes on
    assert h.transcript.notifications("$/cancel_request"), "the proposal was withdrawn on the wire"
    assert path.read_text() == "zero\n" and editor.buffers[str(path)].text == "zero\n"
    await h.close()
    edited = results(agent_state_dir, sid)["e"]
    assert edited["status"] == "failed"
    assert "did not answer the proposal" in edited["content"] and "within 6 s" in edited["content"]
    assert "timed out after" not in edited["content"]
