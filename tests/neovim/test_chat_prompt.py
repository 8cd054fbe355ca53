"""A chat you type in (issue 29 item 2): a prompt area at the end of the chat buffer, sent with <CR>
(normal mode) or <C-s> (insert mode), with `#buffer` / `#file:` / `#selection` / `#diagnostics` as
embedded resources; typed text survives streaming above it; the transcript refuses edits and never
enters the user's undo history; `q`, `]]`/`[[`, `gA`/`gR`, slash-command completion and
`require('agent_server').status()` — a real Neovim against the real server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from support.nvim import editor_with_pending_edit, push

from agent_server.offline import text_stream


SCRIPTED = [sys.executable, str(Path(__file__).with_name("scripted_agent.py"))]


def user_messages(endpoint, n: int) -> str:
    return "\n".join(str(m.get("content")) for m in endpoint.requests[n].json()["messages"] if m["role"] == "user")


def typed(ed, keys: str) -> None:
    """Type `keys` as the user would, with the plugin's mappings."""
    ed.lua("vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(..., true, false, true), 'mx', false)", keys)


def prompt_text(ed) -> str:
    return ed.lua("return require('agent_server.transcript').prompt_text()")


def test_a_prompt_typed_at_the_end_of_the_chat_and_sent_with_enter_reaches_the_model_with_the_unsaved_buffer(
        make_editor, endpoint, workspace):
    path = workspace / "notes.py"
    path.write_text("x = 1\n")
    endpoint.push(text_stream("It sets x."))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_buf_set_lines(0, 0, -1, false, {'x = 42  # unsaved'})")
    ed.cmd("AgentChat")
    assert ed.lua("return vim.api.nvim_win_get_cursor(0)[1]") == ed.lua("return vim.api.nvim_buf_line_count(0)")
    typed(ed, "iwhat does #buffer do?<Esc>")
    typed(ed, "<CR>")
    ed.idle()
    sent = user_messages(endpoint, 0)
    assert "what does #buffer do?" in sent and "x = 42  # unsaved" in sent, sent
    assert "It sets x." in ed.chat() and prompt_text(ed) == ""
    assert "## You\nwhat does #buffer do?" in ed.chat(), ed.chat()


