"""The transcript validator accepts valid ACP conversations and pinpoints invalid messages."""

from __future__ import annotations

import copy
import json

import pytest
from support.acp_schema import (
    AGENT_TO_CLIENT as A2C,
)
from support.acp_schema import (
    CLIENT_TO_AGENT as C2A,
)
from support.acp_schema import (
    SchemaBindingError,
    build_bindings,
    load_schema,
    validate_transcript,
)

SID = "sess-1"


def c2a(message: dict) -> dict:
    return {"direction": C2A, "message": message}


def a2c(message: dict) -> dict:
    return {"direction": A2C, "message": message}


def good_transcript() -> list[dict]:
    """A plausible complete conversation, including a permission round-trip and an extension call."""
    return [
        c2a(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": 1,
                    "clientCapabilities": {
                        "fs": {"readTextFile": True, "writeTextFile": False},
                        "_meta": {"agentServer": {"version": 1, "applyWorkspaceEdit": True}},
                    },
                    "clientInfo": {"name": "t", "version": "1"},
                },
            }
        ),
        a2c(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "result": {
                    "protocolVersion": 1,
                    "agentInfo": {"name": "agent-server", "version": "0.1.0"},
                    "authMethods": [],
                    "agentCapabilities": {"promptCapabilities": {"embeddedContext": True}},
                },
            }
        ),
        c2a({"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": "/w", "mcpServers": []}}),
        a2c({"jsonrpc": "2.0", "id": 1, "result": {"sessionId": SID}}),
        c2a(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/prompt",
                "params": {"sessionId": SID, "prompt": [{"type": "text", "text": "hi"}]},
            }
        ),
        a2c(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": SID,
                    "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}},
                },
            }
        ),
        a2c(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": SID,
                    "update": {
                        "sessionUpdate": "tool_call",
                        "toolCallId": "t1",
                        "title": "Run `ls`",
                        "kind": "execute",
                        "status": "pending",
                    },
                },
            }
        ),
        # the agent's own request ids may collide with the client's: pairing is per direction
        a2c(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "session/request_permission",
                "params": {
                    "sessionId": SID,
                    "toolCall": {"toolCallId": "t1"},
                    "options": [{"optionId": "allow_once", "name": "Allow", "kind": "allow_once"}],
                },
            }
        ),
        c2a({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}),
        a2c({"jsonrpc": "2.0", "id": 1, "method": "_agent_server/apply_workspace_edit", "params": {"anything": 1}}),
        c2a({"jsonrpc": "2.0", "id": 1, "result": {"outcome": "applied"}}),
        a2c(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": SID,
                    "update": {
                        "sessionUpdate": "tool_call_update",
                        "toolCallId": "t1",
                        "status": "completed",
                        "content": [{"type": "diff", "path": "/w/a.py", "oldText": "x", "newText": "y"}],
                    },
                },
            }
        ),
        c2a({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": SID}}),
        a2c({"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "cancelled"}}),
    ]


def test_bindings_come_from_x_method_and_x_side():
    schema = load_schema()
    init_req = schema.binding("initialize", "request")
    assert (init_req.def_name, init_req.side, init_req.directions) == ("InitializeRequest", "agent", {C2A})
    assert schema.binding("initialize", "response").def_name == "InitializeResponse"
    assert schema.binding("initialize", "response").directions == {A2C}
    update = schema.binding("session/update", "notification")
    assert (update.def_name, update.side, update.directions) == ("SessionNotification", "client", {A2C})
    perm = schema.binding("session/request_permission", "response")
    assert (perm.def_name, perm.directions) == ("RequestPermissionResponse", {C2A})
    assert schema.binding("session/cancel", "notification").def_name == "CancelNotification"
    assert schema.binding("$/cancel_request", "notification").directions == {A2C, C2A}
    assert schema.binding("session/cancel", "request") is None
    # every def carrying x-method is bound
    annotated = {k for k, v in schema.schema["$defs"].items() if "x-method" in v}
    assert annotated == {b.def_name for b in schema.bindings.values()}


def test_inconsistent_x_side_is_rejected():
    schema = copy.deepcopy(load_schema().schema)
    schema["$defs"]["PromptRequest"]["x-side"] = "client"  # a client-sent request handled by the client?
    with pytest.raises(SchemaBindingError, match="PromptRequest"):
        build_bindings(schema)


def test_good_transcript_passes_and_returns_extensions():
    report = validate_transcript(good_transcript())
    assert report.ok
    assert report.checked == len(good_transcript()) - 2  # all but the extension request and its result
    assert [(s.kind, s.method) for s in report.extensions] == [
        ("request", "_agent_server/apply_workspace_edit"),
        ("response", "_agent_server/apply_workspace_edit"),
    ]


def test_raw_lines_are_accepted_instead_of_parsed_messages():
    entries = [{"direction": e["direction"], "raw": json.dumps(e["message"])} for e in good_transcript()]
    assert validate_transcript(entries).ok


def failure_of(entries: list[dict], **kwargs):
    report = validate_transcript(entries, collect=True, **kwargs)
    assert not report.ok, "expected a schema failure"
    with pytest.raises(AssertionError):
        report.raise_for_failures()
    return report.failures[0]


def test_unknown_session_update_kind_is_caught():
    entries = good_transcript()
    entries[5]["message"]["params"]["update"]["sessionUpdate"] = "agent_message_delta"
    failure = failure_of(entries)
    assert (failure.index, failure.direction, failure.method) == (5, A2C, "session/update")
    assert failure.path == "$.params.update.sessionUpdate"
    assert "unknown sessionUpdate 'agent_message_delta'" in failure.message


def test_bad_field_inside_a_known_update_kind_points_at_the_field():
    entries = good_transcript()
    del entries[11]["message"]["params"]["update"]["content"][0]["newText"]
    failure = failure_of(entries)
    assert failure.path == "$.params.update.content[0]"
    assert "'newText' is a required property" in failure.message


def test_initialize_result_without_protocol_version_is_caught():
    entries = good_transcript()
    del entries[1]["message"]["result"]["protocolVersion"]
    failure = failure_of(entries)
    assert (failure.index, failure.kind, failure.method, failure.path) == (1, "response", "initialize", "$.result")
    assert "'protocolVersion' is a required property" in failure.message
    assert "InitializeResponse" in failure.message


def test_prompt_response_with_bad_stop_reason_is_caught():
    entries = good_transcript()
    entries[-1]["message"]["result"]["stopReason"] = "aborted"
    failure = failure_of(entries)
    assert (failure.method, failure.path) == ("session/prompt", "$.result.stopReason")
    assert "'aborted'" in failure.message


def test_null_result_is_not_an_empty_result():
    entries = good_transcript()
    entries[3]["message"]["result"] = None
    assert failure_of(entries).method == "session/new"


def test_out_of_range_protocol_version_is_caught():
    entries = good_transcript()
    entries[1]["message"]["result"]["protocolVersion"] = 70000
    assert failure_of(entries).path == "$.result.protocolVersion"


def test_client_messages_are_checked_too():
    entries = good_transcript()
    entries[8]["message"]["result"] = {"outcome": {"outcome": "selected"}}  # optionId missing
    failure = failure_of(entries)
    assert (failure.direction, failure.method) == (C2A, "session/request_permission")
    # ...unless only the agent's side is checked
    assert validate_transcript(entries, check={A2C}).ok


def test_error_responses_are_checked_against_the_error_shape():
    ok = good_transcript()[:2] + [
        c2a({"jsonrpc": "2.0", "id": 5, "method": "nope/nope", "params": {}}),
        a2c({"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "Method not found"}}),
        a2c({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}),
    ]
    assert validate_transcript(ok, unknown_methods="skip").ok
    bad = copy.deepcopy(ok)
    bad[3]["message"]["error"]["code"] = "-32601"
    failure = failure_of(bad, unknown_methods="skip")
    assert (failure.kind, failure.path) == ("error", "$.error.code")
    bad = copy.deepcopy(ok)
    del bad[4]["message"]["error"]["message"]
    assert failure_of(bad, unknown_methods="skip").path == "$.error"


def test_unknown_methods_fail_unless_skipped():
    entries = [
        c2a({"jsonrpc": "2.0", "id": 9, "method": "session/frobnicate", "params": {}}),
        a2c({"jsonrpc": "2.0", "id": 9, "error": {"code": -32601, "message": "Method not found"}}),
    ]
    failure = failure_of(entries)
    assert (failure.path, failure.method) == ("$.method", "session/frobnicate")
    report = validate_transcript(entries, unknown_methods="skip")
    assert [s.reason for s in report.skipped] == ["unknown-method"]


def test_method_sent_by_the_wrong_side_is_caught():
    entries = [
        c2a(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": SID,
                    "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "x"}},
                },
            }
        )
    ]
    failure = failure_of(entries)
    assert "handled by the client" in failure.message


def test_notification_used_as_request_is_caught():
    entries = [c2a({"jsonrpc": "2.0", "id": 3, "method": "session/cancel", "params": {"sessionId": SID}})]
    assert "it is an ACP notification" in failure_of(entries).message


def test_response_pairing_failures():
    stray = [a2c({"jsonrpc": "2.0", "id": 42, "result": {}})]
    assert "unknown request id 42" in failure_of(stray).message
    # ids are type-sensitive: "0" does not answer 0
    typed = [
        c2a({"jsonrpc": "2.0", "id": 0, "method": "session/list", "params": {}}),
        a2c({"jsonrpc": "2.0", "id": "0", "result": {"sessions": []}}),
    ]
    assert "unknown request id '0'" in failure_of(typed).message


def test_request_without_params_is_validated_as_empty_object():
    assert validate_transcript([c2a({"jsonrpc": "2.0", "id": 1, "method": "session/list"})]).ok
    failure = failure_of([c2a({"jsonrpc": "2.0", "id": 1, "method": "session/new"})])
    assert "'cwd' is a required property" in failure.message


def test_envelope_violations():
    assert failure_of([a2c({"id": 1, "result": {}})]).path == "$.jsonrpc"
    assert "not JSON" in failure_of([{"direction": A2C, "raw": "Traceback (most recent call last):"}]).message
    assert "batch" in failure_of([a2c([{"jsonrpc": "2.0", "method": "x"}])]).message
    both = [
        c2a({"jsonrpc": "2.0", "id": 1, "method": "session/list"}),
        a2c({"jsonrpc": "2.0", "id": 1, "result": {"sessions": []}, "error": {"code": 1, "message": "m"}}),
    ]
    assert "both result and error" in failure_of(both).message


def test_collect_mode_reports_every_failure():
    entries = good_transcript()
    entries[1]["message"]["result"]["protocolVersion"] = "1"
    entries[-1]["message"]["result"]["stopReason"] = "nope"
    report = validate_transcript(entries, collect=True)
    assert [f.index for f in report.failures] == [1, len(entries) - 1]
    with pytest.raises(AssertionError, match=r"2 ACP schema violation\(s\)"):
        validate_transcript(entries)


def test_unknown_direction_is_a_usage_error():
    with pytest.raises(ValueError):
        validate_transcript([{"direction": "in", "message": {}}])


def test_the_unstable_schema_binds_session_fork_and_checks_it_while_the_stable_one_does_not_know_it():
    from support.acp_schema import load_unstable_schema

    fork = [c2a({"jsonrpc": "2.0", "id": 7, "method": "session/fork",
                 "params": {"sessionId": SID, "cwd": "/w", "mcpServers": []}}),
            a2c({"jsonrpc": "2.0", "id": 7, "result": {"sessionId": "sess-2"}})]
    assert load_schema().binding("session/fork", "request") is None
    assert not validate_transcript(fork, collect=True).ok
    assert validate_transcript(fork, schema=load_unstable_schema()).ok
    bad = copy.deepcopy(fork)
    del bad[1]["message"]["result"]["sessionId"]
    report = validate_transcript(bad, schema=load_unstable_schema(), collect=True)
    assert not report.ok and "sessionId" in str(report)
