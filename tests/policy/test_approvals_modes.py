"""Approvals (answers, texts, memory), the client-facing requester's fail-closed paths, modes, and
the ``[policy]`` settings — unit level; the e2e tests drive the same through the real server."""

from __future__ import annotations

import asyncio

import pytest

from agent_server.config.load import ConfigError, load_config
from agent_server.policy.approvals import Answer, ApprovalMemory, Ask, Rule, denial_text
from agent_server.policy.modes import READ_ONLY, ModeState, UnknownMode
from agent_server.server.rpc.jsonrpc import ConnectionClosed, JsonRpcError
from agent_server.server.acp.permissions import PermissionRequester, parse_answer
from agent_server.session import EventLog

OFFERED = ("allow_once", "allow_always", "reject_once", "reject_always")


@pytest.mark.parametrize("result, kind, allowed", [
    ({"outcome": {"outcome": "selected", "optionId": "allow_once"}}, "selected", True),
    ({"outcome": {"outcome": "selected", "optionId": "allow_always"}}, "selected", True),
    ({"outcome": {"outcome": "selected", "optionId": "reject_once"}}, "selected", False),
    ({"outcome": {"outcome": "cancelled"}}, "cancelled", False),
    ({"outcome": {"outcome": "selected", "optionId": "yes_please"}}, "unknown_option", False),
    ({"outcome": {"outcome": "selected"}}, "malformed", False),
    ({"outcome": {"outcome": "maybe"}}, "malformed", False),
    ({"outcome": "allow_once"}, "malformed", False),
    ({}, "malformed", False), (None, "malformed", False), ("allow_once", "malformed", False),
])
def test_only_a_selected_offered_allow_allows(result, kind, allowed):
    answer = parse_answer(result, OFFERED)
    assert (answer.kind, answer.allowed) == (kind, allowed)


def test_an_allow_that_was_not_offered_is_unknown():
    assert parse_answer({"outcome": {"outcome": "selected", "optionId": "allow_always"}},
                        ("allow_once", "reject_once")).kind == "unknown_option"


def test_denial_texts_tell_rejected_cancelled_timed_out_and_unavailable_apart():
    texts = {kind: denial_text(Answer(kind, "reject_once" if kind == "selected" else None, "d"), "this command", 5)
             for kind in ("selected", "cancelled", "timeout", "unavailable", "error", "malformed")}
    assert texts["selected"].startswith("Rejected by the user")
    assert texts["cancelled"].startswith("Cancelled")
    assert texts["timeout"].startswith("Timed out") and "5 s" in texts["timeout"]
    assert texts["unavailable"].startswith("Approval unavailable") and "no one could be asked" in texts["unavailable"]
    assert len(set(texts.values())) == len(texts)
    assert all("Rejected by the user" not in t for k, t in texts.items() if k != "selected")


def test_memory_rejections_win_and_a_later_answer_replaces_the_earlier():
    memory = ApprovalMemory()
    memory.remember(Rule("bash", "pytest", True))
    memory.remember(Rule("bash", "git push", False))
    assert memory.lookup("bash", lambda p: p == "pytest").allow
    assert not memory.lookup("bash", lambda p: True).allow  # both match: the rejection wins
    assert memory.lookup("read") is None
    memory.remember(Rule("bash", "pytest", False))
    assert len(memory.rules) == 2 and memory.summary() == "always reject `git push`; always reject `pytest`"


class FakeConnection:
    def __init__(self, behaviour):
        self.behaviour = behaviour
        self.closed = asyncio.Event()
        self.sent = []

    async def request(self, method, params, *, timeout=None):
        self.sent.append((method, params, timeout))
        return await self.behaviour()


def ask():
    return Ask("tc-1", "Run `x`", "execute", [], {"command": "x"})


async def _answers(behaviour, timeout=0.05):
    conn = FakeConnection(behaviour)
    requester = PermissionRequester(lambda: conn, "sess_1", lambda: timeout)
    return await requester.ask(ask()), requester, conn


async def test_requester_fails_closed_on_every_failure():
    async def hang():
        await asyncio.sleep(10)

    async def method_not_found():
        raise JsonRpcError(-32601, "method not found")

    async def internal():
        raise JsonRpcError(-32603, "boom")

    async def gone():
        raise ConnectionClosed("bye")

    async def wait_for_timeout():
        return await asyncio.wait_for(asyncio.sleep(10), 0.01)

    assert (await _answers(wait_for_timeout))[0].kind == "timeout"
    assert (await _answers(internal))[0].kind == "error"
    assert (await _answers(gone))[0].kind == "unavailable"
    answer, requester, conn = await _answers(method_not_found)
    assert answer.kind == "unavailable" and requester.unsupported
    assert (await requester.ask(ask())).kind == "unavailable" and len(conn.sent) == 1  # not asked again
    assert (await PermissionRequester(lambda: None, "s", lambda: 1).ask(ask())).kind == "unavailable"


async def test_requester_sends_the_schema_shape_with_option_ids_equal_to_kinds():
    async def allow():
        return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

    answer, _, conn = await _answers(allow, timeout=600)
    method, params, timeout = conn.sent[0]
    assert answer.allowed and method == "session/request_permission" and timeout == 600
    assert [(o["optionId"], o["kind"]) for o in params["options"]] == [(k, k) for k in OFFERED]
    assert params["toolCall"]["toolCallId"] == "tc-1" and params["toolCall"]["title"] == "Run `x`"


def test_modes_log_each_change_and_reject_unknown_ids(tmp_path, acp_schema):
    log = EventLog.create(tmp_path / "events.jsonl", {"cwd": "/w"})
    modes = ModeState(log)
    assert modes.current == "workspace-write"
    assert modes.set(READ_ONLY, "test") and not modes.set(READ_ONLY, "test")
    with pytest.raises(UnknownMode):
        modes.set("yolo", "test")
    changed = [e.data for e in log.events if e.type == "mode/changed"]
    assert changed == [{"from": "workspace-write", "to": "read-only", "by": "test"}]
    assert ModeState.from_events(log, log.events).current == READ_ONLY
    acp_schema.check("SessionModeState", modes.modes_json())
    for option in modes.config_options_json():
        acp_schema.check("SessionConfigOption", option)
    assert modes.config_options_json()[0]["currentValue"] == READ_ONLY


def test_policy_settings_defaults_file_and_environment(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    config = load_config(env=env)
    assert config.policy.approval_timeout == 600 and config.policy.sandbox == "auto" and config.policy.network
    assert config.policy.default_mode == "workspace-write" and ".env*" in config.policy.secret_patterns
    path = tmp_path / "c.toml"
    path.write_text('[policy]\napproval_timeout = 30\nnetwork = false\ndefault_mode = "read-only"\n')
    config = load_config(path, env={"AGENT_SERVER_SANDBOX": "off", "AGENT_SERVER_APPROVAL_TIMEOUT": "2.5"})
    assert (config.policy.approval_timeout, config.policy.sandbox, config.policy.network) == (2.5, "off", False)
    assert config.policy.default_mode == "read-only"
    path.write_text('[policy]\nsandbox = "maybe"\n')
    with pytest.raises(ConfigError):
        load_config(path, env={})
    with pytest.raises(ConfigError):
        load_config(env={**env, "AGENT_SERVER_APPROVAL_TIMEOUT": "-1"})
