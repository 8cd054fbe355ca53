"""A session the chat left while its turn ran (the user loaded another one): what that turn still
does belongs to it, never to the session the chat shows — its turn's end, the "Edit … applied" line
of its proposal accepted in the tab still open, a question it asks (drawn in its part of the chat,
with a short notice at the end, since it needs the user) — a real Neovim against the real server and
the offline endpoint."""

from __future__ import annotations

from support.nvim import call, editor_with_pending_edit

from agent_server.offline import text_stream

SESSION = "return require('agent_server.client').state.session_id"


def left_and_loaded(make_editor, endpoint, workspace, *after, env=None):
    """Session A answered; session B waits on an edit proposal of ``s.py`` (then answers ``after``);
    the user loads A again. Returns the editor, A's id, B's id and the path."""
    endpoint.push(text_stream("the first session's answer"))
    ed = make_editor(env=env)
    ed.cmd("AgentAsk remember this")
    ed.idle()
    first = ed.lua(SESSION)
    ed.cmd("AgentNew")
    path = workspace / "s.py"
    editor_with_pending_edit(make_editor, endpoint, path, "a = 1", "a = 2", *after, ed=ed)
    second = ed.lua(SESSION)
    assert second != first
    ed.lua("_G.builtin_select = vim.ui.select")
    ed.choose(first)
    ed.cmd("AgentSessions")
    ed.wait(f"return ({SESSION.removeprefix('return ')}) == ... "
            "and require('agent_server.chat').text():find('replayed', 1, true) ~= nil", first, what="the load")
    ed.lua("vim.ui.select = _G.builtin_select")  # Neovim's own again: a question waits in the chat
    return ed, first, second, path


def parts(chat: str, first: str, second: str) -> tuple[str, str]:
    """B's part of the chat (from its heading to A's loaded heading) and what follows that heading."""
    b_start = chat.index(f"# Session {second}")
    loaded = chat.index(f"# Session {first} (loaded)")
    return chat[b_start:loaded], chat[loaded:]


def test_a_left_behind_sessions_turn_end_and_edit_applied_line_were_drawn_in_the_loaded_sessions_chat(
        make_editor, endpoint, workspace):
    """Last session's report: after the user loaded another session, the turn left behind ended and its
    proposal was accepted in its still-open tab: "Edit s.py: applied and saved" and "— stop: end_turn —"
    were drawn under the loaded session's replay (``turn_end`` carried no session id)."""
    ed, first, second, path = left_and_loaded(make_editor, endpoint, workspace, text_stream("done"))
    ed.cmd("AgentAccept")
    ed.wait("return not require('agent_server.client').busy()", what="the left-behind turn's end")
    ed.wait("return require('agent_server.chat').text():find('stop: end_turn', "
            "require('agent_server.chat').text():find('# Session " + second + "', 1, true), true)",
            what="the left-behind turn's end line")
    assert path.read_text() == "a = 2\n"
    b_part, a_part = parts(ed.chat(), first, second)
    assert "applied and saved" not in a_part and "stop: end_turn" not in a_part.split("_— replayed —_")[1], ed.chat()
    assert "✓ Edit s.py" in b_part and "Edit s.py: applied and saved" in b_part, ed.chat()
    assert "stop: end_turn" in b_part, ed.chat()
    assert ed.lua("return require('agent_server.chat').state.header.state") == "idle"
    # the chat shows A: a prompt there is drawn and answered there
    endpoint.push(text_stream("A again"))
    ed.cmd("AgentAsk and now")
    ed.idle()
    assert ed.chat().rstrip().endswith("A again\n\n_— stop: end_turn —_"), ed.chat()


