"""Issue 31 item 17 under the wire: prompt images checked, stored by their hash, projected as
references that resolve to the stored bytes, counted in the estimate by a per-image figure, and
replayed on load."""

import base64
import hashlib
import json

import pytest

from agent_server.agent.budget import estimate_tokens
from agent_server.agent.replay import logged_requests
from agent_server.agent.request import transcript_block
from agent_server.agent.request_memo import RequestMemo
from agent_server.config.load import load_config
from agent_server.config.resolve import vision_configured
from agent_server.host.lifecycle import history_updates
from agent_server.session import EventLog, derive_messages
from agent_server.session.images import ImageError, ImageMissing, ImageStore, check_image, image_ref

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40
SAMPLES = {"image/png": PNG, "image/jpeg": b"\xff\xd8\xff\xe0" + b"j" * 30, "image/gif": b"GIF89a" + b"g" * 30,
           "image/webp": b"RIFF\x10\x00\x00\x00WEBPVP8 " + b"w" * 30}


@pytest.mark.parametrize("mime", sorted(SAMPLES))
def test_each_supported_type_is_read_back_exactly(mime):
    raw = SAMPLES[mime]
    assert check_image(mime, base64.b64encode(raw).decode(), 1 << 20) == raw


def test_bad_images_are_refused_with_what_is_wrong():
    good = base64.b64encode(PNG).decode()
    for mime, data, words in [("image/svg+xml", good, "unsupported image type 'image/svg+xml'"),
                              (None, good, "unsupported image type None"),
                              ("image/png", "", "has no data"), ("image/png", 5, "has no data"),
                              ("image/png", good[:-3] + "!!=", "not valid base64"),
                              ("image/png", base64.b64encode(b"plain text").decode(), "bytes are not a PNG"),
                              ("image/gif", good, "says it is image/gif but its bytes are PNG data"),
                              ("image/png", good, "more than the limit of 100 bytes")]:
        with pytest.raises(ImageError, match=words.replace("(", r"\(").replace("+", r"\+")):
            check_image(mime, data, 100 if "limit" in words else 1 << 20)


def test_the_store_keeps_one_copy_by_hash_and_resolves_only_real_references(tmp_path):
    store = ImageStore(tmp_path)
    digest = store.put(PNG)
    assert digest == hashlib.sha256(PNG).hexdigest() and store.put(PNG) == digest
    assert sorted(p.name for p in store.path.iterdir()) == [digest]
    ref = image_ref("image/png", digest)
    fake = ref["image_url"]["url"]  # the reference's text in a user's text or a tool result: left alone
    message = {"role": "user", "content": [{"type": "text", "text": f'"image_url":{{"url":"{fake}"}}'}, ref]}
    body = json.dumps({"messages": [message]}, separators=(",", ":")).encode()
    resolved = json.loads(store.resolve(body))["messages"][0]["content"]
    assert resolved[0] == message["content"][0]
    assert resolved[1] == {"type": "image_url", "image_url": {
        "url": "data:image/png;base64," + base64.b64encode(PNG).decode()}}
    (store.path / digest).write_bytes(PNG + b"x")
    with pytest.raises(ImageMissing, match="was changed"):
        store.resolve(body)


def image_log(tmp_path, image=PNG):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w", "additional_directories": []})
    digest = ImageStore(log.path.parent).put(image)
    log.append("request/header", {"system": "S", "model": "m", "params": {}, "tools": [],
                                  "reasoning_content": "drop"})
    log.append("user", {"turn": 1, "content": "see", "blocks": [
        {"type": "text", "text": "see"}, {"type": "image", "mimeType": "image/png", "sha256": digest,
                                          "bytes": len(image)}]})
    return log, digest


def test_the_projection_references_the_image_and_replay_resolves_it(tmp_path):
    log, digest = image_log(tmp_path)
    (message,) = derive_messages(log.events)
    assert message == {"role": "user", "content": [{"type": "text", "text": "see"}, image_ref("image/png", digest)]}
    assert transcript_block(message) == "[user]\nsee\n[an image the user attached]"
    log.append("step/start", {"turn": 1, "step": 1})
    (request,) = logged_requests(log.events, images=ImageStore(log.path.parent).resolve)
    assert base64.b64encode(PNG) in request.body and b"agent-server-image:" not in request.body


def test_an_image_counts_by_its_figure_in_the_estimate_never_by_its_base64(tmp_path):
    big = b"\x89PNG\r\n\x1a\n" + bytes(200_000)
    log, _ = image_log(tmp_path, big)
    without = estimate_tokens(log.events, 4.0, None, 0)
    with_figure = estimate_tokens(log.events, 4.0, None, 1_600)
    assert with_figure - without == 1_600 and with_figure < 2_000  # 266,680 characters of base64 never count
    assert estimate_tokens(log.events, 4.0, RequestMemo(), 1_600) == with_figure


def test_a_load_shows_the_stored_image_again_or_names_it_when_gone(tmp_path):
    log, digest = image_log(tmp_path)
    store = ImageStore(log.path.parent)
    shown = [u["content"] for u in history_updates(log.events, ["/w"], images=store.base64)]
    assert shown == [{"type": "text", "text": "see"},
                     {"type": "image", "mimeType": "image/png", "data": base64.b64encode(PNG).decode()}]
    (store.path / digest).unlink()
    shown = [u["content"] for u in history_updates(log.events, ["/w"], images=store.base64)]
    assert shown[1] == {"type": "text", "text": f"[image image/png, {len(PNG)} bytes: no longer stored]"}


@pytest.mark.parametrize("text, accepts", [
    ("", False), ("model = \"m\"\n", False), ("vision = true\nmodel = \"m\"\n", True),
    ("model = \"m\"\n[[models]]\nid = \"m\"\n[[models]]\nid = \"eyes\"\nvision = true\n", True),
    ("model = \"m\"\n[[models]]\nid = \"eyes\"\nvision = false\n", False),
])
def test_the_fast_initialize_advertises_images_as_the_loaded_config_does(tmp_path, text, accepts):
    path = tmp_path / "config.toml"
    path.write_text(text)
    env = {"AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1"}
    assert load_config(path, env).accepts_images is accepts
    assert vision_configured(path, env) is accepts
