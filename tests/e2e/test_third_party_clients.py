"""What third-party ACP clients (Toad, CodeCompanion.nvim, agent-shell) tripped over (issue 10 §2),
each pinned through the official ACP Python SDK, the real server and the offline endpoint."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from acp import RequestError
from support.acp_client import AGENT_TO_CLIENT, ClientConfig, MemoryFs
from support.sessions import call, config_env

from agent_server.offline import text_stream, tool_call_stream


def tool_results(endpoint, index=-1):
    """The tool messages of model request ``index``, by the model's call id."""
    return {m["tool_call_id"]: m["content"] for m in endpoint.requests[index].json()["messages"] if m["role"] == "tool"}


async def test_prompt_failing_with_401_hides_the_reason_from_clients_that_read_only_data_details(
        acp_harness_factory, endpoint, workspace):
    endpoint.push({"kind": "error", "status": 401, "json": {"error": {"message": "Incorrect API key provided"}}})
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    with pytest.raises(RequestError) as failed:
        await h.prompt(sid, "hi")
    data = failed.value.data
    assert failed.value.code == -32603 and data["code"] == "AUTH"
    assert "Incorrect API key provided" in data["details"] and data["details"] == data["message"]


class AppendingFs(MemoryFs):
    """An editor that adds a blank line at the end of what it is asked to write (CodeCompanion
    with the file open in a buffer)."""

    def __init__(self, files):
        super().__init__(files)
        self.sent = []

    def write(self, params):
        self.sent.append(params["content"])
        return super().write({**params, "content": params["content"] + "\n"})


async def test_permission_title_carries_the_reason_instead_of_the_calls_own_title_and_has_no_locations(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "hello.py"
    fs = MemoryFs({str(path): "print('hi')\n"})
    endpoint.push(tool_call_stream([call("r", "read", path="hello.py")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="hello.py", old_string="hi", new_string="hello")]))
    endpoint.push(text_stream("done"))
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="allow_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "greet louder")).stop_reason == "end_turn"
    (asked,) = [p for m, p in h.client.calls if m == "session/request_permission"]
    tool_call = asked["toolCall"]
    (announced,) = [u for u in h.updates(sid, "tool_call") if u["toolCallId"] == tool_call["toolCallId"]]
    assert tool_call["title"] == announced["title"] == "Edit hello.py"
    assert tool_call["locations"] == announced["locations"] and tool_call["locations"][0]["path"] == str(path)
    texts = [c["content"]["text"] for c in tool_call["content"] if c["type"] == "content"]
    assert texts and "cannot show the change as a proposal" in texts[0]
    assert [c["type"] for c in tool_call["content"]] == ["diff", "content"]
    assert fs.files[str(path)] == "print('hello')\n"


async def test_edits_were_approved_blind_in_a_client_that_shows_only_the_first_content_block(
        acp_harness_factory, endpoint, workspace):
    """Issue 31 item 2 (CodeCompanion): the permission's first block was the reason text, so a
    client showing only the first block showed no diff. The diff comes first, the reason after."""
    path = workspace / "hello.py"
    fs = MemoryFs({str(path): "print('hi')\n"})
    endpoint.push(tool_call_stream([call("r", "read", path="hello.py")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="hello.py", old_string="hi", new_string="hello")]))
    endpoint.push(text_stream("done"))
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="allow_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "greet louder")).stop_reason == "end_turn"
    (asked,) = [p for m, p in h.client.calls if m == "session/request_permission"]
    first = asked["toolCall"]["content"][0]
    assert first["type"] == "diff" and first["path"] == str(path)
    assert "hello" in first["newText"] and "hello" not in first["oldText"]


async def test_editor_appending_a_blank_line_on_write_makes_the_next_edit_stale_and_the_model_unaware(
        acp_harness_factory, endpoint, workspace):
    path = workspace / "p.txt"
    fs = AppendingFs({str(path): "alpha\n"})
    endpoint.push(tool_call_stream([call("r", "read", path="p.txt")]))
    endpoint.push(tool_call_stream([call("e1", "edit", path="p.txt", old_string="alpha", new_string="beta")]))
    endpoint.push(tool_call_stream([call("e2", "edit", path="p.txt", old_string="beta", new_string="gamma")]))
    endpoint.push(text_stream("done"))
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="allow_always")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url}, config=config)
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "rename twice")).stop_reason == "end_turn"
    first = tool_results(endpoint, 2)["e1"]
    assert "The editor changed the text while writing it" in first and "+\n" in first.split("landed")[-1]
    second = tool_results(endpoint, 3)["e2"]
    assert "changed since" not in second and not second.startswith(("Not written", "Error")), second
    # the second edit was computed on the text that landed (with the editor's blank line)
    assert fs.sent == ["beta\n", "gamma\n\n"]
    assert fs.files[str(path)] == "gamma\n\n\n"


