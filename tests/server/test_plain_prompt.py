"""``session/prompt``'s plain case (a string id, text blocks of ``type`` and ``text`` only) is read
without building ``models.PromptParams`` (issue 33 item 6: the first request after a load); whatever
it takes, the model accepts with the same id and blocks, and anything else goes to the model (its
errors unchanged)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_server.server.acp import models as m
from agent_server.server.acp.server import _plain_prompt

TEXT = {"type": "text", "text": "hi"}
json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
                           max_leaves=6)
blocks = st.lists(st.one_of(
    st.just(TEXT), st.fixed_dictionaries({"type": st.sampled_from(["text", "image", "Text"]), "text": json_values}),
    st.dictionaries(st.sampled_from(["type", "text", "annotations", "_meta", "data"]), json_values, max_size=3)),
    max_size=3)
params = st.fixed_dictionaries({}, optional={"sessionId": st.one_of(st.just("sess_1"), json_values), "prompt": blocks,
                                             "_meta": json_values, "extra": json_values})


@settings(max_examples=400, deadline=None)
@given(params)
def test_a_plain_prompt_is_one_the_schema_model_takes_with_the_same_id_and_blocks(given_params):
    session_id = _plain_prompt(given_params)
    if session_id is None:
        return
    parsed = m.PromptParams.model_validate(given_params)
    assert parsed.sessionId == session_id and parsed.prompt
    assert [b.model_dump(by_alias=True, exclude_none=True) for b in parsed.prompt] == given_params["prompt"]


@pytest.mark.parametrize("given_params", [
    {"sessionId": "s", "prompt": [TEXT]},
    {"sessionId": "s", "prompt": [TEXT, {"type": "text", "text": ""}], "_meta": None},
    {"sessionId": "s", "prompt": [TEXT], "_meta": {"x": 1}},
])
def test_plain_prompts_are_read_without_the_model(given_params):
    assert _plain_prompt(given_params) == "s"


@pytest.mark.parametrize("given_params", [
    {"sessionId": "s", "prompt": []}, {"sessionId": 1, "prompt": [TEXT]}, {"prompt": [TEXT]},
    {"sessionId": "s", "prompt": [{"type": "text", "text": 1}]}, {"sessionId": "s", "prompt": [TEXT], "_meta": []},
    {"sessionId": "s", "prompt": [{"type": "text", "text": "a", "annotations": None}]},
    {"sessionId": "s", "prompt": [TEXT], "other": 1}, {"sessionId": "s", "prompt": "hi"},
])
def test_anything_else_is_left_to_the_model(given_params):
    assert _plain_prompt(given_params) is None


def test_the_model_still_refuses_what_the_plain_case_leaves_to_it():
    with pytest.raises(ValidationError):
        m.PromptParams.model_validate({"sessionId": "s", "prompt": [{"type": "text", "text": 1}]})
