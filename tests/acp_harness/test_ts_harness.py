"""The TypeScript-SDK harness (clients/ts-harness/run.mjs) drives an agent and records a valid transcript."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from support.acp_schema import validate_transcript
from support.transcript import AGENT_TO_CLIENT, CLIENT_TO_AGENT

HARNESS_DIR = Path(__file__).resolve().parents[2] / "clients" / "ts-harness"
RUN = HARNESS_DIR / "run.mjs"
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed (CI has it: this test must run there)")


@pytest.fixture(scope="module")
def ts_harness() -> Path:
    """The harness with its dependencies installed (``npm ci`` from the lockfile if needed)."""
    if not (HARNESS_DIR / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        npm = shutil.which("npm")
        assert npm, "node is installed but npm is not: cannot install clients/ts-harness"
        done = subprocess.run(
            [npm, "ci", "--prefix", str(HARNESS_DIR), "--no-audit", "--no-fund"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"npm ci failed:\n{done.stdout}\n{done.stderr}"
    return RUN


def run_harness(
    ts_harness: Path, agent: list[str], *args: str, cwd: Path, timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [NODE, str(ts_harness), *args, "--", *agent], capture_output=True, text=True, timeout=timeout, cwd=cwd
    )


def test_prompt_round_trip(ts_harness, echo_agent_command, tmp_path, workspace):
    transcript_file = tmp_path / "transcript.json"
    done = run_harness(
        ts_harness,
        echo_agent_command,
        "--prompt",
        "hi from node",
        "--transcript",
        str(transcript_file),
        cwd=workspace,
    )
    assert done.returncode == 0, done.stderr

    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert [line["type"] for line in lines] == ["session/update", "session/update", "stop"]
    assert "".join(line["params"]["update"]["content"]["text"] for line in lines[:2]) == "echo: hi from node"
    assert lines[-1] == {"type": "stop", "stopReason": "end_turn"}

    doc = json.loads(transcript_file.read_text())
    assert doc["stopReason"] == "end_turn" and doc["error"] is None
    assert doc["cwd"] == str(workspace)
    assert doc["agentExit"]["code"] == 0
    messages = doc["messages"]
    assert [(m["direction"], m["message"].get("method")) for m in messages] == [
        (CLIENT_TO_AGENT, "initialize"),
        (AGENT_TO_CLIENT, None),
        (CLIENT_TO_AGENT, "session/new"),
        (AGENT_TO_CLIENT, None),
        (CLIENT_TO_AGENT, "session/prompt"),
        (AGENT_TO_CLIENT, "session/update"),
        (AGENT_TO_CLIENT, "session/update"),
        (AGENT_TO_CLIENT, None),
    ]
    assert messages[2]["message"]["params"]["cwd"] == str(workspace)
    assert all(json.loads(m["raw"]) == m["message"] for m in messages)
    assert all(a["t"] <= b["t"] for a, b in zip(messages, messages[1:], strict=False))
    assert validate_transcript(messages).ok


def test_permission_and_extension_capabilities(ts_harness, echo_agent_command, tmp_path, workspace):
    transcript_file = tmp_path / "t.json"
    done = run_harness(
        ts_harness,
        echo_agent_command,
        "--prompt",
        "/permission",
        "--permission",
        "allow_once",
        "--agent-server-ext",
        "--transcript",
        str(transcript_file),
        cwd=workspace,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(transcript_file.read_text())
    caps = doc["messages"][0]["message"]["params"]["clientCapabilities"]
    assert caps["_meta"]["agentServer"]["positionEncodings"] == ["utf-16", "utf-8"]
    answers = [m for m in doc["messages"] if m["direction"] == CLIENT_TO_AGENT and "result" in m["message"]]
    assert [a["message"]["result"] for a in answers] == [{"outcome": {"outcome": "selected", "optionId": "allow_once"}}]
    assert validate_transcript(doc["messages"]).ok


def test_agent_death_exits_1_with_stderr_tail(ts_harness, echo_agent_command, tmp_path, workspace):
    transcript_file = tmp_path / "t.json"
    done = run_harness(
        ts_harness, echo_agent_command, "--prompt", "/exit", "--transcript", str(transcript_file), cwd=workspace
    )
    assert done.returncode == 1
    assert "exiting on request" in done.stderr
    doc = json.loads(transcript_file.read_text())
    assert doc["stopReason"] is None and doc["error"]
    assert doc["agentExit"]["code"] == 3


def test_usage_errors_exit_2(ts_harness, workspace):
    done = subprocess.run(
        [NODE, str(ts_harness), "--prompt", "x"], capture_output=True, text=True, timeout=30, cwd=workspace
    )
    assert done.returncode == 2 and "after --" in done.stderr


def test_missing_agent_binary_exits_1(ts_harness, workspace):
    done = run_harness(
        ts_harness, [str(workspace / "no-such-agent")], "--prompt", "x", "--timeout", "10", cwd=workspace
    )
    assert done.returncode == 1
    assert json.loads(done.stdout.splitlines()[-1])["type"] == "error"