async def test_prompt_with_several_text_blocks_loses_all_but_one(acp_harness_factory, endpoint, workspace):
    endpoint.push(text_stream("ok"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    blocks = [{"type": "text", "text": "first: the cancelled question"},
              {"type": "text", "text": "second: more context"},
              {"type": "text", "text": "third: the new question"}]
    assert (await h.prompt(sid, blocks)).stop_reason == "end_turn"
    user = [m for m in endpoint.requests[0].json()["messages"] if m["role"] == "user"][-1]["content"]
    assert [user.find(b["text"]) >= 0 for b in blocks] == [True, True, True]
    assert user.index("first:") < user.index("second:") < user.index("third:")


async def test_session_info_update_cannot_be_switched_off_for_clients_that_reject_it(
        acp_harness_factory, endpoint, workspace, tmp_path):
    endpoint.push(text_stream("one"))
    endpoint.push(text_stream("two"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url})
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "name this session")).stop_reason == "end_turn"
    await h.wait_for_update("session_info_update", session_id=sid)  # on by default
    off = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                         **config_env(tmp_path, "[acp]\nsession_info_update = false\n")})
    await off.initialize()
    sid2 = (await off.new_session(str(workspace))).session_id
    assert (await off.prompt(sid2, "name this session")).stop_reason == "end_turn"
    await asyncio.sleep(0.3)  # an update would follow the response at once
    assert off.updates(sid2, "session_info_update") == []
    assert off.updates(sid2, "agent_message_chunk")  # the turn itself was shown


