"""Issue 31 item 15, the parts under the wire: a client's system prompt parsed (``systemPrompt``,
``_meta.systemPrompt``), rendered into the system text, and kept or replaced as a stable head."""

import pytest

from agent_server.agent.header import client_told, context_data, header_note, kept_header
from agent_server.agent.prefix import PLANNED
from agent_server.prompt import PERSONA, TOOL_GUIDANCE, PromptEnvironment, render_system_prompt
from agent_server.server.acp.fast_session import plain_request
from agent_server.server.acp.models import SystemPromptError, client_system_prompt
from agent_server.session import EventLog


def blocks(*texts):
    return [{"type": "text", "text": t} for t in texts]


def test_system_prompt_param_is_read_in_either_mode_and_text_blocks_are_joined():
    assert client_system_prompt({"systemPrompt": {"mode": "append", "content": blocks("a", "b")}}) == {
        "mode": "append", "text": "a\n\nb", "source": "systemPrompt"}
    assert client_system_prompt({"systemPrompt": {"mode": "override", "content": blocks("x")}})["mode"] == "override"
    assert client_system_prompt({"systemPrompt": None}) is None and client_system_prompt({}) is None
    # the schema's field wins over the older _meta one
    both = {"systemPrompt": {"mode": "append", "content": blocks("new")}, "_meta": {"systemPrompt": "old"}}
    assert client_system_prompt(both)["text"] == "new"


@pytest.mark.parametrize("value, path, words", [
    ({"mode": "_custom", "content": blocks("x")}, "systemPrompt.mode", "unsupported systemPrompt mode '_custom'"),
    ({"mode": "future", "content": blocks("x")}, "systemPrompt.mode", "unsupported systemPrompt mode 'future'"),
    ({"content": blocks("x")}, "systemPrompt.mode", "unsupported systemPrompt mode None"),
    ({"mode": "append", "content": []}, "systemPrompt.content", "non-empty array"),
    ({"mode": "append"}, "systemPrompt.content", "non-empty array"),
    ({"mode": "append", "content": [{"type": "image", "data": "AA==", "mimeType": "image/png"}]},
     "systemPrompt.content.0", "unsupported systemPrompt content block 'image'"),
    ({"mode": "append", "content": [{"type": "text"}]}, "systemPrompt.content.0", "only text blocks"),
    ("be nice", "systemPrompt", "must be an object"),
])
def test_a_system_prompt_that_cannot_be_applied_is_an_error_naming_the_field(value, path, words):
    with pytest.raises(SystemPromptError) as raised:
        client_system_prompt({"systemPrompt": value})
    assert raised.value.path == path and words in str(raised.value)


def test_meta_system_prompt_string_overrides_and_append_object_appends():
    assert client_system_prompt({"_meta": {"systemPrompt": "X"}}) == {
        "mode": "override", "text": "X", "source": "_meta.systemPrompt"}
    assert client_system_prompt({"_meta": {"systemPrompt": {"append": "Y", "other": 1}}}) == {
        "mode": "append", "text": "Y", "source": "_meta.systemPrompt"}
    assert client_system_prompt({"_meta": {"systemPrompt": ""}}) is None
    for bad in (3, ["x"], {"replace": "x"}):
        with pytest.raises(SystemPromptError, match="_meta.systemPrompt must be a string"):
            client_system_prompt({"_meta": {"systemPrompt": bad}})


def test_session_new_with_a_system_prompt_is_left_to_the_full_server(tmp_path):
    """The pre-asyncio fast path would answer it and drop the prompt: it never takes one."""
    plain = {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp_path), "mcpServers": []}}
    import json

    assert plain_request(json.dumps(plain).encode()) == (1, [str(tmp_path)])
    for extra in ({"systemPrompt": {"mode": "append", "content": blocks("x")}},
                  {"_meta": {"systemPrompt": "x"}}):
        line = json.dumps({**plain, "params": {**plain["params"], **extra}}).encode()
        assert plain_request(line) is None


ENV = PromptEnvironment(roots=("/w",), os_name="Linux", shell="/bin/sh", date="2026-12-06", tool_names=("read",),
                        instructions=({"path": "/w/AGENTS.md", "sha256": "ab", "text": "Use tabs."},))


def test_override_replaces_persona_and_guidance_and_append_comes_last():
    ours = render_system_prompt(ENV)
    appended = render_system_prompt(PromptEnvironment(**{**ENV.__dict__, "client": ("append", "Be brief.")}))
    assert appended == ours + "\n# Instructions from the client\nBe brief.\n"
    replaced = render_system_prompt(PromptEnvironment(**{**ENV.__dict__, "client": ("override", "Be a pirate.")}))
    assert replaced.startswith("Be a pirate.\n\n# Environment\n- Working directory (first workspace root): /w\n")
    assert PERSONA not in replaced and TOOL_GUIDANCE not in replaced
    assert "You can call these tools: read." in replaced and "Use tabs." in replaced


def new_log(tmp_path):
    return EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w", "additional_directories": []})


def header(log, context):
    return log.append("request/header", {"system": "S", "model": "m", "params": {}, "tools": [],
                                         "reasoning_content": "drop", "context": context})


def prompt(log, mode, text):
    return log.append("client/system_prompt", {"mode": mode, "text": text, "source": "systemPrompt", "by": "t"})


def test_a_changed_client_prompt_keeps_the_head_in_append_mode_and_renders_anew_when_override_is_involved(tmp_path):
    for before, after, kept in [("append", "append", True), ("append", "override", False),
                                ("override", "override", False), ("override", "append", False), (None, "append", True),
                                (None, "override", False)]:
        log = new_log(tmp_path / f"{before}-{after}")
        first = prompt(log, before, "one") if before else None
        told = context_data("workspace-write", True, [], first.data if first else None)
        found = header(log, told)
        assert kept_header(log.events, ["/w"], latest=log.latest) is found  # nothing changed since
        now = prompt(log, after, "two")
        expected = found if kept else None
        assert kept_header(log.events, ["/w"], latest=log.latest) is expected, (before, after)
        assert kept_header(log.events, ["/w"]) is expected  # walking the events: the same
        if kept:
            context = context_data("workspace-write", True, [], now.data)
            note = header_note(found, context, "m", [], latest=log.latest)
            assert note["changes"] == ["client"]
            assert note["text"].endswith("# Instructions from the client\ntwo\n")
            assert context["client"] == client_told(now.data) != told.get("client")


def test_the_same_client_prompt_again_tells_nothing(tmp_path):
    log = new_log(tmp_path)
    first = prompt(log, "append", "one")
    context = context_data("workspace-write", True, [], first.data)
    found = header(log, context)
    assert header_note(found, context, "m", [], latest=log.latest) is None
    assert "system_prompt" in PLANNED
