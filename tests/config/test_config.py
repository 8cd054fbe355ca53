"""Config: file + environment + profiles, precedence, and keys that never leak."""

import re
import pytest

from agent_server.config.load import ConfigError, load_config


def test_no_config_at_all_resolves_to_custom_without_endpoint(tmp_path):
    cfg = load_config(None, env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg.provider.profile == "custom"
    assert cfg.provider.base_url is None and cfg.provider.api_key is None


def test_deepseek_key_alone_selects_the_deepseek_profile(tmp_path):
    cfg = load_config(env={"DEEPSEEK_API_KEY": "sk-ds", "XDG_CONFIG_HOME": str(tmp_path)})
    p = cfg.provider
    assert (p.profile, p.base_url, p.model, p.reasoning_content) == (
        "deepseek", "https://api.deepseek.com/v1", "deepseek-chat", "echo")
    assert p.api_key == "sk-ds" and p.api_key_source == "DEEPSEEK_API_KEY"


def test_openai_variables_are_honoured(tmp_path):
    cfg = load_config(env={"OPENAI_API_KEY": "sk-o", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1/",
                           "XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg.provider.base_url == "http://127.0.0.1:9/v1"
    assert cfg.provider.api_key == "sk-o"


def test_agent_server_variables_win_over_the_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('profile = "openai"\nmodel = "from-file"\napi_key = "file-key"\n'
                    '[agent]\nmax_steps_per_turn = 7\n')
    cfg = load_config(path, env={"AGENT_SERVER_MODEL": "from-env", "AGENT_SERVER_API_KEY": "env-key"})
    assert cfg.provider.model == "from-env"
    assert cfg.provider.api_key == "env-key"
    assert cfg.agent.max_steps_per_turn == 7
    assert cfg.provider.base_url == "https://api.openai.com/v1"


def test_custom_profile_table_in_the_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('profile = "box"\n[profiles.box]\nbase_url = "http://127.0.0.1:1234/v1"\n'
                    'model = "qwen"\ncontext_window = 8192\nkey_required = false\n')
    p = load_config(path, env={}).provider
    assert (p.profile, p.base_url, p.model, p.context_window, p.key_required) == (
        "box", "http://127.0.0.1:1234/v1", "qwen", 8192, False)


def test_local_profiles_need_no_key(tmp_path):
    for name in ("ollama", "vllm", "llama.cpp"):
        p = load_config(env={"AGENT_SERVER_PROFILE": name, "XDG_CONFIG_HOME": str(tmp_path)}).provider
        assert p.key_required is False and p.base_url.startswith("http://127.0.0.1:")


def test_api_key_never_appears_in_dumps_or_repr(tmp_path):
    cfg = load_config(env={"AGENT_SERVER_API_KEY": "sk-very-secret", "AGENT_SERVER_BASE_URL": "http://x/v1",
                           "XDG_CONFIG_HOME": str(tmp_path)})
    assert "sk-very-secret" not in repr(cfg)
    assert "sk-very-secret" not in cfg.model_dump_json()


@pytest.mark.parametrize("text, needle", [
    ("nonsense = 1\n", "unknown keys"),
    ("profile = \"nope\"\n", "unknown profile"),
    ("[agent]\nmax_steps_per_turn = 0\n", "max_steps_per_turn"),
    ("this is not toml", "cannot read config"),
])
def test_bad_config_files_fail_with_a_message_naming_the_problem(tmp_path, text, needle):
    path = tmp_path / "config.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_config(path, env={})


def test_explicit_missing_config_file_is_an_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.toml", env={})


def test_default_config_file_is_read_from_xdg_config_home(tmp_path):
    folder = tmp_path / "agent-server"
    folder.mkdir()
    (folder / "config.toml").write_text('model = "from-default-file"\nbase_url = "http://127.0.0.1:1/v1"\n')
    cfg = load_config(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg.provider.model == "from-default-file"
    assert cfg.source == str(folder / "config.toml")


def test_api_key_with_trailing_newline_is_stripped(tmp_path):
    p = load_config(env={"AGENT_SERVER_API_KEY": "sk-abc123\r\n", "AGENT_SERVER_BASE_URL": "http://127.0.0.1:1/v1",
                         "XDG_CONFIG_HOME": str(tmp_path)}).provider
    assert p.api_key == "sk-abc123"


@pytest.mark.parametrize("key", ["sk-ключ", "sk a b", "sk-\x00x"])
def test_api_key_with_odd_characters_is_a_config_error_that_does_not_echo_it(tmp_path, key):
    with pytest.raises(ConfigError) as info:
        load_config(env={"AGENT_SERVER_API_KEY": key, "AGENT_SERVER_BASE_URL": "http://127.0.0.1:1/v1",
                         "XDG_CONFIG_HOME": str(tmp_path)})
    assert "AGENT_SERVER_API_KEY" in str(info.value) and key not in str(info.value)


@pytest.mark.parametrize("url", ["api.deepseek.com/v1", "ftp://x/v1", "::not a url::", "http:///v1"])
def test_base_url_without_http_scheme_or_host_is_a_config_error(tmp_path, url):
    with pytest.raises(ConfigError, match="not an http"):
        load_config(env={"AGENT_SERVER_BASE_URL": url, "XDG_CONFIG_HOME": str(tmp_path)})


@pytest.mark.parametrize("value", ["abc", "128k", "-5", "0"])
def test_bad_context_window_variable_is_named_in_the_error(tmp_path, value):
    with pytest.raises(ConfigError, match="AGENT_SERVER_CONTEXT_WINDOW") as info:
        load_config(env={"AGENT_SERVER_CONTEXT_WINDOW": value, "XDG_CONFIG_HOME": str(tmp_path)})
    assert "config.toml" not in str(info.value)


def test_empty_agent_server_config_variable_means_unset(tmp_path):
    cfg = load_config(env={"AGENT_SERVER_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path)})
    assert cfg.source is None


def test_params_may_not_override_what_agent_server_sets(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('params = { model = "evil", temperature = 0.1 }\n')
    with pytest.raises(ConfigError, match="model"):
        load_config(path, env={})


def test_redact_url_hides_credentials_and_query_values():
    from agent_server.config.load import redact_url

    assert redact_url("http://user:pw@h:8/v1?api-key=Q1&x=2") == "http://***@h:8/v1?api-key=***&x=***"
    assert redact_url("https://api.deepseek.com/v1") == "https://api.deepseek.com/v1"


def test_an_unknown_profile_names_where_it_was_set(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('profile = "nosuch"\n')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))} \(profile\): unknown profile 'nosuch'; known: \["):
        load_config(path, env={})
    with pytest.raises(ConfigError, match=r"^AGENT_SERVER_PROFILE: unknown profile 'other'"):
        load_config(path, env={"AGENT_SERVER_PROFILE": "other"})
    path.write_text('[[models]]\nid = "a"\nprofile = "nope"\n')
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}: model 'a': unknown profile 'nope'"):
        load_config(path, env={})