async def test_toad_rejected_config_option_update_after_a_mode_change_despite_the_acp_switch(
        acp_harness_factory, endpoint, workspace, tmp_path):
    """Issue 31 item 5: the [acp] switch for old clients (session_info_update = false) now also
    stops config_option_update; an explicit config_option_update = true brings it back."""
    for config, expected in (("session_info_update = false\n", False), ("", True),
                             ("session_info_update = false\nconfig_option_update = true\n", True)):
        endpoint.push(text_stream("ok"))
        h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                           **config_env(tmp_path, f"{TWO_MODELS}[acp]\n{config}")})
        await h.initialize()
        sid = (await h.new_session(str(workspace))).session_id
        await h.request("session/set_mode", {"sessionId": sid, "modeId": "read-only"})
        await h.request("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "workspace-write"})
        # a model change, both ways: the config option and the /model command
        await h.request("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "other-model"})
        assert (await h.prompt(sid, "/model test-model")).stop_reason == "end_turn"
        assert (await h.prompt(sid, "after the changes")).stop_reason == "end_turn"  # their updates came first
        assert [u["currentModeId"] for u in h.updates(sid, "current_mode_update")] == ["read-only", "workspace-write"]
        assert len(h.updates(sid, "config_option_update")) == (4 if expected else 0), config


TWO_MODELS = '[[models]]\nid = "test-model"\n\n[[models]]\nid = "other-model"\n\n'
"""Config text: the harness's model and another one, so that the model can be switched."""

# Toad <= 0.6.20 (src/toad/jsonrpc.py, Server._dispatch_object_call) type-checks a notification's
# params against its own SessionUpdate union with typeguard; an update it does not know fails the check
# and, the notification having no id, is answered with an id-null InvalidParams error whose message is
# the several-line typeguard report. Rebuilt here from its source (no recording of it exists).
TOAD_REJECTS_UPDATE = {"jsonrpc": "2.0", "id": None, "error": {"code": -32602, "message": (
    "Parameter is not the expected type (toad.acp.protocol.SessionUpdate); dict did not match any element "
    "in the union:\n"
    "  toad.acp.protocol.AgentMessageChunk: value of key 'sessionUpdate' did not match any element in the "
    "union: Literal['agent_message_chunk']\n"
    "  toad.acp.protocol.ToolCall: is missing required key(s): \"toolCallId\"\n"
    "  toad.acp.protocol.ToolCallUpdate: is missing required key(s): \"toolCallId\"\n"
    "  toad.acp.protocol.Plan: is missing required key(s): \"entries\"\n"
    "  toad.acp.protocol.AvailableCommandsUpdate: is missing required key(s): \"availableCommands\"\n"
    "  toad.acp.protocol.CurrentModeUpdate: is missing required key(s): \"currentModeId\"")}}


async def test_toad_rejecting_config_option_update_logged_a_seven_line_error_each_time(
        acp_harness_factory, endpoint, workspace):
    """Issue 31 item 5: Toad answers each config_option_update with an id-null error carrying a
    7-line type-check report; the server logged all 7 lines every time. One line each now."""
    endpoint.push(text_stream("ok"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_LOG_LEVEL": "WARNING"},
                                  validate={"check": {AGENT_TO_CLIENT}})  # Toad's id-null answer is not ACP's
    await h.initialize()
    sid = (await h.new_session(str(workspace))).session_id
    for mode in ("read-only", "workspace-write"):
        await h.request("session/set_mode", {"sessionId": sid, "modeId": mode})
        await h.wait_for_update("config_option_update", session_id=sid,
                                predicate=lambda u, m=mode: u["configOptions"][0]["currentValue"] == m)
        await h.send_raw(TOAD_REJECTS_UPDATE)
    assert (await h.prompt(sid, "still serving")).stop_reason == "end_turn"  # both answers were read before it
    lines = [line for line in h.stderr_text().splitlines() if line.strip()]
    said = [line for line in lines if "-32602" in line]
    assert len(said) == 2, lines
    assert all("Parameter is not the expected type" in line and "in the union: toad.acp.protocol.AgentMessageChunk"
               in line for line in said)  # the report's lines folded into one
    assert len(lines) == 2, lines  # nothing of the report on lines of its own


async def test_default_log_level_floods_stderr_with_protocol_trivia(acp_harness_factory, endpoint, workspace,
                                                                     agent_state_dir):
    """agent-shell shows stderr to the user every turn: a normal session (read, permission with
    diff, plain-ACP edit, shell, a cancelled turn, a provider error, a late answer to a withdrawn
    request, listing sessions beside an unreadable log) writes nothing there."""
    broken = agent_state_dir / "sessions" / "sess_broken" / "events.jsonl"
    broken.parent.mkdir(parents=True)
    broken.write_text("not json\n")
    path = workspace / "p.txt"
    fs = MemoryFs({str(path): "alpha\n"})
    endpoint.push(tool_call_stream([call("r", "read", path="p.txt"), call("b", "bash", command="echo hi")]))
    endpoint.push(tool_call_stream([call("e", "edit", path="p.txt", old_string="alpha", new_string="beta")]))
    endpoint.push(text_stream("edited"))
    endpoint.push(tool_call_stream([call("s", "bash", command="sleep 20")]))
    endpoint.push({"kind": "error", "status": 401, "json": {"error": {"message": "Incorrect API key provided"}}})
    config = ClientConfig(read_text_file=fs.read, write_text_file=fs.write, permission="allow_once")
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url, "AGENT_SERVER_LOG_LEVEL": "WARNING"},
                                  config=config, validate={"check": {AGENT_TO_CLIENT}})  # the stray answer is ours
    await h.initialize(config.capabilities())
    sid = (await h.new_session(str(workspace))).session_id
    assert (await h.prompt(sid, "edit")).stop_reason == "end_turn"
    running = h.start_prompt(sid, "wait")
    sleeping = await h.wait_for_update("tool_call", session_id=sid, predicate=lambda u: "sleep" in u["title"])
    sleeping_id = sleeping.message["params"]["update"]["toolCallId"]
    await h.wait_for_update("tool_call_update", session_id=sid,
                            predicate=lambda u: u["toolCallId"] == sleeping_id and u.get("status") == "in_progress")
    await h.cancel(sid)
    assert (await running).stop_reason == "cancelled"
    with pytest.raises(RequestError):
        await h.prompt(sid, "again")
    await h.send_raw({"jsonrpc": "2.0", "id": 4242, "result": {"outcome": {"outcome": "cancelled"}}})
    listed = await h.conn.list_sessions()
    assert [x.session_id for x in listed.sessions] == [sid]
    await asyncio.sleep(0.3)
    assert fs.files[str(path)] == "beta\n"
    assert h.stderr_text() == ""
    broken.unlink()  # the end-of-test replay check reads every log in the state folder


# CodeCompanion.nvim's ACP connection (lua/codecompanion/acp/init.lua) as its gemini_cli adapter runs
# it: the adapter's `parameters` as the initialize params, then — when authMethods is not empty —
# authenticate with `defaults.auth_method`, then session/new with the adapter's mcpServers.
CODECOMPANION_INITIALIZE = {"protocolVersion": 1,
                            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": True}},
                            "clientInfo": {"name": "CodeCompanion.nvim", "version": "1.0.0"}}
GEMINI_CLI_AUTH_METHOD = "gemini-api-key"
"""What the gemini_cli base adapter asks for when the README's snippet does not say otherwise."""


def readme_codecompanion_auth_method() -> str | None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    block = readme.split("**Neovim with CodeCompanion.nvim**", 1)[1].split("```lua", 1)[1].split("```", 1)[0]
    found = re.search(r'defaults\s*=\s*\{[^}]*auth_method\s*=\s*"([^"]+)"', block)
    return found.group(1) if found else None


def test_codecompanion_could_not_connect_with_the_readmes_snippet(raw_agent_factory, workspace):
    """Issue 31 item 1: CodeCompanion's gemini_cli base adapter authenticates with the auth method
    its adapter names; the README's snippet named none, so it asked for gemini-api-key, which we do
    not offer. The recorded initialize/authenticate exchange, with the snippet's auth_method."""
    wanted = readme_codecompanion_auth_method() or GEMINI_CLI_AUTH_METHOD
    agent = raw_agent_factory()
    init = agent.request("initialize", CODECOMPANION_INITIALIZE)["result"]
    offered = [m["id"] for m in init["authMethods"]]
    assert wanted in offered, f"the README's snippet asks for {wanted!r}; offered: {offered}"
    assert agent.request("authenticate", {"methodId": wanted})["result"] == {}
    new = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})
    assert new["result"]["sessionId"].startswith("sess_")
