"""The `agent-server login` dialogue (``cli.login.Login``) with scripted answers against the real
offline endpoint: what it asks, what it refuses, what it stores."""

from __future__ import annotations

import json
from functools import partial

import pytest
from support.timeouts import HANG

from agent_server.config import credentials
from agent_server.config.load import load_config
from agent_server.cli.login import Cancelled, Login, check_key
from agent_server.offline import OfflineEndpoint


@pytest.fixture
def env(tmp_path, monkeypatch):
    values = {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    for name in ("AGENT_SERVER_API_KEY", "AGENT_SERVER_PROFILE", "AGENT_SERVER_MODEL", "AGENT_SERVER_BASE_URL",
                 "AGENT_SERVER_CONFIG", "OPENAI_API_KEY", "OPENAI_BASE_URL", "DEEPSEEK_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values


def dialogue(answers: list[str], secrets: list[str]):
    said: list[str] = []
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return answers.pop(0)

    def ask_secret(prompt: str) -> str:
        asked.append(prompt)
        return secrets.pop(0)

    return ask, ask_secret, said.append, asked, said


def login(env, ask, secret, say) -> Login:
    """The dialogue, its one check request waited for as long as a hang takes (``HANG``), not the
    15 s a person is given (``CHECK_TIMEOUT``): on a loaded machine that budget ran out once, the
    check said the endpoint did not answer, and the dialogue took the next answer for "Store it
    anyway?" (last session's flake of the first test below)."""
    return Login(load_config(env=env), ask=ask, ask_secret=secret, say=say, check=partial(check_key, timeout=HANG))


def test_custom_asks_the_base_url_and_a_model_the_endpoint_does_not_list_needs_a_yes(env):
    with OfflineEndpoint.start_in_thread([], api_key="sk-1") as ep:
        ask, secret, say, asked, said = dialogue(["custom", "not a url", ep.base_url, "my-model", "n"], ["sk-1"])
        with pytest.raises(Cancelled):
            login(env, ask, secret, say).run()
        assert any("not an http(s) URL" in s for s in said), said
        assert any("does not list the model 'my-model'" in s and "offline-model" in s for s in said), said
        assert not credentials.credentials_path(env).exists()

        ask, secret, say, asked, said = dialogue(["custom", ep.base_url, "offline-model"], ["sk-1"])
        assert login(env, ask, secret, say).run() == 0, said
    stored = json.loads(credentials.credentials_path(env).read_text())
    assert stored["profile"] == "custom"
    assert stored["profiles"]["custom"] == {"model": "offline-model", "base_url": ep.base_url,
                                            "key_store": "file", "api_key": "sk-1"}
    p = load_config(env=env).provider
    assert (p.profile, p.base_url, p.model, p.api_key) == ("custom", ep.base_url, "offline-model", "sk-1")


def test_a_profile_that_needs_a_key_asks_again_for_an_empty_or_mangled_one(env):
    ask, secret, say, asked, said = dialogue(["openai"], ["", "sk 1", ""])
    with pytest.raises(Cancelled):
        Login(load_config(env=env), ask=ask, ask_secret=secret, say=say).run()
    assert said.count("  openai needs a key") == 2 and any("spaces" in s for s in said)
    assert [a for a in asked if a.startswith("API key")] == ["API key for openai (typing is hidden): "] * 3


def test_login_with_no_key_said_the_endpoint_accepted_the_key_and_took_a_base_url_without_v1_unsaid(env):
    """Newcomer 5's finding 9e: Enter at the key question (the endpoint needs none) gave "The
    endpoint accepted the key" — there was no key; a base URL typed without ``/v1`` was stored
    with no hint, though every example ends in it."""
    with OfflineEndpoint.start_in_thread([]) as ep:
        root = ep.base_url.removesuffix("/v1")
        ask, secret, say, asked, said = dialogue(["custom", root, "offline-model", "y"], [""])
        login(env, ask, secret, say).run()
        assert f"  note: no path after the host; OpenAI-compatible base URLs usually end in /v1 (e.g. {root}/v1)" in said
        ask, secret, say, asked, said = dialogue(["custom", ep.base_url, "offline-model"], [""])
        assert login(env, ask, secret, say).run() == 0, said
        assert f"The endpoint answered without a key ({ep.base_url}/models: HTTP 200)." in said, said
        assert not any("accepted the key" in s or "no path after the host" in s for s in said), said
