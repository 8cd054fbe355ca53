"""A session another agent-server process holds (``SESSION_BUSY``), loaded from Neovim: the chat
offers *Take over here* / *Open a copy* / *Cancel* through ``vim.ui.select``, two real servers (two
real Neovims) on one state dir."""

from __future__ import annotations

from support.nvim import SCREEN, quit_editor, screens_at_select, shown
from support.sessions import events

from agent_server.offline import text_stream

LOADED = "return require('agent_server.chat').text():find('# Session ' .. ... .. ' (loaded)', 1, true) ~= nil"
TOLD = "return require('agent_server.chat').text():find('taken over by another agent-server process', 1, true) ~= nil"
"""The chat says its session was taken over by another process."""


def holder(make_editor, endpoint):
    """A Neovim whose server holds a session with one answered prompt, and that session's id."""
    endpoint.push(text_stream("mine"))
    one = make_editor()
    one.cmd("AgentAsk hello")
    one.idle()
    return one, one.lua("return require('agent_server.client').state.session_id")


def taken_over(make_editor, endpoint):
    """``holder``'s session taken over by a second Neovim (*Take over here*, loaded), the holder told:
    the holder, the second Neovim and the session's id."""
    one, sid = holder(make_editor, endpoint)
    two = make_editor()
    two.choose(sid, "take-over")
    two.cmd("AgentSessions")
    two.wait(LOADED, sid, what="taken over")
    one.wait(TOLD, what="the holder's notice")
    return one, two, sid


def users(agent_state_dir, sid):
    return [e.data["content"] for e in events(agent_state_dir, sid) if e.type == "user"]


def test_the_neovim_client_showed_only_the_text_of_session_busy_and_offered_no_way_to_take_the_session_over(
        make_editor, endpoint, workspace, agent_state_dir):
    one, sid = holder(make_editor, endpoint)
    one_pid = one.lua("return require('agent_server.client').pid()")
    two = make_editor()
    two.choose(sid, "take-over")
    two.cmd("AgentSessions")
    two.wait(LOADED, sid, what="the session taken over and loaded")
    _, busy = two.lua("return _G.selects")
    assert f"Session {sid} is open in another agent-server process (pid {one_pid})" in busy["prompt"], busy
    assert [i["id"] for i in busy["items"]] == ["take-over", "copy", "cancel"], busy
    assert busy["shown"][0].startswith("Take over here") and busy["shown"][1].startswith("Open a copy"), busy
    chat = two.chat()
    assert "take it over here, open a copy, or cancel" in chat, chat  # the refusal said the ways forward
    assert "hello" in chat.split(f"# Session {sid} (loaded)")[1] and "mine" in chat, chat  # replayed
    assert two.lua("return require('agent_server.client').state.session_id") == sid
    # the holder was told, and lives on without it
    one.wait(TOLD, what="the holder's notice")
    endpoint.push(text_stream("here now"))
    two.cmd("AgentAsk again")
    two.idle()
    assert "here now" in two.chat() and two.chat().rstrip().endswith("_— stop: end_turn —_"), two.chat()
    assert users(agent_state_dir, sid) == ["hello", "again"]


def test_a_session_held_elsewhere_opens_as_a_copy_from_neovim_and_the_holder_keeps_it(
        make_editor, endpoint, workspace, agent_state_dir):
    one, sid = holder(make_editor, endpoint)
    two = make_editor()
    two.choose(sid, "copy")
    two.cmd("AgentSessions")
    two.wait("local c = require('agent_server.client').state.session_id; return c ~= nil and c ~= ... and "
             "require('agent_server.chat').text():find('replayed', 1, true) ~= nil", sid, what="the copy loaded")
    copy = two.lua("return require('agent_server.client').state.session_id")
    chat = two.chat()
    assert f"session {copy} is a copy of session {sid}" in chat and f"# Session {copy} (loaded)" in chat, chat
    assert "hello" in chat.split(f"# Session {copy} (loaded)")[1], chat
    assert users(agent_state_dir, copy) == ["hello"]
    endpoint.push(text_stream("mine still"))
    one.cmd("AgentAsk more")  # the holder keeps its session
    one.idle()
    assert "mine still" in one.chat() and users(agent_state_dir, sid) == ["hello", "more"]


def test_a_holder_that_cannot_be_asked_is_offered_only_a_copy_or_cancel(
        make_editor, endpoint, workspace, agent_state_dir):
    from agent_server.session import EventLog

    one, sid = holder(make_editor, endpoint)
    assert not quit_editor(one)  # its server gone, the log unlocked
    held = EventLog.open(agent_state_dir / "sessions" / sid / "events.jsonl")  # this process: no SIGUSR1 handler
    try:
        two = make_editor()
        two.choose(sid)  # the session from the list; then the busy question is dismissed
        two.cmd("AgentSessions")
        two.wait("return #(_G.selects or {}) == 2 and "
                 "require('agent_server.chat').text():find('left where it is open', 1, true) ~= nil",
                 what="the question")
        _, busy = two.lua("return _G.selects")
        assert [i["id"] for i in busy["items"]] == ["copy", "cancel"], busy
        assert two.lua("return require('agent_server.client').state.session_id") is None
    finally:
        held.close()


