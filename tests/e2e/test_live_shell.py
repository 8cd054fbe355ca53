"""End to end: live shell output (issue 17 §2) — a client announcing the terminal convention of
Zed, claude-agent-acp and codex-acp (``clientCapabilities._meta.terminal_output`` or
``terminal_output_delta``) sees a ``bash`` call's output while it runs; every other client gets
exactly the final result it got before. The real server, the official ACP Python SDK as the client,
the offline endpoint as the model; the command runs under the OS sandbox.

No timing is asserted: "while it runs" is shown by a command that waits for a file the test
creates only after it has seen the first output.
"""

from __future__ import annotations

import asyncio

import pytest
from support.acp_client import ClientConfig
from support.sessions import call, events

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.tools.live import LIMIT_BYTES

#: Prints a line, waits until the test creates ``go`` in the workspace, prints another.
WAITING = "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second; exit 3"
SECRET = "sk-live-0123456789abcdef"


def caps(**meta: bool) -> dict:
    out: dict = {"fs": {"readTextFile": False, "writeTextFile": False}, "terminal": False}
    if meta:
        out["_meta"] = dict(meta)
    return out


async def start(factory, endpoint, workspace, client_caps, env=None):
    h = await factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, **(env or {})},
                      config=ClientConfig(client_capabilities=client_caps))
    await h.initialize()
    return h, (await h.new_session(str(workspace))).session_id


def live(update: dict, key: str) -> str | None:
    """The ``data`` of a live-output update under ``key`` (``None`` for any other update)."""
    if update.get("sessionUpdate") != "tool_call_update":
        return None
    block = (update.get("_meta") or {}).get(key)
    return block["data"] if isinstance(block, dict) else None


def final_update(h, sid, tool_call_id):
    (final,) = [u for u in h.updates(sid, "tool_call_update")
                if u["toolCallId"] == tool_call_id and u.get("status") in ("completed", "failed")]
    return final