def test_a_prompt_sent_in_the_loaded_session_while_the_left_one_ran_was_held_as_queued_behind_its_turn(
        make_editor, endpoint, workspace):
    """The chat counted the left-behind session's running turn as the shown session's: a prompt sent
    in the session loaded since was said "queued … runs when the current turn ends" and not drawn,
    though the server ran it at once (another session)."""
    ed, first, second, path = left_and_loaded(make_editor, endpoint, workspace)
    endpoint.push(text_stream("answered in A"))
    ed.cmd("AgentAsk a question for A")
    ed.wait("return require('agent_server.chat').text():find('answered in A', 1, true)", what="A's answer drawn")
    ed.wait("return require('agent_server.chat').text():find('stop: end_turn', "
            "require('agent_server.chat').text():find('answered in A', 1, true), true)", what="A's turn end")
    _, a_part = parts(ed.chat(), first, second)
    assert "## You\na question for A\n\n## Agent\nanswered in A" in a_part, ed.chat()
    assert ed.lua("return require('agent_server.chat').state.header.state") == "idle"
    endpoint.push(text_stream("done"))
    ed.cmd("AgentAccept")
    ed.wait("return not require('agent_server.client').busy()", what="B's end")


def test_a_question_of_a_left_behind_session_was_drawn_as_the_shown_sessions_own_tool_line(
        make_editor, endpoint, workspace):
    """A question the left-behind session asks after the switch (its next call needs the user) got a
    tool line and the question at the end of the chat, as if the loaded session asked it. It is drawn
    in its session's part, a short notice at the end says which session asks and how to answer."""
    ed, first, second, path = left_and_loaded(
        make_editor, endpoint, workspace, call("b", "bash", command="echo hi > out.txt", description="write a file"),
        text_stream("wrote it"), env={"AGENT_SERVER_SANDBOX": "off"})
    ed.cmd("AgentAccept")
    ed.wait("return require('agent_server.permissions').waiting()", what="B's question")
    chat = ed.chat()
    b_part, a_part = parts(chat, first, second)
    assert "write a file" in b_part and "Answer with :AgentAnswer N" in b_part, chat
    assert "write a file" not in a_part.split("_— replayed —_")[0], chat
    tail = a_part.split("_— replayed —_")[1]
    assert f"Session {second}" in tail and ":AgentAnswer" in tail, chat
    assert "- ⏳" not in tail and "- ⚙" not in tail, chat
    n = ed.lua("""local line = require('agent_server.chat').text():match('Answer with :AgentAnswer N — ([^\\n]*)')
        for num, name in line:gmatch('(%d+) ([^·(]+)') do
          if vim.trim(name) == 'Allow once' or vim.trim(name) == 'Allow' then return tonumber(num) end
        end""")
    ed.cmd(f"AgentAnswer {n}")
    ed.wait("return not require('agent_server.client').busy()", what="B's end")
    assert (workspace / "out.txt").read_text() == "hi\n"
    ed.wait("return require('agent_server.chat').text():find('stop: end_turn', "
            "require('agent_server.chat').text():find('# Session " + second + "', 1, true), true)",
            what="B's end line")
    b_part, a_part = parts(ed.chat(), first, second)
    assert "stop: end_turn" in b_part and "stop: end_turn" not in a_part.split("_— replayed —_")[1], ed.chat()


def test_a_left_behind_sessions_failed_prompt_was_put_back_into_the_prompt_area_of_the_session_shown(
        make_editor, endpoint, workspace):
    """The class, for a failure: the left session's turn went on after its proposal was accepted and
    the endpoint refused the key (401): its prompt ("change it") was put back into the prompt area of
    the session shown since, where sending it would have asked that other session. The ways forward
    (sign in, …) are still offered — the key is the server's —, the prompt stays out of the prompt
    area, and the error is drawn in the left session's part."""
    refused = {"kind": "error", "status": 401, "json": {"error": {"message": "Incorrect API key provided"}}}
    ed, first, second, path = left_and_loaded(make_editor, endpoint, workspace, refused)
    ed.choose("cancel")  # the ways forward: dismissed
    ed.cmd("AgentAccept")
    ed.wait("return not require('agent_server.client').busy()", what="the left-behind turn's end")
    ed.wait("local s = _G.selects or {}; return s[#s] and s[#s].prompt:find('API key', 1, true)",
            what="the ways forward offered")
    b_part, a_part = parts(ed.chat(), first, second)
    assert "**error:**" in b_part and "**error:**" not in a_part, ed.chat()
    assert ed.lua("return require('agent_server.transcript').prompt_text()") == ""
