"""``/usage``'s text (agent_server.host.commands.usage_report)."""

from agent_server.host.commands import usage_report
from agent_server.session.events import SessionEvent


def events(*types_and_data):
    return [SessionEvent(type=t, seq=i + 1, time=0.0, data=d) for i, (t, d) in enumerate(types_and_data)]


def test_usage_typed_during_the_first_turn_said_1_turns():
    """Newcomer 4, finding 8: `/usage` while the first answer streamed said "(1 turns)"."""
    assert usage_report(events(("turn/start", {})), 1000) == "No model usage recorded yet in this session (1 turn)."
    assert usage_report(events(), 1000).endswith("(0 turns).")


def test_usage_counts_one_turn_and_one_request_in_the_singular():
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    text = usage_report(events(("turn/start", {}), ("assistant", {"usage": usage})), 1000)
    assert "Session: 1 turn, 1 model request, 10 prompt + 5 completion tokens in all." in text, text
    text = usage_report(events(("turn/start", {}), ("assistant", {"usage": usage}), ("turn/start", {}),
                               ("assistant", {"usage": usage})), 1000)
    assert "Session: 2 turns, 2 model requests," in text, text


def test_usage_with_an_endpoint_that_sends_no_usage_said_nothing_was_recorded():
    """Newcomer 5's finding 9f: with an endpoint that never sends `usage`, `/usage` said "No model
    usage recorded yet in this session (8 turns)" while the panel showed "context 3,439 / 32,768
    tokens" — it counted only requests with usage and ignored the estimate the meter shows."""
    text = usage_report(events(("turn/start", {}), ("assistant", {"usage": None}), ("assistant/attempt", {}),
                               ("assistant", {"usage": None}), ("turn/start", {}), ("assistant", {})),
                        32_768, estimate=3_439)
    assert text == ("The endpoint reported no token usage for this session's 4 model requests (2 turns).\n"
                    "Context: about 3,439 of 32,768 tokens (10.5%) in the next request, estimated from its characters.")
