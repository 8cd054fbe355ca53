"""The SDK harness drives an agent, records the wire in both directions and leaves no process behind."""

from __future__ import annotations

import asyncio
import json

import pytest
from acp import RequestError
from support.acp_client import (
    AGENT_TO_CLIENT,
    APPLY_WORKSPACE_EDIT,
    CLIENT_TO_AGENT,
    AcpHarness,
    AgentExited,
    ClientConfig,
    MemoryFs,
    never_answer,
)
from support.procs import pid_alive
from support.timeouts import HANG


async def start_session(h: AcpHarness, workspace, **init_kwargs) -> str:
    await h.initialize(**init_kwargs)
    return (await h.new_session(workspace)).session_id


async def test_initialize_new_session_prompt_and_raw_transcript(acp_harness, workspace):
    h = acp_harness
    init = await h.initialize()
    assert init.protocol_version == 1
    session = await h.new_session(workspace)
    response = await h.prompt(session.session_id, "hello")
    assert response.stop_reason == "end_turn"

    assert h.agent_text(session.session_id) == "echo: hello"
    assert [u["sessionUpdate"] for u in h.updates(session.session_id)] == ["agent_message_chunk"] * 2
    assert len(h.client.updates) == 2  # the SDK-typed view agrees with the wire

    records = h.transcript.snapshot()
    assert [(r.direction, r.method or "response") for r in records] == [
        (CLIENT_TO_AGENT, "initialize"),
        (AGENT_TO_CLIENT, "response"),
        (CLIENT_TO_AGENT, "session/new"),
        (AGENT_TO_CLIENT, "response"),
        (CLIENT_TO_AGENT, "session/prompt"),
        (AGENT_TO_CLIENT, "session/update"),
        (AGENT_TO_CLIENT, "session/update"),
        (AGENT_TO_CLIENT, "response"),
    ]
    assert all(a.t <= b.t for a, b in zip(records, records[1:], strict=False)), "timestamps are monotonic"
    assert all(json.loads(r.raw) == r.message for r in records), "raw lines are kept verbatim"
    # default capabilities: nothing advertised
    init_params = records[0].message["params"]
    assert init_params["protocolVersion"] == 1
    # (the SDK omits clientCapabilities entirely when every field has its default value)
    assert init_params.get("clientCapabilities", {}).get("fs", {}).get("readTextFile", False) is False
    assert h.transcript.last_response("session/prompt").message["result"] == {"stopReason": "end_turn"}
    assert h.validate().ok


async def test_capabilities_and_meta_are_sent_as_given(acp_harness_factory, workspace):
    caps = {
        "fs": {"readTextFile": True, "writeTextFile": True},
        "_meta": {"agentServer": {"version": 1, "applyWorkspaceEdit": True}},
    }
    h = await acp_harness_factory()
    await h.initialize(caps)
    sent = h.transcript.requests("initialize")[0].message["params"]["clientCapabilities"]
    assert sent["fs"] == {"readTextFile": True, "writeTextFile": True}
    assert sent["_meta"] == caps["_meta"]


async def test_cancel_answers_prompt_with_cancelled(acp_harness, workspace):
    h = acp_harness
    sid = await start_session(h, workspace)
    task = h.start_prompt(sid, "/slow")
    await h.wait_for_update("agent_message_chunk", session_id=sid)
    await h.cancel(sid)
    response = await task
    assert response.stop_reason == "cancelled"
    kinds = [(r.direction, r.method) for r in h.transcript if r.method in ("session/prompt", "session/cancel")]
    assert kinds == [(CLIENT_TO_AGENT, "session/prompt"), (CLIENT_TO_AGENT, "session/cancel")]


async def test_permission_not_implemented_by_default(acp_harness, workspace):
    sid = await start_session(acp_harness, workspace)
    await acp_harness.prompt(sid, "/permission")
    assert acp_harness.agent_text(sid) == "permission error: -32601"


