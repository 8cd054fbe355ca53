"""``python -m agent_server.offline``: prints its URL first, serves the bundled demo or a
script file, records requests to JSONL as they arrive, stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_server.llm import (
    ChatClient,
    Finish,
    LLMError,
    ReasoningDelta,
    TextDelta,
    encode_body,
)
from agent_server.offline import DEMO_SCRIPT, load_script
from support.timeouts import HANG

DEMO_PROMPT = "Say hello and tell me what you are."


@pytest.fixture
def spawn() -> Iterator:
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> tuple[subprocess.Popen, str]:
        proc = subprocess.Popen([sys.executable, "-m", "agent_server.offline", "--port", "0",
                                 *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        procs.append(proc)
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), (
            url, proc.stderr.read() if proc.poll() is not None else "")
        return proc, url

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(HANG)
        proc.stdout.close()
        proc.stderr.close()


def demo_body() -> bytes:
    return encode_body({"model": "offline-demo", "stream": True,
                        "stream_options": {"include_usage": True},
                        "messages": [{"role": "user", "content": DEMO_PROMPT}]})


async def collect(url: str, body: bytes, key: str | None = "sk-secret-123"):
    client = ChatClient(url, key)
    try:
        return [e async for e in client.stream(body)]
    finally:
        await client.aclose()


async def test_cli_serves_the_demo_and_records_requests(spawn, tmp_path: Path):
    record = tmp_path / "requests.jsonl"
    proc, url = spawn("--record", str(record))
    body = demo_body()
    for _ in range(2):  # the demo answers every prompt the same way
        events = await collect(url, body)
        message = events[-1].message
        assert isinstance(events[-1], Finish)
        assert "offline demo endpoint" in message.content
        assert "not a real model" in message.content
        assert message.reasoning and message.finish_reason == "stop"
        assert sum(isinstance(e, TextDelta) for e in events) >= 5  # streamed in pieces
        assert any(isinstance(e, ReasoningDelta) for e in events)
    assert record.stat().st_mode & 0o777 == 0o600
    lines = record.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2
    first = json.loads(lines[0])
    assert first["method"] == "POST" and first["path"] == "/v1/chat/completions"
    assert first["body"].encode("utf-8") == body
    assert first["seq"] == 1 and json.loads(lines[1])["seq"] == 2
    # the API key is never written to disk
    assert first["headers"]["authorization"] == "<redacted>"
    assert "sk-secret-123" not in record.read_text(encoding="utf-8")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(HANG) == 0


async def test_cli_serves_a_script_file_then_the_default(spawn, tmp_path: Path, sse_dir):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"kind": "sse_file", "path": str(sse_dir / "mistral-tool-call-no-index.txt")}]))
    _, url = spawn("--script", str(script))
    events = await collect(url, b"{}")
    assert [(c.id, c.name) for c in events[-1].message.tool_calls] == [("gSIMJiOkT", "weather")]
    with pytest.raises(LLMError) as info:
        await collect(url, b"{}")
    assert info.value.code == "SERVER"
    assert "no scripted response left" in info.value.message


def test_cli_refuses_a_bad_script(tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('[{"kind": "nope"}]')
    done = subprocess.run([sys.executable, "-m", "agent_server.offline", "--script", str(bad)],
                          capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "kind" in done.stderr


def test_demo_script_is_labelled_and_streams_slowly_enough_to_see():
    raw = json.loads(DEMO_SCRIPT.read_text(encoding="utf-8"))
    assert "NOT a real model" in raw["description"]
    script = load_script("demo")
    (answer,) = script.responses
    assert script.loop and answer["kind"] == "sse" and answer["delay"] >= 0.02
    contents = [f["choices"][0]["delta"].get("content") for f in answer["frames"] if f["choices"]]
    assert len([c for c in contents if c]) >= 5
