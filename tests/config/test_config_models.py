"""Config: several models, each with its profile, window and price (the session's model picker)."""

import pytest

from agent_server.config.load import ConfigError, load_config

TWO_MODELS = '''
profile = "custom"
base_url = "http://127.0.0.1:9/v1"
model = "small"
context_window = 8000

[[models]]
id = "small"
name = "Small and quick"

[[models]]
id = "big"
name = "Big"
context_window = 64000
price = { input = 3.0, output = 15.0 }

[[models]]
id = "deepseek-reasoner"
profile = "deepseek"
'''


def write(tmp_path, text):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return path


def test_models_list_the_default_first_then_the_others_with_their_own_provider(tmp_path):
    cfg = load_config(write(tmp_path, TWO_MODELS), env={"DEEPSEEK_API_KEY": "sk-ds"})
    assert [(c.id, c.name) for c in cfg.models] == [("small", "Small and quick"), ("big", "Big"),
                                                    ("deepseek-reasoner", "deepseek-reasoner")]
    small, big, reasoner = cfg.models
    assert (small.provider.base_url, small.provider.context_window) == ("http://127.0.0.1:9/v1", 8000)
    assert (big.provider.base_url, big.provider.model, big.provider.context_window) == (
        "http://127.0.0.1:9/v1", "big", 64000)
    assert (reasoner.provider.profile, reasoner.provider.base_url, reasoner.provider.api_key) == (
        "deepseek", "https://api.deepseek.com/v1", "sk-ds")
    assert reasoner.provider.reasoning_content == "echo" and reasoner.provider.context_window == 128_000
    assert cfg.agent.price_for("big").output == 15.0 and cfg.agent.price_for("small") is None


def test_provider_for_a_model_that_is_not_listed_keeps_the_default_endpoint(tmp_path):
    cfg = load_config(write(tmp_path, TWO_MODELS), env={})
    assert cfg.provider_for("big").context_window == 64000
    stray = cfg.provider_for("logged-under-an-old-config")
    assert (stray.model, stray.base_url) == ("logged-under-an-old-config", "http://127.0.0.1:9/v1")
    assert cfg.model_choice("logged-under-an-old-config") is None


def test_the_default_model_is_listed_even_without_a_models_table(tmp_path):
    cfg = load_config(env={"AGENT_SERVER_MODEL": "m1", "AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1",
                           "XDG_CONFIG_HOME": str(tmp_path)})
    assert [c.id for c in cfg.models] == ["m1"]


def test_no_model_configured_lists_none(tmp_path):
    assert load_config(env={"XDG_CONFIG_HOME": str(tmp_path)}).models == ()


@pytest.mark.parametrize("text, message", [
    ('[[models]]\nid = "a"\n[[models]]\nid = "a"\n', "listed twice"),
    ('[[models]]\nid = "a"\nprofile = "nope"\n', "unknown profile 'nope'"),
    ('[[models]]\nid = "a"\ncolour = "red"\n', "colour"),
    ('[[models]]\nid = "a"\ncontext_window = 0\n', "context_window"),
    ('models = "a"\n', "array of tables"),
])
def test_bad_models_tables_are_clear_config_errors(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(write(tmp_path, text), env={})


def test_a_price_for_cached_input_is_accepted_where_it_was_refused(tmp_path):
    """Named after the failure of issue 33: a price for cached input could not be configured."""
    text = ('model = "small"\n[agent]\nprice_per_million = { input = 0.27, cached_input = 0.07, output = 1.10 }\n'
            '[[models]]\nid = "big"\nprice = { input = 3.0, cached_input = 0.3, output = 15.0 }\n')
    cfg = load_config(write(tmp_path, text), env={})
    assert cfg.agent.price_for("small").cached_input == 0.07 and cfg.agent.price_for("big").cached_input == 0.3
    plain = load_config(write(tmp_path, 'model = "m"\n[agent]\nprice_per_million = { input = 1, output = 2 }\n'), env={})
    assert plain.agent.price_for("m").cached_input is None  # priced as input
    with pytest.raises(ConfigError):
        load_config(write(tmp_path, 'model = "m"\n[agent]\nprice_per_million = { input = 1, output = 2, '
                                    'cached_input = -1 }\n'), env={})
