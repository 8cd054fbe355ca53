"""session/load shows the user what happened, never the notes written for the model: a loaded session
showed "[agent-server notice] The user cancelled the previous turn… Do not assume they succeeded…" in
the chat (``history_updates`` replayed the ``notice`` text meant for the model)."""

from __future__ import annotations

from agent_server.agent.recovery import close_cancelled_turn, close_open_turn
from agent_server.host.lifecycle import history_updates
from agent_server.session import EventLog

CALL = {"id": "c1", "name": "bash", "arguments": '{"command": "sleep 30"}'}


def _turn(log: EventLog, turn: int, text: str) -> None:
    log.append("turn/start", {"turn": turn})
    log.append("user", {"turn": turn, "content": text, "blocks": [{"type": "text", "text": text}]})
    log.append("step/start", {"turn": turn, "step": 1})
    log.append("assistant", {"turn": turn, "step": 1, "text": "Running it.", "tool_calls": [CALL]})
    log.append("step/end", {"turn": turn, "step": 1})
    log.append("tool/call", {"turn": turn, "call_id": "c1", "name": "bash", "arguments": CALL["arguments"]})


def _shown(log: EventLog, root: str) -> tuple[list[str], list[str]]:
    updates = list(history_updates(log.events, [root]))
    user = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    agent = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    return user, agent


def test_loaded_session_shows_the_model_facing_notices_of_a_cancelled_and_an_interrupted_turn(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    _turn(log, 1, "first")
    close_cancelled_turn(log, 1)
    log.append("turn/end", {"turn": 1, "exit": "cancelled"})
    _turn(log, 2, "second")  # the process dies here; the load closes the turn
    close_open_turn(log)
    notices = [e.data["text"] for e in log.events if e.type == "notice"]
    assert len(notices) == 2 and all(n.startswith("The ") for n in notices)  # the texts the model gets
    user, agent = _shown(log, str(tmp_path))
    assert user == ["first", "second"]  # the user's own words, nothing else
    shown = "".join(agent)
    for notice in notices:
        assert notice not in shown
    assert "Do not assume" not in shown and "The user cancelled" not in shown and "notice]" not in shown
    assert "[agent-server] The turn was cancelled." in shown
    assert "[agent-server] The turn was interrupted before it was finished: agent-server stopped." in shown


def test_loaded_session_shows_an_undo_as_what_was_done_not_the_models_reminder(tmp_path):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    log.append("checkpoint/undo", {"turn": 3, "files": [{"path": str(tmp_path / "a.py"), "outcome": "restored"}]})
    log.append("notice", {"reason": "checkpoint_undo", "text": (
        "The user undid the file changes of turn 3: a.py: restored. The files on disk and in the editor may "
        "differ from what you last read: read a file again before you change it.")})
    _, agent = _shown(log, str(tmp_path))
    assert agent == ["\n\n[agent-server] Undid the file changes of turn 3: a.py: restored.\n\n"]


def test_loaded_init_turn_shows_the_users_slash_command_not_the_instructions_sent_for_it(tmp_path):
    from agent_server.host.commands import INIT_PROMPT

    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    log.append("turn/start", {"turn": 1})
    log.append("user", {"turn": 1, "content": INIT_PROMPT, "blocks": [{"type": "text", "text": INIT_PROMPT}]})
    user, _ = _shown(log, str(tmp_path))
    assert user == ["/init"]


def test_a_loaded_session_lost_the_notice_of_tool_calls_dropped_past_the_per_answer_cap(tmp_path):
    """Live, the user read "[agent-server] 2 tool calls of this answer were dropped unrun …"; a load
    showed nothing of it (the log's ``notice`` is written for the model, and no note was made of it)."""
    from agent_server.agent.step import dropped_calls_text

    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    _turn(log, 1, "run it")
    log.append("tool/result", {"turn": 1, "call_id": "c1", "content": "done"})
    log.append("notice", {"turn": 1, "reason": "tool_calls_dropped", "dropped": 2, "text": "Your last answer made 3 …"})
    _, agent = _shown(log, str(tmp_path))
    assert agent[-1] == dropped_calls_text(2, 1)
    assert agent[-1] == ("\n\n[agent-server] 2 tool calls of this answer were dropped unrun: at most 1 per answer "
                         "(max_tool_calls_per_step).")