def tool_messages(endpoint):
    return [m for m in endpoint.requests[-1].json()["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("key", ["terminal_output_delta", "terminal_output"])
async def test_a_terminal_client_sees_the_output_while_the_command_runs_and_the_result_is_unchanged(
        acp_harness_factory, tmp_path, key, agent_state_dir):
    results = {}
    for name, client_caps in (("terminal", caps(**{key: True})), ("plain", caps())):
        workspace = tmp_path / name
        workspace.mkdir()
        async with OfflineEndpoint() as endpoint:
            endpoint.push(tool_call_stream([call("b1", "bash", command=WAITING)]))
            endpoint.push(text_stream("done"))
            h, sid = await start(acp_harness_factory, endpoint, workspace, client_caps)
            if name == "plain":
                (workspace / "go").write_text("")
            task = h.start_prompt(sid, "run it")
            if name == "terminal":
                seen = await h.wait_for_update("tool_call_update", session_id=sid,
                                               predicate=lambda u: "first" in (live(u, key) or ""))
                (announced,) = h.updates(sid, "tool_call")
                tcid = announced["toolCallId"]
                # the command is still blocked: its call has not ended, "second" was not printed
                assert not [u for u in h.updates(sid, "tool_call_update") if u.get("status") in ("completed", "failed")]
                (workspace / "go").write_text("")
            assert (await task).stop_reason == "end_turn"
            (announced,) = h.updates(sid, "tool_call")
            tcid = announced["toolCallId"]
            final = final_update(h, sid, tcid)
            (model_sees,) = tool_messages(endpoint)
            (logged,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"]
            # checkpoints follow the folder, not the display: the terminal run writes "go" during the
            # command (a change /undo will ask about), the plain run before it
            kinds = [e.type for e in events(agent_state_dir, sid) if not e.type.startswith("checkpoint/")]
            results[name] = (model_sees["content"], logged["content"], logged["status"], kinds)
            if name == "terminal":
                assert announced["_meta"] == {"terminal_info": {"terminal_id": tcid, "cwd": str(workspace)}}
                assert announced["content"] == [{"type": "terminal", "terminalId": tcid}]
                outputs = [(m.seq, live(m.message["params"]["update"], key)) for m in h.transcript.snapshot()
                           if m.method == "session/update" and m.kind == "notification"
                           and live(m.message["params"]["update"], key) is not None]
                assert "".join(data for _, data in outputs) == "first\nsecond\n"  # in order, nothing twice
                assert seen.seq < [m.seq for m in h.transcript.snapshot() if m.method == "session/update"
                                   and m.message["params"]["update"].get("status") == "failed"][0]
                assert final["_meta"] == {"terminal_exit": {"terminal_id": tcid, "exit_code": 3, "signal": None}}
                assert final["content"] == [{"type": "terminal", "terminalId": tcid}]
                assert final["rawOutput"] == {"formatted_output": model_sees["content"], "exit_code": 3}
                # the live output is not logged: a load replays the call with the text the model saw
                mark = len(h.transcript.snapshot())
                await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
                replayed = [m.message["params"]["update"] for m in h.transcript.snapshot()[mark:]
                            if m.method == "session/update" and m.message["params"]["update"].get("toolCallId") == tcid]
                assert replayed == [{**{k: announced[k] for k in ("sessionUpdate", "toolCallId", "name", "title", "kind",
                                                                  "rawInput")},
                                     "status": "failed", "content": [{"type": "content", "content": {
                                         "type": "text", "text": model_sees["content"]}}]}], replayed
            else:  # exactly today's updates: no _meta, no terminal, the text as content
                assert all("_meta" not in u for u in h.updates(sid))
                assert "content" not in announced
                assert final["content"] == [{"type": "content", "content": {"type": "text", "text": model_sees["content"]}}]
            h.validate()
    assert results["terminal"] == results["plain"]
    assert results["plain"][0] == "first\nsecond\nexit code: 3"


async def test_endless_output_is_capped_for_the_client_and_the_command_can_still_be_cancelled(
        acp_harness_factory, endpoint, workspace, agent_state_dir):
    endpoint.push(tool_call_stream([call("y1", "bash", command="yes")]))
    endpoint.push(text_stream("stopped"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, caps(terminal_output_delta=True))
    task = h.start_prompt(sid, "print forever")
    await h.wait_for_update("tool_call_update", session_id=sid,
                            predicate=lambda u: "live output stopped" in (live(u, "terminal_output_delta") or ""))
    await asyncio.sleep(0.3)  # `yes` goes on printing: nothing more may reach the client
    await h.cancel(sid)
    assert (await task).stop_reason == "cancelled"
    outputs = [d for u in h.updates(sid) if (d := live(u, "terminal_output_delta")) is not None]
    total = sum(len(d.encode()) for d in outputs)
    assert total <= LIMIT_BYTES + 200 and "live output stopped after 512 KiB" in outputs[-1]
    assert len(outputs) < 100  # coalesced: a handful of updates, not one per read
    tcid = h.updates(sid, "tool_call")[0]["toolCallId"]
    final = final_update(h, sid, tcid)
    exit_ = final["_meta"]["terminal_exit"]
    assert exit_["terminal_id"] == tcid and exit_["exit_code"] is None and exit_["signal"] in ("SIGTERM", "SIGKILL")
    (logged,) = [e.data for e in events(agent_state_dir, sid) if e.type == "tool/result"]
    assert logged["reason"] == "interrupted"
    # the terminal did not get it all: the text the model sees follows it
    assert final["content"][0] == {"type": "terminal", "terminalId": tcid}
    assert final["content"][1]["content"]["text"] == logged["content"]
    assert (await h.prompt(sid, "and now?")).stop_reason == "end_turn"


async def test_a_secret_split_across_two_reads_is_redacted_in_the_live_output_as_in_the_result(
        acp_harness_factory, endpoint, workspace):
    head, tail = SECRET[:10], SECRET[10:]
    command = (f"echo waiting-for-go; printf '%s' 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx{head}'; "
               f"while [ ! -e go ]; do sleep 0.02; done; echo '{tail} end'")
    endpoint.push(tool_call_stream([call("s1", "bash", command=command)]))
    endpoint.push(text_stream("ok"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, caps(terminal_output=True),
                         env={"AGENT_SERVER_API_KEY": SECRET})
    task = h.start_prompt(sid, "print the key")
    await h.wait_for_update("tool_call_update", session_id=sid,
                            predicate=lambda u: "waiting-for-go" in (live(u, "terminal_output") or ""))
    (workspace / "go").write_text("")
    assert (await task).stop_reason == "end_turn"
    streamed = "".join(d for u in h.updates(sid) if (d := live(u, "terminal_output")) is not None)
    assert SECRET not in streamed and head not in streamed
    assert streamed == "waiting-for-go\n" + "x" * 40 + "<redacted> end\n"
    (model_sees,) = tool_messages(endpoint)
    assert SECRET not in model_sees["content"] and "<redacted> end" in model_sees["content"]


async def test_a_command_the_user_rejects_ends_its_terminal_and_shows_why_as_text(
        acp_harness_factory, endpoint, workspace):
    endpoint.push(tool_call_stream([call("r1", "bash", command="echo never")]))
    endpoint.push(text_stream("ok"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_SANDBOX": "off"},
                                  config=ClientConfig(client_capabilities=caps(terminal_output=True),
                                                      permission="reject_once"))
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "run it")).stop_reason == "end_turn"
    tcid = h.updates(sid, "tool_call")[0]["toolCallId"]
    final = final_update(h, sid, tcid)
    (model_sees,) = tool_messages(endpoint)
    assert final["_meta"] == {"terminal_exit": {"terminal_id": tcid, "exit_code": None, "signal": None}}
    assert final["content"] == [{"type": "content", "content": {"type": "text", "text": model_sees["content"]}}]
    assert "rawOutput" not in final and "never" not in model_sees["content"]
    assert not [u for u in h.updates(sid) if live(u, "terminal_output") is not None]


async def test_loading_a_session_while_its_command_runs_gives_the_terminal_and_the_output_that_follows(
        acp_harness_factory, endpoint, workspace):
    endpoint.push(tool_call_stream([call("b1", "bash", command=WAITING)]))
    endpoint.push(text_stream("done"))
    h, sid = await start(acp_harness_factory, endpoint, workspace, caps(terminal_output=True))
    task = h.start_prompt(sid, "run it")
    await h.wait_for_update("tool_call_update", session_id=sid, predicate=lambda u: "first" in (live(u, "terminal_output") or ""))
    tcid = h.updates(sid, "tool_call")[0]["toolCallId"]
    mark = len(h.transcript.snapshot())
    await h.request("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
    loaded = len(h.transcript.snapshot())
    (replayed,) = [m.message["params"]["update"] for m in h.transcript.snapshot()[mark:loaded]
                   if m.method == "session/update" and m.message["params"]["update"]["sessionUpdate"] == "tool_call"]
    assert replayed["toolCallId"] == tcid and replayed["status"] == "pending"
    assert replayed["content"] == [{"type": "terminal", "terminalId": tcid}]
    assert replayed["_meta"] == {"terminal_info": {"terminal_id": tcid, "cwd": str(workspace)}}
    (workspace / "go").write_text("")
    assert (await task).stop_reason == "end_turn"
    after = [live(m.message["params"]["update"], "terminal_output") for m in h.transcript.snapshot()[loaded:]
             if m.method == "session/update"]
    assert "".join(d for d in after if d is not None) == "second\n"