def test_a_neovim_whose_session_was_taken_over_got_only_an_unknown_session_error_and_no_way_back(
        make_editor, endpoint, workspace, agent_state_dir):
    one, two, sid = taken_over(make_editor, endpoint)
    one.choose("take-back", "take-over")
    one.cmd("AgentAsk am I still here?")
    question = one.wait("local s = _G.selects or {}; return s[1]", what="the way back")
    assert [i["id"] for i in question["items"]] == ["take-back", "new", "cancel"], question
    assert f"Session {sid} is no longer open here" in question["prompt"]
    one.wait("return require('agent_server.client').state.session_id == ...", sid, what="taken back")
    assert "`:AgentSessions` loads it again" in one.chat()
    assert one.lua("return require('agent_server.transcript').prompt_text()") == "am I still here?"
    two.wait(TOLD, what="the other Neovim told")
    endpoint.push(text_stream("back here"))
    one.lua("require('agent_server').send_typed()")
    one.idle()
    assert "back here" in one.chat()
    assert users(agent_state_dir, sid) == ["hello", "am I still here?"]


def test_the_chat_heading_stayed_loading_until_enter_after_a_refused_load(
        make_editor, endpoint, workspace, agent_state_dir):
    """F9: the refused load's heading was changed in the buffer, but the screen was not drawn before
    the question (a blocking picker, or the error's hit-enter prompt): the user saw "(loading …)"
    until Enter. What the screen shows when the question is asked says "(not loaded)"."""
    one, sid = holder(make_editor, endpoint)
    two = make_editor()
    # the session, then Cancel (dismissed) on the busy question
    screens_at_select(two, answer="on_choice(items[1].sessionId and items[1] or nil)")
    two.lua("""
        local notify = vim.notify
        vim.notify = function(...)
          table.insert(_G.screens, _G.screen())
          return notify(...)
        end
    """)
    two.cmd("AgentSessions")
    two.wait("return require('agent_server.chat').text():find('left where it is open', 1, true) ~= nil",
             what="the busy question dismissed")
    screens = two.lua("return _G.screens")
    assert len(screens) == 2, screens
    asked = shown(screens[1])
    assert f"# Session {sid} (not loaded)" in asked and "(loading" not in asked, asked
    two.cmd("redraw")
    assert "(loading" not in shown(two.lua(SCREEN)) and "(loading" not in two.chat()
    # a load refused for another reason (no such session): its error is drawn over the chat saying so
    two.lua("_G.screens = {}; require('agent_server').load('no-such-session')")
    two.wait("return #_G.screens > 0", what="the error said")
    said = shown(two.lua("return _G.screens")[0])
    assert "# Session no-such-session (not loaded)" in said and "(loading" not in said, said


def test_neovim_wrote_the_raw_unknown_session_error_into_the_chat_before_the_take_back_dialog(
        make_editor, endpoint, workspace, agent_state_dir):
    """N4: after a take-over, a prompt typed in the Neovim that lost the session drew
    ``**error:** unknown session: sess_…`` (the JSON-RPC error's text) above the chat's own words
    and the take-back / new-session dialog. The chat says it in its words only, before the dialog
    is asked, and the prompt waits in the prompt area."""
    one, two, sid = taken_over(make_editor, endpoint)
    screens_at_select(one, "{ prompt = opts.prompt, screen = screen(), chat = require('agent_server.chat').text(), "
                           "typed = require('agent_server.transcript').prompt_text() }")
    one.cmd("AgentChat")
    one.lua("require('agent_server.transcript').set_prompt('am I still here?')")
    one.lua("require('agent_server').send_typed()")
    asked = one.wait("return _G.screens[1]", what="the way back")
    assert f"Session {sid} is no longer open here" in asked["prompt"], asked
    for seen in (asked["chat"], shown(asked["screen"]), one.chat()):
        assert "unknown session" not in seen and "**error:**" not in seen, seen
    assert "another agent-server process took it over" in asked["chat"], asked["chat"]
    assert asked["typed"] == "am I still here?"  # kept for sending again
    assert one.lua("return require('agent_server.transcript').prompt_text()") == "am I still here?"


def test_a_refused_load_wrote_the_protocol_words_of_session_busy_into_the_neovim_chat(
        make_editor, endpoint, workspace, agent_state_dir):
    """F9's rest: the chat drew SESSION_BUSY's message whole — "…or take it over
    (_meta.agentServer.takeOver) or open a copy (session/fork)" — beside its own ways forward.
    It says who holds the session in its words; the picker offers the ways."""
    one, sid = holder(make_editor, endpoint)
    one_pid = one.lua("return require('agent_server.client').pid()")
    two = make_editor()
    two.choose(sid)  # the session from the list; the busy question dismissed
    two.cmd("AgentSessions")
    two.wait("return require('agent_server.chat').text():find('left where it is open', 1, true) ~= nil",
             what="the question dismissed")
    chat = two.chat()
    assert "_meta" not in chat and "session/fork" not in chat and "takeOver" not in chat, chat
    assert (f"could not load session {sid}: it is open in another agent-server process (pid {one_pid})"
            in chat), chat
    assert "take it over here, open a copy, or cancel" in chat, chat