def test_c_s_sends_from_insert_mode_and_file_selection_diagnostics_become_resources(make_editor, endpoint, workspace):
    (workspace / "lib.txt").write_text("library text\n")
    path = workspace / "main.txt"
    path.write_text("one\ntwo\nthree\n")
    endpoint.push(text_stream("ok"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.keys("2GVj<Esc>")
    ed.lua("vim.diagnostic.set(vim.api.nvim_create_namespace('lint'), 0, "
           "{{lnum = 2, col = 0, message = 'three is odd', severity = vim.diagnostic.severity.WARN, source = 'lint'}})")
    ed.cmd("AgentChat")
    typed(ed, "ilook at #file:lib.txt, #selection and #diagnostics<C-s>")
    # the prompt went out (its turn drawn) before its end is awaited: idle holds before it too
    ed.wait("return require('agent_server.chat').text():find('## You\\nlook at #file:lib.txt', 1, true)",
            what="the typed prompt sent")
    ed.idle()
    sent = user_messages(endpoint, 0)
    assert "library text" in sent and "two\nthree" in sent and "three is odd" in sent and "[lint]" in sent, sent


def test_a_prompt_typed_as_soon_as_the_chat_opened_was_refused_with_e21_and_never_sent(make_editor, endpoint):
    """The flake of ``test_c_s_sends_from_insert_mode_…`` (the first Neovim test of a fresh run: no
    request at the endpoint after ``ed.idle()``): ``:AgentChat`` put the cursor in the prompt area
    but left the chat 'nomodifiable' as BufEnter had set it (the cursor then on the first line)
    until the main loop's next CursorMoved; keys typed before that turn of the loop — the harness's
    next request when the server's output was being handled in the same batch of events, a mapping
    that opens the chat and types — hit E21, nothing was typed, nothing sent, and ``idle()`` (no
    turn running) held at once. Here without a turn of the loop between them, every time."""
    endpoint.push(text_stream("ok"))
    ed = make_editor()
    state = ed.lua("""
        vim.cmd('AgentChat')
        local modifiable = vim.bo.modifiable
        vim.v.errmsg = ''
        vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('ihello there<C-s>', true, false, true), 'mx', false)
        return { modifiable, vim.v.errmsg, require('agent_server.client').busy() }""")
    assert state == [True, "", True], state
    ed.idle()
    assert "hello there" in user_messages(endpoint, 0)


def test_typed_text_survives_streaming_and_undo_never_takes_back_the_agents_text(make_editor, endpoint):
    endpoint.push(text_stream("the agent's answer"))
    ed = make_editor()
    ed.cmd("AgentChat")
    typed(ed, "ia draft<Esc>")
    ed.cmd("AgentAsk hi")
    ed.idle()
    assert prompt_text(ed) == "a draft" and "the agent's answer" in ed.chat()
    for _ in range(3):
        typed(ed, "u")
    assert "the agent's answer" in ed.chat() and "## You" in ed.chat()


def test_edits_above_the_prompt_area_are_refused_or_reverted(make_editor, endpoint):
    endpoint.push(text_stream("answer text"))
    ed = make_editor()
    ed.cmd("AgentChat")
    ed.cmd("AgentAsk hi")
    ed.idle()
    before = ed.chat()
    ed.cmd("normal! gg")
    assert ed.lua("return vim.bo.modifiable") is False  # the transcript cannot be typed in
    ed.lua("pcall(vim.cmd, 'normal! Gkkdgg')")  # an operator from the prompt area up over the transcript
    ed.wait("return require('agent_server.chat').text() == ...", before, what="the transcript restored")
    typed(ed, "G")
    typed(ed, "iafter<Esc>")
    assert prompt_text(ed) == "after"


def test_q_closes_the_chat_window_and_brackets_jump_between_turns(make_editor, endpoint):
    push(endpoint, text_stream("first"), text_stream("second"))
    ed = make_editor()
    ed.cmd("AgentAsk one")
    ed.idle()
    ed.cmd("AgentAsk two")
    ed.idle()
    ed.cmd("AgentChat")
    ed.cmd("normal! gg")
    typed(ed, "]]")
    first = ed.lua("return vim.api.nvim_win_get_cursor(0)[1]")
    typed(ed, "]]")
    second = ed.lua("return vim.api.nvim_win_get_cursor(0)[1]")
    assert ed.lua("return vim.fn.getline(...)", first) == "## You" and second > first
    typed(ed, "[[")
    assert ed.lua("return vim.api.nvim_win_get_cursor(0)[1]") == first
    wins = ed.lua("return #vim.api.nvim_list_wins()")
    typed(ed, "q")
    assert ed.lua("return #vim.api.nvim_list_wins()") == wins - 1
    assert ed.lua("return vim.fn.reg_recording()") == ""  # q did not start a macro


def test_gA_on_the_edit_tool_line_accepts_its_proposal_and_status_says_waiting(make_editor, endpoint, workspace):
    path = workspace / "s.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "a = 1", "a = 2", text_stream("done"))
    assert ed.lua("return require('agent_server').status()") == "waiting for you"
    ed.cmd("AgentChat")
    row = ed.lua("for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do "
                 "if l:find('Edit s.py', 1, true) then return i end end")
    ed.lua("vim.api.nvim_win_set_cursor(0, {..., 0})", row)
    typed(ed, "gA")
    ed.idle()
    assert path.read_text() == "a = 2\n"
    assert ed.lua("return require('agent_server').status()") == "idle"


def test_slash_commands_and_context_names_complete_in_the_prompt(make_editor, endpoint, workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("")
    endpoint.push(text_stream("ok"))
    ed = make_editor()
    ed.cmd("AgentAsk hi")
    ed.idle()
    ed.cmd("AgentChat")
    ed.wait("return #(require('agent_server.chat').state.commands or {}) > 0", what="available_commands_update")

    def complete(line: str) -> list[str]:
        return ed.lua("""
            local line = ...
            vim.wo.virtualedit = 'onemore'  -- the cursor after the last character, as in insert mode
            vim.api.nvim_buf_set_lines(0, -2, -1, false, { line })
            vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), #line })
            local chat = require('agent_server.chat')
            local start = chat.complete(1, '')
            if start < 0 then return {} end
            local words = {}
            for _, c in ipairs(chat.complete(0, line:sub(start + 1))) do words[#words + 1] = c.word end
            return words""", line)

    assert "/checkpoints" in complete("/che")
    assert complete("#buf") == ["#buffer"]
    assert complete("see #file:src/a") == ["#file:src/app.py"]
    assert complete("not /a command") == []
    assert json.dumps(complete("# ")) == json.dumps([])
    assert json.dumps(complete("#")) == json.dumps(["#buffer", "#file:", "#selection", "#diagnostics"])


def test_enter_on_a_tool_line_opens_its_file_and_ctrl_c_cancels_the_turn(make_editor, endpoint, workspace):
    path = workspace / "c.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "c = 1", "c = 2")
    ed.cmd("AgentChat")
    row = ed.lua("for i, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do "
                 "if l:find('Read c.py', 1, true) then return i end end")
    ed.lua("vim.api.nvim_win_set_cursor(0, {..., 0})", row)
    typed(ed, "<CR>")
    assert ed.lua("return vim.fn.expand('%:p')") == str(path)  # <CR> on a tool line opens its location
    ed.cmd("AgentChat")
    typed(ed, "<C-c>")
    ed.idle()
    assert "_— cancelled —_" in ed.chat() and path.read_text() == "c = 1\n"


def test_ctrl_c_right_after_sending_from_insert_mode_only_left_insert_mode_and_the_turn_went_on(
        make_editor, endpoint, workspace):
    """Newcomer 4, finding 5: <C-s> sends from insert mode and leaves the user there; the chat's
    <C-c> ("cancel the running turn") was mapped in normal mode only, so the first <C-c> just left
    insert mode and the turn (a shell command) went on. In insert mode <C-c> now cancels a running
    turn; with none running it does what it always does."""
    path = workspace / "c.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "c = 1", "c = 2")
    ed.cmd("AgentChat")
    ed.lua("vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('A<C-c>', true, false, true), 'mt', false)")
    ed.idle()
    assert "_— cancelled —_" in ed.chat() and path.read_text() == "c = 1\n"
    typed(ed, "A<C-c>")  # nothing running: the key leaves insert mode as always, and cancels nothing
    assert ed.lua("return vim.api.nvim_get_mode().mode") == "n"
    assert ed.chat().count("_— cancelled —_") == 1


def test_a_user_in_a_file_buffer_could_stop_the_turn_only_from_the_chat_window(make_editor, endpoint, workspace):
    """<C-c> ("stop the turn") is the chat buffer's key: in the file being edited a user had no
    documented way to stop. ``:AgentStop``, the global ``<leader>ax`` and ``<Plug>(AgentStop)``
    (bound by the user, also in insert mode) stop it from any buffer, while <C-c> there keeps its
    Vim meaning (leaves insert mode; nothing stopped)."""
    path = workspace / "c.py"
    ed = editor_with_pending_edit(make_editor, endpoint, path, "c = 1", "c = 2")
    ed.cmd(f"edit {path}")
    assert ed.lua("return vim.fn.maparg('<C-c>', 'n') .. vim.fn.maparg('<C-c>', 'i')") == ""  # not taken
    typed(ed, "Ax<C-c>")  # Vim's <C-c>: leaves insert mode, stops nothing
    assert ed.lua("return vim.api.nvim_get_mode().mode") == "n"
    assert ed.lua("return vim.api.nvim_get_current_line()") == "c = 1x"
    assert ed.lua("return require('agent_server.client').busy()") and "cancelled" not in ed.chat()
    ed.cmd("AgentStop")  # from the file's window
    ed.idle()
    assert "_— cancelled —_" in ed.chat() and path.read_text() == "c = 1\n"
    assert ed.lua("return vim.fn.maparg('<leader>ax', 'x', false, true).desc") == (
        "agent-server: stop the running turn (:AgentStop)")
    # a key of the user's own, in insert mode: the turn stops and the user stays in insert mode
    other = workspace / "d.py"
    editor_with_pending_edit(make_editor, endpoint, other, "d = 1", "d = 2", ed=ed)
    ed.lua("vim.keymap.set('i', '<M-c>', '<Plug>(AgentStop)')")
    ed.cmd(f"edit {other}")
    ed.lua("vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes('A<M-c>', true, false, true), 'mt', false)")
    ed.idle()
    assert ed.chat().count("_— cancelled —_") == 2, ed.chat()
    assert ed.lua("return vim.api.nvim_get_mode().mode") == "i"
    assert ed.lua("return vim.fn.expand('%:p')") == str(other) and other.read_text() == "d = 1\n"


def usage_sent_while_the_answer_streams(make_editor, endpoint):
    """A chat whose answer (80 words, streamed slowly) is under way when ``/usage`` is sent, both
    typed in the prompt area; once idle: the editor, the answer's words and the chat's text."""
    words = " ".join(f"word{i}" for i in range(80))
    endpoint.push(text_stream(words, chunk_size=3, delay=0.03))
    ed = make_editor()
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('tell me')")
    ed.lua("require('agent_server').send_typed()")
    ed.wait("return require('agent_server.chat').text():find('word12', 1, true) ~= nil", what="the answer streaming")
    ed.lua("require('agent_server.transcript').set_prompt('/usage')")
    ed.lua("require('agent_server').send_typed()")
    ed.idle()
    return ed, words, ed.chat()


def test_a_slash_command_answered_while_the_answer_streamed_split_the_streaming_text_in_the_chat(
        make_editor, endpoint, workspace):
    """VS Code's F2 in Neovim: ``/usage`` sent while the answer streams is answered at once; its
    prompt and answer were drawn at the end of the chat, ending the streamed line, so the rest of
    the answer went on below them: ``… word9 wo`` ⏎ (the command) ⏎ ``rd10 …``. Chunks are routed by
    their ``messageId``: the answer stays one text, the command's exchange drawn after it."""
    ed, words, chat = usage_sent_while_the_answer_streams(make_editor, endpoint)
    assert words in chat, chat  # one text, never split by the command
    assert "word79" in chat and chat.index(words) < chat.index("/usage"), chat
    answer = chat.split("## You\n/usage\n\n## Agent\n", 1)[1].split("\n\n_— stop: end_turn —_", 1)[0]
    assert answer.strip() and "word" not in answer, chat  # the command's answer, after its prompt, alone
    assert chat.count("_— stop: end_turn —_") == 2, chat  # the turn's, the command's


def test_the_turns_stop_line_landed_below_the_command_exchanges_made_during_the_turn(make_editor, endpoint, workspace):
    """``/usage`` sent while the answer streamed is drawn below the answer, which goes on above it;
    the turn's "stop: end_turn" line was then drawn at the end of the chat, under the command's
    exchange, far from the answer it closes. It closes the answer, above the command."""
    ed, words, chat = usage_sent_while_the_answer_streams(make_editor, endpoint)
    assert words + "\n\n_— stop: end_turn —_\n\n## You\n/usage\n\n## Agent\nNo model usage" in chat, chat
    assert chat.rstrip().endswith("_— stop: end_turn —_") and chat.count("_— stop: end_turn —_") == 2, chat
    assert ed.lua("""local t = require('agent_server.transcript')
                     local n = 0
                     for row = 0, t.sep_row() - 1 do
                       if t.is_own(row) and vim.api.nvim_buf_get_lines(t.buf(), row, row + 1, false)[1]:find('stop: end_turn', 1, true) then
                         n = n + 1
                       end
                     end
                     return n""") == 2  # both are the chat's own lines


def test_a_text_chunk_without_message_id_while_a_slash_command_waited_was_taken_as_its_reply(make_editor):
    """An agent that sends no ``messageId`` streams its turn's answer while a slash command waits for
    its reply (agent-server marks a reply ``cmd-N``): the turn's chunk was taken as the command's
    reply and drawn under it. It stays in the turn's answer, which goes on where it was."""
    ed = make_editor(server_cmd=SCRIPTED)
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('hold')")
    ed.lua("require('agent_server').send_typed()")
    ed.wait("return require('agent_server.chat').text():find('part one', 1, true) ~= nil", what="the turn's first chunk")
    ed.lua("require('agent_server.transcript').set_prompt('/usage')")
    ed.lua("require('agent_server').send_typed()")
    ed.idle()
    chat = ed.chat()
    assert "## Agent\npart one part two part three\n\n_— stop: end_turn —_\n\n## You\n/usage\n" in chat, chat
    reply = chat.split("## You\n/usage\n\n## Agent\n", 1)[1]
    assert reply == "the reply to /usage\n\n_— stop: end_turn —_", chat


def test_slash_commands_sent_while_the_answer_streamed_had_their_answers_drawn_under_later_commands(
        make_editor, endpoint, workspace):
    """Newcomer 3, finding 21 in Neovim: ``/compact`` sent while the answer streams is answered when
    the turn ends, so its answer was drawn at the end of the chat — under the prompt of the last
    command sent meanwhile (``/bogus``), as if it answered that one. A command's answer goes under
    its own prompt, above the prompts sent after it; the model's answer stays one text, and
    ``/model``'s TOML and ``/bogus``'s list keep their line breaks."""
    words = " ".join(f"chunk{i}." for i in range(150))
    endpoint.push(text_stream(words, chunk_size=8, delay=0.05))
    ed = make_editor()
    ed.cmd("AgentChat")

    def send(text: str, answer: str | None = None) -> None:
        ed.lua("require('agent_server.transcript').set_prompt(...)", text)
        ed.lua("require('agent_server').send_typed()")
        if answer:
            ed.wait("return require('agent_server.chat').text():find(..., 1, true) ~= nil", answer, what=answer)

    send("tell me", "chunk12.")
    send("/compact")  # answered once the turn has ended
    send("/usage", "No model usage recorded yet")
    send("/model fake-2", 'id = "fake-2"')
    send("/bogus", "Unknown command /bogus")
    assert "chunk149." not in ed.chat()  # all of it while the answer streamed
    ed.idle()
    chat = ed.chat()
    assert words in chat, chat  # one text
    sections = chat.split("\n## You\n")
    replies = {s.split("\n", 1)[0]: s.split("\n## Agent\n", 1)[1] for s in sections[2:]}
    assert list(replies) == ["/compact", "/usage", "/model fake-2", "/bogus"], chat
    assert replies["/compact"].startswith("Nothing to compact yet"), chat
    assert replies["/usage"].startswith("No model usage recorded yet"), chat
    assert '\n\n[[models]]\nid = "fake-2"\nname = "fake-2"  # optional' in replies["/model fake-2"], chat
    assert "Unknown command" not in replies["/model fake-2"], chat
    assert replies["/bogus"].startswith("Unknown command /bogus. The commands are:\n  /mode <"), chat
    assert "\n  /undo — " in replies["/bogus"] and "Nothing to compact" not in replies["/bogus"], chat
    for name in ("/compact", "/usage", "/model fake-2"):
        assert replies[name].rstrip().endswith("_— stop: end_turn —_"), (name, chat)


def test_a_slash_command_answered_while_a_code_block_streamed_still_split_the_answer(
        make_editor, endpoint, workspace):
    """Newcomer 3's item on the split-stream fix: it was skipped while the model's text was inside an
    open fenced code block, so ``/usage`` sent then closed the block, drew its exchange, and the rest
    of the code went on below it as markdown, its closing fence opening a new block. The answer is
    held there too: it stays one text with one code block, and while the block is open the chat's
    closing fence stands below it, so the command's exchange is never drawn as code."""
    code = "".join(f"line_{i} = {i}\n" for i in range(60))
    answer = "Here it is:\n```python\n" + code + "```\nAfter the block."
    endpoint.push(text_stream(answer, chunk_size=7, delay=0.05))
    ed = make_editor()
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('code please')")
    ed.lua("require('agent_server').send_typed()")
    ed.wait("return require('agent_server.chat').text():find('line_8 = 8', 1, true) ~= nil", what="the code streaming")
    ed.lua("require('agent_server.transcript').set_prompt('/usage')")
    ed.lua("require('agent_server').send_typed()")
    ed.wait("return require('agent_server.chat').text():find('No model usage', 1, true) ~= nil", what="/usage's answer")
    during = ed.chat()
    assert "line_59" not in during, during  # the block still open: closed by the chat below it
    streamed = during.split("\n## You\n/usage\n", 1)[0]
    assert streamed.rstrip().endswith("\n```"), during
    assert streamed.count("```") == 2, during  # the model's opening fence, the chat's closing one
    ed.idle()
    chat = ed.chat()
    assert answer in chat, chat  # one text, one code block
    assert chat.index(answer) < chat.index("## You\n/usage\n"), chat
    after = chat.split("## You\n/usage\n", 1)[1]
    assert "```" not in after and "line_" not in after, chat


def complete_prompt(ed, *lines: str) -> list[str]:
    """The words <C-x><C-o> offers with ``lines`` in the chat's prompt area, the cursor at their end."""
    return ed.lua("""
        local lines = ...
        local transcript = require('agent_server.transcript')
        transcript.set_prompt(table.concat(lines, '\\n'))
        vim.wo.virtualedit = 'onemore'  -- the cursor after the last character, as in insert mode
        vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), #lines[#lines] })
        local chat = require('agent_server.chat')
        local start = chat.complete(1, '')
        if start < 0 then return {} end
        local words = {}
        local line = vim.api.nvim_get_current_line()
        for _, c in ipairs(chat.complete(0, line:sub(start + 1))) do words[#words + 1] = c.word end
        return words""", list(lines))


def test_every_advertised_slash_command_completes_in_the_prompt_and_only_as_its_first_word(
        make_editor, endpoint, workspace):
    """Item 3 of the round: each command of ``available_commands_update`` completes in the chat's
    prompt area (<C-x><C-o>), in the server's order; a ``/`` on a later line of a prompt is no
    command (the server reads one only at the prompt's start) and completes nothing."""
    from agent_server.host import commands

    ed = make_editor()
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('/help')")  # an unknown command: answered with the list
    ed.lua("require('agent_server').send_typed()")
    ed.idle()
    ed.wait("return require('agent_server.chat').state.commands ~= nil", what="available_commands_update")
    every = ["/" + c["name"] for c in commands.COMMANDS]
    assert complete_prompt(ed, "/") == every
    for name in every:
        assert name in complete_prompt(ed, name[:3]), name
    assert complete_prompt(ed, "  /und") == ["/undo"]
    assert complete_prompt(ed, "fix this", "/un") == [] and complete_prompt(ed, "", "/un") == ["/undo"]
    assert not endpoint.requests  # nothing reached the model


def test_slash_commands_could_not_be_completed_before_the_first_session(make_editor, endpoint, workspace):
    """ACP sends the slash commands with a session, so the chat completed none before the first
    prompt. agent-server lists them in its ``initialize`` answer (``_meta.agentServer
    .availableCommands``): they complete as soon as the server has started, no session made. An
    agent that lists them only with a session: completion says how to get them."""
    from agent_server.host import commands

    ed = make_editor()
    ed.cmd("AgentChat")
    ed.wait("return require('agent_server.client').state.initialized", what="the server started")
    assert complete_prompt(ed, "/") == ["/" + c["name"] for c in commands.COMMANDS]
    assert complete_prompt(ed, "/und") == ["/undo"]
    assert ed.lua("return require('agent_server.client').state.session_id") is None
    assert not endpoint.requests
    other = make_editor(server_cmd=SCRIPTED)
    other.cmd("AgentChat")
    other.lua("_G.echoed = {}; vim.api.nvim_echo = function(chunks) table.insert(_G.echoed, chunks[1][1]) end")
    other.wait("return require('agent_server.client').state.initialized", what="the scripted agent started")
    assert complete_prompt(other, "/") == []
    assert "sending /help shows them" in other.lua("return _G.echoed[#_G.echoed]")


def test_the_values_of_mode_and_model_did_not_complete_in_the_prompt(make_editor, endpoint, workspace, tmp_path):
    """``/mode <Tab>`` completed nothing though the session lists its modes (and the server its
    models, the ``model`` option): the command's hint was all there was. They complete now."""
    config = tmp_path / "models.toml"
    config.write_text('[[models]]\nid = "other-model"\n')
    ed = make_editor(env={"AGENT_SERVER_CONFIG": str(config)})
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('/usage')")
    ed.lua("require('agent_server').send_typed()")
    ed.idle()

    def complete(line: str) -> list[str]:
        return ed.lua("""
            local line = ...
            require('agent_server.transcript').set_prompt(line)
            vim.wo.virtualedit = 'onemore'
            vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), #line })
            local chat = require('agent_server.chat')
            local start = chat.complete(1, '')
            if start < 0 then return {} end
            local words = {}
            for _, c in ipairs(chat.complete(0, line:sub(start + 1))) do words[#words + 1] = c.word end
            return words""", line)

    modes = ed.lua("return vim.tbl_map(function(m) return m.id end, require('agent_server.client').state.modes.availableModes)")
    assert "accept-edits" in modes and complete("/mode ") == modes
    assert complete("/mode acc") == ["accept-edits"]
    models = ed.lua("return vim.tbl_map(function(o) return o.value end, (require('agent_server.client').models()))")
    assert "other-model" in models and complete("/model ") == models, models
    assert complete("/model oth") == ["other-model"]
    assert complete("/usage ") == [] and complete("/mode read-only x") == []


def test_ctrl_c_on_a_turn_that_had_already_failed_left_cancelling_in_the_chat_for_ever(make_editor, endpoint, workspace):
    """Finding 12 (newcomer 3): a prompt whose turn failed at once, then <C-c> in the chat: the chat
    ended in "_cancelling …_" and no turn end ever came to close it (no turn was running)."""
    endpoint.push({"kind": "error", "status": 400, "json": {"error": {"message": "bad request: the model refused it"}}})
    ed = make_editor()
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('do it')")
    ed.lua("require('agent_server').send_typed()")
    ed.idle()
    assert "**error:**" in ed.chat(), ed.chat()
    typed(ed, "<C-c>")
    ed.idle()
    chat = ed.chat()
    assert "cancelling" not in chat, chat
    assert chat.rstrip().endswith("_nothing to cancel: no turn is running_"), chat
    assert ed.lua("return require('agent_server').status()") == "idle"
