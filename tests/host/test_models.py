"""The model option and /model: only listed models, the change logged, the text says how to add one."""

from agent_server.config.load import load_config
from agent_server.host.models import UnknownModel, model_command, model_option, switch_model
from agent_server.session import EventLog

import pytest

CONFIG = 'model = "small"\nbase_url = "http://127.0.0.1:9/v1"\n[[models]]\nid = "big"\nname = "Big"\n'


def setup(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text(CONFIG)
    return load_config(path, env={}), EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w"})


def test_the_option_lists_the_models_with_the_current_one(tmp_path):
    config, log = setup(tmp_path)
    option = model_option(config, log.events)
    assert (option["id"], option["category"], option["type"], option["currentValue"]) == ("model", "model", "select", "small")
    assert [o["value"] for o in option["options"]] == ["small", "big"]
    assert switch_model(log, config, "big", "session/set_config_option") is True
    assert switch_model(log, config, "big", "session/set_config_option") is False
    assert model_option(config, log.events)["currentValue"] == "big"
    assert [e.data for e in log.events if e.type == "model/changed"] == [
        {"from": "small", "to": "big", "by": "session/set_config_option"}]


def test_an_unlisted_model_is_refused_and_the_text_says_how_to_add_it(tmp_path):
    config, log = setup(tmp_path)
    with pytest.raises(UnknownModel, match=r"Models you can use: small, big"):
        switch_model(log, config, "huge", "/model")
    text, changed = model_command(log, config, "huge")
    assert not changed and "[[models]]" in text and 'id = "huge"' in text and str(tmp_path) in text
    assert not [e for e in log.events if e.type == "model/changed"]


def test_a_model_the_log_names_but_the_config_dropped_is_still_offered(tmp_path):
    config, log = setup(tmp_path)
    log.append("model/changed", {"from": "small", "to": "retired", "by": "/model"})
    option = model_option(config, log.events)
    assert option["currentValue"] == "retired" and option["options"][-1]["value"] == "retired"


def test_no_model_configured_means_no_option(tmp_path):
    config = load_config(env={"XDG_CONFIG_HOME": str(tmp_path)})
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": "/w"})
    assert model_option(config, log.events) is None
