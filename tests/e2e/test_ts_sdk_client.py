"""The official TypeScript ACP SDK client (clients/ts-harness) drives the real agent-server."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.ts_harness import NODE, harness_script
from support.acp_schema import validate_transcript

from agent_server.offline import OfflineEndpoint, text_stream

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def ts_harness():
    return harness_script()


def test_typescript_sdk_client_gets_streamed_answer_and_end_turn(ts_harness, tmp_path, workspace, agent_env):
    with OfflineEndpoint.start_in_thread([text_stream("Hello from the offline endpoint.", chunk_size=5, delay=0.03)]) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        transcript = tmp_path / "transcript.json"
        done = subprocess.run(
            [NODE, str(ts_harness), "--prompt", "hello", "--cwd", str(workspace), "--transcript", str(transcript),
             "--", sys.executable, "-m", "agent_server"],
            capture_output=True, text=True, timeout=120, env=env, cwd=workspace,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    chunks = [line["params"]["update"] for line in lines if line["type"] == "session/update"
              and line["params"]["update"]["sessionUpdate"] == "agent_message_chunk"]
    assert len(chunks) > 1
    assert "".join(c["content"]["text"] for c in chunks) == "Hello from the offline endpoint."
    assert lines[-1] == {"type": "stop", "stopReason": "end_turn"}
    record = json.loads(transcript.read_text())
    report = validate_transcript(record["messages"], collect=True)
    assert not report.failures, report.failures


def run_harness(ts_harness, workspace, env, tmp_path, prompt="hello", *extra):
    transcript = tmp_path / "transcript.json"
    done = subprocess.run(
        [NODE, str(ts_harness), "--prompt", prompt, "--cwd", str(workspace), "--transcript", str(transcript),
         *extra, "--", sys.executable, "-m", "agent_server"],
        capture_output=True, text=True, timeout=120, env=env, cwd=workspace,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    return lines, json.loads(transcript.read_text())


def test_tool_calls_carry_their_programmatic_name_through_the_typescript_sdk(ts_harness, tmp_path, workspace,
                                                                            agent_env):
    """Issue 31 item 13 (ACP 1.22 ``ToolCall.name``): every ``tool_call`` says which tool runs, beside its
    human title; the SDK 2.4.0 client parses it and the transcript validates against 1.29.x."""
    from agent_server.offline import tool_call_stream

    (workspace / "notes.txt").write_text("one\ntwo\n")
    script = [tool_call_stream([("r", "read", json.dumps({"path": "notes.txt"}))]), text_stream("read it")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        lines, record = run_harness(ts_harness, workspace, env, tmp_path, "read notes")
    calls = [line["params"]["update"] for line in lines if line["type"] == "session/update"
             and line["params"]["update"]["sessionUpdate"] == "tool_call"]
    assert [(c["name"], c["title"]) for c in calls] == [("read", "Read notes.txt")]
    assert lines[-1] == {"type": "stop", "stopReason": "end_turn"}
    report = validate_transcript(record["messages"], collect=True)
    assert not report.failures, report.failures


def test_message_and_thought_chunks_carry_a_message_id_from_the_log_through_the_typescript_sdk(
        ts_harness, tmp_path, workspace, agent_env, agent_state_dir):
    """Issue 31 item 13 (``messageId``): the chunks of one step's answer share one id, its thought
    another, both derived from the log (the step's ``step/start`` seq), so ``session/load`` replays
    the same ids (``history_updates``); the SDK 2.4.0 client parses them."""
    from agent_server.host.lifecycle import history_updates
    from agent_server.session import read_events

    script = [text_stream("Hello from the offline endpoint.", chunk_size=5, reasoning="Thinking it over.")]
    with OfflineEndpoint.start_in_thread(script) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        lines, record = run_harness(ts_harness, workspace, env, tmp_path, "hello")
    updates = [line["params"] for line in lines if line["type"] == "session/update"]
    ids = {kind: {u["update"].get("messageId") for u in updates if u["update"]["sessionUpdate"] == kind}
           for kind in ("agent_message_chunk", "agent_thought_chunk")}
    (text_id,), (thought_id,) = ids["agent_message_chunk"], ids["agent_thought_chunk"]
    assert text_id and thought_id and text_id != thought_id
    session_id = updates[0]["sessionId"]
    log = read_events(agent_state_dir / "sessions" / session_id / "events.jsonl")
    replayed = {u["sessionUpdate"]: u.get("messageId") for u in history_updates(log, [str(workspace)])}
    assert (replayed["agent_message_chunk"], replayed["agent_thought_chunk"]) == (text_id, thought_id)
    assert replayed["user_message_chunk"] not in (text_id, thought_id)
    report = validate_transcript(record["messages"], collect=True)
    assert not report.failures, report.failures


@pytest.mark.parametrize("notices", [True, False])
def test_mcp_problems_are_notices_for_a_client_that_takes_them_through_the_typescript_sdk(
        ts_harness, tmp_path, workspace, agent_env, notices):
    """Issue 31 item 14 (ACP 1.25 ``notice``, the MCP part): a client that sets
    ``clientCapabilities.session.notices`` is told of an ``mcpServers`` entry that cannot run with a
    ``notice`` (warning); any other gets the chat-text fallback, as before. Validated against 1.29.x."""
    caps = {"fs": {"readTextFile": False, "writeTextFile": False}, **({"session": {"notices": {}}} if notices else {})}
    servers = [{"type": "sse", "name": "old", "url": "http://127.0.0.1:9/sse", "headers": []}]
    with OfflineEndpoint.start_in_thread([text_stream("ok")]) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url}
        lines, record = run_harness(ts_harness, workspace, env, tmp_path, "hi", "--client-capabilities",
                                    json.dumps(caps), "--mcp-servers", json.dumps(servers))
    updates = [line["params"]["update"] for line in lines if line["type"] == "session/update"]
    told = [u for u in updates if u["sessionUpdate"] == "notice"]
    chat = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    if notices:
        assert [(n["severity"], "SSE transport is not supported" in n["title"]) for n in told] == [("warning", True)]
        assert "SSE transport" not in chat
    else:
        assert told == [] and "[agent-server] MCP server 'old': SSE transport is not supported" in chat
    report = validate_transcript(record["messages"], collect=True)
    assert not report.failures, report.failures


ASKING_SERVER = ROOT / "tests" / "mcp" / "asking_server.py"


@pytest.mark.parametrize("elicitation", [True, False])
def test_an_mcp_servers_elicitation_was_declined_although_the_client_takes_elicitations(
        ts_harness, tmp_path, workspace, agent_env, elicitation):
    """Issue 31 item 12: an MCP server's elicitation (a real MCPServer in a subprocess, asking in the
    SDK's resolver way, which works on every protocol version) reaches a client that advertises
    ``clientCapabilities.elicitation.form`` as ACP 1.29's ``elicitation/create`` (session-scoped, the
    message naming the server), and the user's answer goes back to the server. A client without the
    capability is not offered it: the server's own error says so, and the model reads it. Validated
    against 1.29.x."""
    from agent_server.offline import tool_call_stream

    caps = {"fs": {"readTextFile": False, "writeTextFile": False}, **({"elicitation": {"form": {}}} if elicitation else {})}
    servers = [{"name": "asking", "command": sys.executable, "args": [str(ASKING_SERVER)], "env": []}]
    script = [tool_call_stream([("c", "mcp__asking__ask_name", "{}")]), text_stream("done")]
    config = tmp_path / "config.toml"
    config.write_text("[agent]\nmcp_start_wait = 120\n")  # a loaded machine starts the server slowly
    with OfflineEndpoint.start_in_thread(script) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_CONFIG": str(config)}
        lines, record = run_harness(ts_harness, workspace, env, tmp_path, "ask me", "--client-capabilities",
                                    json.dumps(caps), "--mcp-servers", json.dumps(servers), "--permission",
                                    "allow_once", "--elicitation",
                                    json.dumps({"action": "accept", "content": {"name": "Ada"}}))
        result = [m["content"] for m in ep.requests[-1].json()["messages"] if m["role"] == "tool"]
    asked = [line["params"] for line in lines if line["type"] == "elicitation/create"]
    assert lines[-1] == {"type": "stop", "stopReason": "end_turn"}
    if elicitation:
        (params,) = asked
        assert params["mode"] == "form" and params["sessionId"] == record["sessionId"]
        assert params["message"] == "MCP server 'asking' asks: Your name, please?"
        assert list(params["requestedSchema"]["properties"]) == ["name"]
        assert len(result) == 1 and result[0].startswith("hello Ada"), result
    else:
        assert asked == []
        assert len(result) == 1 and "did not declare the form elicitation capability" in result[0], result
    report = validate_transcript(record["messages"], collect=True)
    assert not report.failures, report.failures


@pytest.mark.parametrize("takes", [True, False])
def test_retry_and_compaction_notices_reached_a_notice_taking_client_only_as_chat_text(
        ts_harness, tmp_path, workspace, agent_env, takes):
    """Issue 31 item 14: only MCP problems were ``notice`` updates. Now every notice of the server
    (here a retried request) is an ACP ``notice`` to a client that sets
    ``clientCapabilities.session.notices``, and a compaction is a ``compaction_update`` pair
    (``in_progress``, then ``completed`` with the summary) to one that sets ``session.compaction``
    instead of its chat line; any other client gets the chat text, as before. Validated against
    1.29.x."""
    from agent_server.offline import tool_call_stream

    summary = "Task: rename the helper. Files a–c read."
    for name in "abc":
        (workspace / f"{name}.txt").write_text(f"{name} line with the helper\n" * 60)
    script = [{"kind": "error", "status": 429, "json": {"error": {"message": "slow down"}}},
              *[tool_call_stream([(f"r{i}", "read", json.dumps({"path": f"{n}.txt"}))]) for i, n in enumerate("abc")],
              text_stream(summary), text_stream("Renamed."), text_stream("Again.")]
    caps = {"fs": {"readTextFile": False, "writeTextFile": False},
            **({"session": {"notices": {}, "compaction": {}}} if takes else {})}
    with OfflineEndpoint.start_in_thread(script) as ep:
        env = {**os.environ, **agent_env, "AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_CONTEXT_WINDOW": "4000"}
        lines, record = run_harness(ts_harness, workspace, env, tmp_path, "rename the helper",
                                    "--client-capabilities", json.dumps(caps))
        # session/load replays them as they were shown live
        (tmp_path / "load").mkdir()
        loaded, load_record = run_harness(ts_harness, workspace, env, tmp_path / "load", "again",
                                          "--client-capabilities", json.dumps(caps), "--load", record["sessionId"])
    replayed = [line["params"]["update"] for line in loaded if line["type"] == "session/update"]
    replayed_kinds = {k: [u for u in replayed if u["sessionUpdate"] == k] for k in ("notice", "compaction_update")}
    assert lines[-1] == {"type": "stop", "stopReason": "end_turn"}
    updates = [line["params"]["update"] for line in lines if line["type"] == "session/update"]
    notices = [u for u in updates if u["sessionUpdate"] == "notice"]
    compactions = [u for u in updates if u["sessionUpdate"] == "compaction_update"]
    chat = "".join(u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk")
    if takes:
        assert [(n["severity"], n["title"].startswith("The model request failed (rate limited, HTTP 429)"))
                for n in notices] == [("warning", True)], notices
        assert [c["status"] for c in compactions] == ["in_progress", "completed"]
        assert compactions[0]["compactionId"] == compactions[1]["compactionId"]
        assert compactions[1]["summary"] == [{"type": "text", "text": summary}]
        assert "[agent-server]" not in chat and chat.endswith("Renamed.")
        assert [n["title"] for n in replayed_kinds["notice"]] == [n["title"] for n in notices]
        assert [(c["compactionId"], c["status"], c["summary"]) for c in replayed_kinds["compaction_update"]] == [
            (compactions[1]["compactionId"], "completed", compactions[1]["summary"])]
    else:
        assert notices == [] and compactions == []
        assert "[agent-server] The model request failed (rate limited, HTTP 429)" in chat
        assert "[agent-server] The conversation history was compacted" in chat
        assert replayed_kinds == {"notice": [], "compaction_update": []}
    for messages in (record["messages"], load_record["messages"]):
        report = validate_transcript(messages, collect=True)
        assert not report.failures, report.failures