@pytest.mark.parametrize(
    ("permission", "expected"),
    [
        ("allow_once", {"outcome": "selected", "optionId": "allow_once"}),
        ("reject_once", {"outcome": "selected", "optionId": "reject_once"}),
        ("cancelled", {"outcome": "cancelled"}),
        (
            lambda params: {"outcome": {"outcome": "selected", "optionId": params["options"][-1]["optionId"]}},
            {"outcome": "selected", "optionId": "reject_once"},
        ),
    ],
)
async def test_permission_answers(acp_harness_factory, workspace, permission, expected):
    h = await acp_harness_factory(config=ClientConfig(permission=permission))
    sid = await start_session(h, workspace)
    await h.prompt(sid, "/permission")
    assert h.agent_text(sid) == "permission: " + json.dumps(expected, sort_keys=True)
    ((method, params),) = h.client.calls
    assert method == "session/request_permission"
    assert params["toolCall"]["toolCallId"] == "call_1"
    assert [o["optionId"] for o in params["options"]] == ["allow_once", "reject_once"]


async def test_fs_handlers_are_advertised_and_called(acp_harness_factory, workspace):
    fs = MemoryFs({str(workspace / "a.txt"): "line1\nline2\n"}, versions={str(workspace / "a.txt"): (12, True)})
    h = await acp_harness_factory(config=ClientConfig(read_text_file=fs.read, write_text_file=fs.write))
    sid = await start_session(h, workspace)
    init_caps = h.transcript.requests("initialize")[0].message["params"]["clientCapabilities"]
    assert init_caps["fs"] == {"readTextFile": True, "writeTextFile": True}

    await h.prompt(sid, f"/read {workspace / 'a.txt'}")
    assert h.agent_text(sid) == "read: line1\nline2\n"
    read_result = h.transcript.response_to(h.transcript.requests("fs/read_text_file")[0]).message["result"]
    assert read_result["_meta"] == {"agentServer": {"version": 12, "dirty": True}}

    await h.prompt(sid, f"/write {workspace / 'b.txt'} new text")
    assert fs.files[str(workspace / "b.txt")] == "new text"
    write_result = h.transcript.response_to(h.transcript.requests("fs/write_text_file")[0]).message["result"]
    assert write_result == {}


async def test_fs_not_advertised_without_handlers(acp_harness, workspace):
    sid = await start_session(acp_harness, workspace)
    await acp_harness.prompt(sid, "/read /etc/hostname")
    assert acp_harness.agent_text(sid) == "no fs.readTextFile"
    assert acp_harness.transcript.requests("fs/read_text_file") == []


async def test_ext_method_handler_gets_wire_params(acp_harness_factory, workspace):
    seen = []

    async def apply(params):
        seen.append(params)
        return {"outcome": "applied", "saved": False}

    h = await acp_harness_factory(config=ClientConfig(ext_methods={APPLY_WORKSPACE_EDIT: apply}))
    sid = await start_session(h, workspace)
    await h.prompt(sid, "/ext")
    assert h.agent_text(sid) == 'ext: {"outcome": "applied", "saved": false}'
    assert seen == [{"sessionId": sid, "toolCallId": "call_1", "label": "Edit", "edit": {"documentChanges": []}}]
    assert [s.method for s in h.validate().extensions] == [APPLY_WORKSPACE_EDIT, APPLY_WORKSPACE_EDIT]


async def test_ext_method_not_implemented_by_default(acp_harness, workspace):
    sid = await start_session(acp_harness, workspace)
    await acp_harness.prompt(sid, "/ext")
    assert acp_harness.agent_text(sid) == "ext error: -32601"


async def test_handler_errors_become_jsonrpc_errors(acp_harness_factory, workspace):
    def deny(params):
        raise RequestError(-32603, "user interface gone")

    h = await acp_harness_factory(config=ClientConfig(permission=deny))
    sid = await start_session(h, workspace)
    await h.prompt(sid, "/permission")
    assert h.agent_text(sid) == "permission error: -32603"


