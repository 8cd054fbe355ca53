"""Issue 31 item 16 under the wire: a model's ``reasoning_effort`` levels and switches read from
the config, checked, logged as ``config_option/changed`` and turned into request parameters; a
change of the parameters is a break named ``config_option``."""

import pytest

from agent_server.config.load import ConfigError, load_config
from agent_server.host.options import OptionError, option_values, options_view, request_params, set_option
from agent_server.session import EventLog

CONFIG = '''
profile = "custom"
base_url = "http://127.0.0.1:9/v1"
model = "r1"

[[models]]
id = "r1"
reasoning_effort = ["low", "high"]
reasoning_effort_param = "effort"

[models.switches.thinking]
on = { enable_thinking = true }
default = true

[[models]]
id = "plain"
'''


def load(tmp_path, text=CONFIG):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return load_config(path, env={})


def test_levels_and_switches_are_the_models_own_and_a_plain_model_has_none(tmp_path):
    config = load(tmp_path)
    r1, plain = config.models
    assert (r1.provider.reasoning_effort, r1.provider.reasoning_effort_param) == (("low", "high"), "effort")
    assert config.provider.reasoning_effort == ("low", "high")  # the default model's entry refines it
    assert options_view(plain.provider, {}, True) == []
    assert request_params({"temperature": 0}, plain.provider, {"thought_level": "high", "thinking": False}) == {
        "temperature": 0}
    # default: no level sent; the switch's default (on) sends its on-parameters
    assert request_params({}, r1.provider, {}) == {"enable_thinking": True}
    assert request_params({}, r1.provider, {"thought_level": "high", "thinking": False}) == {"effort": "high"}


@pytest.mark.parametrize("entry, words", [
    ('reasoning_effort = []', "reasoning_effort must list distinct levels"),
    ('reasoning_effort = ["low", "low"]', "reasoning_effort must list distinct levels"),
    ('reasoning_effort = ["default", "high"]', "reasoning_effort must list distinct levels"),
    ('reasoning_effort = ["high"]\nreasoning_effort_param = "messages"', "may not set ['messages']"),
    ('[models.switches.model]\non = { x = 1 }', "switch id 'model' is taken"),
    ('[models.switches.s]\non = { stream = false }', "may not set ['stream']"),
])
def test_bad_option_settings_are_a_config_error_naming_the_model(tmp_path, entry, words):
    with pytest.raises(ConfigError, match="model 'm'") as raised:
        load(tmp_path, f'base_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n[[models]]\nid = "m"\n{entry}\n')
    assert words in str(raised.value)


def test_a_change_is_logged_with_every_value_and_a_bad_one_is_refused(tmp_path):
    provider = load(tmp_path).provider
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w", "additional_directories": []})
    assert set_option(log, provider, "thought_level", "high", "t") is True
    assert set_option(log, provider, "thought_level", "high", "t") is False  # no change: nothing logged
    assert set_option(log, provider, "thinking", "off", "t") is True
    assert set_option(log, provider, "thinking", False, "t") is False
    assert option_values(log) == {"thought_level": "high", "thinking": False}
    assert [e.data["values"] for e in log.events if e.type == "config_option/changed"] == [
        {"thought_level": "high"}, {"thought_level": "high", "thinking": False}]
    for option, value, words in [("thought_level", "medium", "thought_level takes one of default, low, high"),
                                 ("thinking", "yes", "takes true or false"), ("speed", "x", "has no 'speed' option")]:
        with pytest.raises(OptionError, match=words):
            set_option(log, provider, option, value, "t")
    view = {o["id"]: o for o in options_view(provider, option_values(log), False)}
    assert view["thought_level"]["currentValue"] == "high" and view["thinking"]["currentValue"] == "off"
