"""Issue 31 item 17: image prompts through the official TypeScript SDK 2.4.0 client.
``promptCapabilities.image`` is advertised when a configured model has ``vision = true``; an image
is stored content-addressed in the session folder, the log names it (never its base64), the request
carries it as an OpenAI ``image_url`` part, and the replay check of this folder rebuilds every
request byte for byte from the log and the folder. Bad input is refused clearly and nothing is lost."""

import base64
import hashlib
import json
import os
import struct
import subprocess
import sys
import zlib

import pytest
from support.ts_harness import NODE, harness_script
from support.acp_schema import validate_transcript

from agent_server.offline import OfflineEndpoint, text_stream
from agent_server.session import read_events



def png(width=2, height=2, seed=0) -> bytes:
    """A real PNG (RGB, no filter), pixels from ``seed``."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\x00" + bytes((seed + x + y) % 256 for x in range(width * 3)) for y in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def ts_harness():
    return harness_script()


def env_with(agent_env, tmp_path, config):
    path = tmp_path / "config.toml"
    path.write_text(config)
    return {**os.environ, **agent_env, "AGENT_SERVER_CONFIG": str(path)}


def harness(ts_harness, workspace, env, tmp_path, blocks, *extra, ok=True):
    transcript = tmp_path / "transcript.json"
    done = subprocess.run(
        [NODE, str(ts_harness), "--prompt", "-", "--prompt-blocks", json.dumps(blocks), "--cwd", str(workspace),
         "--transcript", str(transcript), *extra, "--", sys.executable, "-m", "agent_server"],
        capture_output=True, text=True, timeout=120, env=env, cwd=workspace,
    )
    assert (done.returncode == 0) is ok, done.stdout + done.stderr
    record = json.loads(transcript.read_text())
    report = validate_transcript(record["messages"], collect=True)
    assert not report.failures, report.failures
    return [json.loads(line) for line in done.stdout.splitlines()], record


def prompt_error(record):
    (answer,) = [m["message"] for m in record["messages"] if "error" in (m["message"] or {})]
    return answer["error"]


def test_an_image_is_stored_by_its_hash_named_in_the_log_and_sent_as_an_image_url_part(
        ts_harness, tmp_path, workspace, agent_env, agent_state_dir):
    image = png(seed=7)
    data = base64.b64encode(image).decode()
    blocks = [{"type": "text", "text": "What is in this picture?"}, {"type": "image", "mimeType": "image/png",
                                                                      "data": data}]
    with OfflineEndpoint.start_in_thread([text_stream("A tiny square.")]) as ep:
        env = env_with(agent_env, tmp_path, "vision = true\n")
        env["AGENT_SERVER_BASE_URL"] = ep.base_url
        lines, record = harness(ts_harness, workspace, env, tmp_path, blocks)
        (body,) = [r.json() for r in ep.requests]
    assert record["initialize"]["agentCapabilities"]["promptCapabilities"]["image"] is True
    assert lines[-1] == {"type": "stop", "stopReason": "end_turn"}
    assert body["messages"][-1] == {"role": "user", "content": [
        {"type": "text", "text": "What is in this picture?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}]}
    folder = agent_state_dir / "sessions" / record["sessionId"]
    digest = hashlib.sha256(image).hexdigest()
    assert (folder / "images" / digest).read_bytes() == image
    (user,) = [e for e in read_events(folder / "events.jsonl") if e.type == "user"]
    assert user.data["blocks"][1] == {"type": "image", "mimeType": "image/png", "sha256": digest, "bytes": len(image)}
    assert data not in (folder / "events.jsonl").read_text()  # the log names the image, never holds it


def test_a_model_without_vision_refuses_an_image_and_logs_nothing(ts_harness, tmp_path, workspace, agent_env,
                                                                   agent_state_dir):
    blocks = [{"type": "image", "mimeType": "image/png", "data": base64.b64encode(png()).decode()}]
    env = env_with(agent_env, tmp_path, "[agent]\nmax_steps_per_turn = 5\n")
    _, record = harness(ts_harness, workspace, env, tmp_path, blocks, ok=False)
    assert record["initialize"]["agentCapabilities"]["promptCapabilities"]["image"] is False
    error = prompt_error(record)
    assert error["code"] == -32602 and "the model test-model does not take images" in error["message"]
    folder = agent_state_dir / "sessions" / record["sessionId"]
    assert not (folder / "images").exists()
    assert [e.type for e in read_events(folder / "events.jsonl") if e.type in ("user", "turn/start")] == []


@pytest.mark.parametrize("block, words", [
    ({"mimeType": "image/bmp", "data": "Qk0="}, "unsupported image type 'image/bmp'"),
    ({"mimeType": "image/png", "data": "not base64!"}, "not valid base64"),
    ({"mimeType": "image/jpeg", "data": base64.b64encode(png()).decode()},
     "says it is image/jpeg but its bytes are PNG data"),
    ({"mimeType": "image/png", "data": base64.b64encode(png(64, 64)).decode()},
     "more than the limit of 200 bytes ([agent] max_image_bytes)"),
])
def test_a_bad_image_is_refused_clearly_and_nothing_is_stored(ts_harness, tmp_path, workspace, agent_env,
                                                              agent_state_dir, block, words):
    blocks = [{"type": "text", "text": "look"}, {"type": "image", **block}]
    env = env_with(agent_env, tmp_path, "vision = true\n[agent]\nmax_image_bytes = 200\n")
    _, record = harness(ts_harness, workspace, env, tmp_path, blocks, ok=False)
    error = prompt_error(record)
    assert error["code"] == -32602 and words in error["message"]
    assert error["data"]["errors"][0]["path"] == "prompt.1"
    folder = agent_state_dir / "sessions" / record["sessionId"]
    assert not (folder / "images").exists()
    assert not any(e.type == "user" for e in read_events(folder / "events.jsonl"))


async def test_a_fork_keeps_the_images_of_the_history_it_copies(acp_harness_factory, endpoint, workspace,
                                                                agent_state_dir, tmp_path):
    """The fork's requests resolve the copied history's image in the fork's own folder."""
    from support.acp_schema import load_unstable_schema
    from support.sessions import config_env

    image = png(seed=3)
    data = base64.b64encode(image).decode()
    endpoint.push(text_stream("a square"))
    endpoint.push(text_stream("still a square"))
    h = await acp_harness_factory(env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                       **config_env(tmp_path, "vision = true\n")},
                                  validate={"schema": load_unstable_schema()})
    await h.initialize()
    parent = (await h.new_session(str(workspace))).session_id
    await h.prompt(parent, [{"type": "text", "text": "see"}, {"type": "image", "mimeType": "image/png", "data": data}])
    child = (await h.request("session/fork", {"sessionId": parent, "cwd": str(workspace), "mcpServers": []}))["sessionId"]
    assert (await h.prompt(child, "and now?")).stop_reason == "end_turn"
    bodies = [r.json() for r in endpoint.requests if r.path.endswith("/chat/completions")]
    assert bodies[1]["messages"][1]["content"][1]["image_url"]["url"] == f"data:image/png;base64,{data}"
    digest = hashlib.sha256(image).hexdigest()
    assert (agent_state_dir / "sessions" / child / "images" / digest).read_bytes() == image