async def test_tool_call_updates_are_recorded_and_valid(acp_harness, workspace):
    sid = await start_session(acp_harness, workspace)
    await acp_harness.prompt(sid, "/tool")
    kinds = [u["sessionUpdate"] for u in acp_harness.updates(sid)]
    assert kinds == ["tool_call", "tool_call_update", "agent_message_chunk"]
    assert acp_harness.validate().ok


async def test_stderr_is_captured(acp_harness, workspace):
    sid = await start_session(acp_harness, workspace)
    await acp_harness.prompt(sid, "/stderr a log line")
    assert "echo-agent: started" in acp_harness.stderr_text()
    assert "a log line" in acp_harness.stderr_text()


async def test_agent_death_is_reported_with_stderr(acp_harness, workspace):
    sid = await start_session(acp_harness, workspace)
    with pytest.raises(AgentExited, match="exiting on request"):
        await acp_harness.prompt(sid, "/exit")
    assert await acp_harness.wait_exit() == 3


async def test_raw_send_is_recorded(acp_harness_factory, workspace):
    # the non-JSON line below is deliberate: only the agent's side is validated at teardown
    acp_harness = await acp_harness_factory(validate={"check": {AGENT_TO_CLIENT}})
    sid = await start_session(acp_harness, workspace)
    await acp_harness.send_raw({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}})
    await acp_harness.send_raw("not json\n")
    await acp_harness.prompt(sid, "still alive")
    sent = acp_harness.transcript.sent()
    assert sent[-3].method == "session/cancel"
    assert sent[-2].raw == "not json" and not sent[-2].is_json
    assert acp_harness.agent_text(sid).endswith("still alive")
    report = acp_harness.validate(collect=True)
    assert [(f.direction, f.message) for f in report.failures] == [(CLIENT_TO_AGENT, "line is not JSON")]
    assert acp_harness.validate(check={AGENT_TO_CLIENT}).ok


async def test_close_kills_the_whole_process_group(workspace, echo_agent_command):
    async with AcpHarness(echo_agent_command) as h:
        sid = await start_session(h, workspace)
        await h.prompt(sid, "/spawn-child")
        child = int(h.agent_text(sid).split()[-1])
        assert pid_alive(child)
        assert child in h.group_members()
    # the agent exited on stdin EOF but its grandchild would have lived on
    assert not pid_alive(child)
    assert h.group_members() == []
    assert h.returncode is not None


async def test_wait_for_times_out_with_diagnostics(acp_harness, workspace):
    await start_session(acp_harness, workspace)
    with pytest.raises(AssertionError, match="timed out") as info:
        await acp_harness.wait_for(lambda r: r.method == "never/sent", timeout=0.3)
    assert "session/new" in str(info.value)  # the transcript tail is in the message


async def test_many_concurrent_sessions_stream_independently(acp_harness, workspace):
    await acp_harness.initialize()
    sids = [(await acp_harness.new_session(workspace)).session_id for _ in range(3)]
    responses = await asyncio.gather(*(acp_harness.prompt(sid, f"n{i}") for i, sid in enumerate(sids)))
    assert {r.stop_reason for r in responses} == {"end_turn"}
    for i, sid in enumerate(sids):
        assert acp_harness.agent_text(sid) == f"echo: n{i}"


async def test_close_does_not_hang_on_a_pending_client_handler(acp_harness_factory, workspace):
    h = await acp_harness_factory(config=ClientConfig(permission=never_answer), validate=False)
    sid = await start_session(h, workspace)
    task = h.start_prompt(sid, "/permission")
    await h.wait_for(lambda r: r.method == "session/request_permission")
    await asyncio.wait_for(h.close(), timeout=HANG)
    with pytest.raises(AssertionError):  # the prompt can no longer complete
        await task
    assert h.group_members() == []


async def test_spawn_failure_is_raised(acp_harness_factory, workspace):
    with pytest.raises(FileNotFoundError):
        await acp_harness_factory([str(workspace / "no-such-agent")])