def test_agent_mode_after_a_take_over_said_only_the_raw_unknown_session_error(
        make_editor, endpoint, workspace, agent_state_dir):
    """The class of N4: ``:AgentMode`` in the Neovim whose session was taken over said
    ``unknown session: sess_…`` (the JSON-RPC error's text) and offered nothing. It says what
    happened and offers the way back, as a prompt does."""
    one, two, sid = taken_over(make_editor, endpoint)
    one.lua("_G.notes = {}; vim.notify = function(msg) table.insert(_G.notes, msg) end")
    one.choose()  # the way back dismissed
    one.cmd("AgentMode read-only")
    question = one.wait("local s = _G.selects or {}; return s[1]", what="the way back")
    assert [i["id"] for i in question["items"]] == ["take-back", "new", "cancel"], question
    notes = one.wait("return #_G.notes > 0 and _G.notes", what="the mode's failure said")
    assert not any("unknown session" in n for n in notes), notes
    assert any(f"session {sid} is no longer open here" in n for n in notes), notes
    assert one.lua("return require('agent_server.client').state.session_id") is None


def test_a_load_or_a_copy_that_failed_said_its_acp_method_name_in_neovim(make_editor, endpoint, workspace):
    """The class of N4: a load or a copy that failed for another reason than a holder (no such
    session) said "session/load failed: …" / "session/fork failed: …" — the wire's method names.
    They say what could not be done, in words."""
    ed = make_editor()
    ed.lua("_G.notes = {}; vim.notify = function(msg) table.insert(_G.notes, msg) end")
    ed.lua("require('agent_server').load('no-such-session')")
    ed.wait("return #_G.notes > 0", what="the load's failure said")
    ed.lua("require('agent_server').load('no-such-session', 'copy')")
    ed.wait("return #_G.notes > 1", what="the copy's failure said")
    notes, chat = ed.lua("return _G.notes"), ed.chat()
    for said in (*notes, chat):
        assert "session/load" not in said and "session/fork" not in said, said
    assert notes[0].startswith("agent-server: could not load session no-such-session: "), notes
    assert notes[1].startswith("agent-server: could not open a copy of session no-such-session: "), notes
    assert "could not open a copy of session no-such-session" in chat, chat


def test_after_the_server_was_killed_a_session_another_process_took_meanwhile_is_offered_back_not_replaced(
        make_editor, endpoint, workspace, tmp_path):
    """The held case of finding h: the server was killed, and before the server started again
    resumed it another Neovim opened the session (the restart's ``session/resume`` held back by a
    relay until then). The session is not replaced by a new one behind the user's back: the chat says
    it was not resumed and offers to take it over (or a copy). Taken back, the next prompt carries the
    session's history."""
    import json
    import os
    import signal
    import sys
    from pathlib import Path

    from support.fixtures import agent_server_command

    relay = tmp_path / "relay"
    relay.mkdir()
    os.mkfifo(relay / "go")
    endpoint.push(text_stream("mine"))
    one = make_editor(server_cmd=[sys.executable, str(Path(__file__).with_name("dying_server.py")), str(relay), "--",
                                  *agent_server_command()])
    one.cmd("AgentAsk hello")
    one.idle()
    sid = one.lua("return require('agent_server.client').state.session_id")
    (relay / "armed").touch()
    one.note_server()
    (pid,) = one.server_pids
    one.choose("take-over")
    os.killpg(pid, signal.SIGKILL)
    one.wait("return vim.uv.fs_stat(...) ~= nil", str(relay / "seen"), what="the restart's resume held")
    two = make_editor()
    two.choose(sid)
    two.cmd("AgentSessions")
    two.wait(LOADED, sid, what="the other Neovim opened the session")
    with open(relay / "go", "w") as go:
        go.write("pass\n")
    one.wait(LOADED, sid, what="the session taken back")
    offer = one.lua("return _G.selects")[-1]
    assert f"Session {sid} is open in another agent-server process" in offer["prompt"], offer
    chat = one.chat()
    assert f"session {sid} was not resumed" in chat and "take it over here" in chat, chat
    assert one.lua("return require('agent_server.client').state.session_id") == sid
    two.wait(TOLD, what="the other Neovim's notice")
    endpoint.push(text_stream("still here"))
    one.cmd("AgentAsk are you still there")
    one.idle()
    said = [m["content"] for m in json.loads(endpoint.requests[-1].body)["messages"] if m["role"] == "user"]
    assert said[0].startswith("hello") and said[-1].startswith("are you still there"), said
