"""An arriving edit proposal never takes the keyboard from where the user types (newcomer 5,
finding 1): the prompt typed on in insert mode stays in the prompt, the proposed text stays the
agent's; a deliberate edit of the proposed side is said as such in the chat — a real Neovim
(binwheels) against the real server and the offline endpoint."""

from __future__ import annotations

import time

from support.nvim import call, editor_with_pending_edit, push
from support.timeouts import HANG

from agent_server.offline import text_stream, tool_call_stream

PROMPT = "return require('agent_server.transcript').prompt_text()"
PROPOSED = """local p = require('agent_server.proposals').latest()
local v = p and p.docs[1].view
if not v or not vim.api.nvim_buf_is_valid(v.prop_buf) then return nil end
return table.concat(vim.api.nvim_buf_get_lines(v.prop_buf, 0, -1, false), '\\n')"""


def test_typing_the_next_prompt_in_insert_mode_while_a_proposal_arrived_went_into_the_proposed_file(
        make_editor, endpoint, workspace):
    path = workspace / "plain.txt"
    path.write_text("one\ntwo\nthree\n")
    push(endpoint, call("r", "read", path="plain.txt"),
         call("e", "edit", path="plain.txt", old_string="two", new_string="TWO"), text_stream("done"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentChat")
    chat_buf = ed.lua("return require('agent_server.chat').buffer()")
    ed.nvim.input("ichange two<C-s>")  # sent from insert mode: the user stays in insert mode
    ed.wait(PROPOSED, what="the proposal shown")
    ed.nvim.input("zzz")  # the next prompt, typed on while the proposal is on screen
    ed.wait(f"local p = (function() {PROMPT} end)() or '' local s = (function() {PROPOSED} end)() or '' "
            "return p:find('zzz', 1, true) or s:find('zzz', 1, true)", what="the typed keys taken")
    assert ed.lua(PROMPT) == "zzz"
    assert ed.lua(PROPOSED) == "one\nTWO\nthree"
    assert ed.lua("return vim.api.nvim_get_mode().mode") == "i"
    assert ed.lua("return vim.api.nvim_get_current_buf()") == chat_buf
    # the chat says where the proposal is and how to answer it
    assert "AgentAccept" in ed.chat()
    ed.nvim.input("<Esc>")
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "one\nTWO\nthree\n"
    assert ed.lua(PROMPT) == "zzz"


def test_a_proposal_the_user_edited_before_accepting_was_said_only_applied_and_saved(make_editor, endpoint, workspace):
    path = workspace / "m.txt"
    path.write_text("a\nb\nc\n")
    push(endpoint, call("r", "read", path="m.txt"),
         call("e", "edit", path="m.txt", old_string="b", new_string="B"), text_stream("done"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.cmd("AgentAsk change b")
    ed.proposal_open()
    ed.keys("2GA!<Esc>")  # the user's deliberate adjustment, in the proposed side
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "a\nB!\nc\n"
    assert "applied with your changes and saved" in ed.chat(), ed.chat()


def test_a_prompt_cancelled_with_ctrl_c_while_the_endpoint_hung_was_not_put_back_in_the_prompt(
        make_editor, endpoint):
    """Newcomer 5, finding 9a: after a refused connection the prompt came back to the prompt area,
    but not after <C-c> of a request the endpoint never answered: the user had to type it again."""
    endpoint.push({"kind": "hang", "headers": False})
    ed = make_editor()
    ed.cmd("AgentChat")
    ed.lua("require('agent_server.transcript').set_prompt('SAY hello')")
    ed.lua("require('agent_server').send_typed()")
    ed.wait("return require('agent_server.chat').text():find('## You\\nSAY hello', 1, true)", what="the prompt sent")
    assert ed.lua(PROMPT) == ""
    ed.nvim.input("<C-c>")
    ed.idle()
    assert "_— cancelled —_" in ed.chat(), ed.chat()
    ed.wait(f"return ({PROMPT.removeprefix('return ')}) == 'SAY hello'", what="the prompt given back")


def test_a_proposal_accepted_after_switching_session_left_its_edit_line_spinning_for_ever(
        make_editor, endpoint, workspace):
    """Newcomer 5, finding 9d: a proposal waited, the user loaded another session, then accepted it in
    its still-open tab: the file was written, but the left-behind turn's line in the chat stayed
    "⚙ Edit …" (the chat dropped every update of a session other than the one it shows)."""
    endpoint.push(text_stream("the first session's answer"))
    ed = make_editor()
    ed.cmd("AgentAsk remember this")
    ed.idle()
    first = ed.lua("return require('agent_server.client').state.session_id")
    ed.cmd("AgentNew")
    ed.wait("return require('agent_server.client').state.session_id ~= ...", first, what="a new session")
    path = workspace / "s.py"
    editor_with_pending_edit(make_editor, endpoint, path, "a = 1", "a = 2", text_stream("done"), ed=ed)
    assert "Edit s.py" in ed.chat()
    ed.choose(first)
    ed.cmd("AgentSessions")
    ed.wait("return require('agent_server.client').state.session_id == ... "
            "and require('agent_server.chat').text():find('replayed', 1, true) ~= nil", first, what="the load")
    ed.cmd("AgentAccept")
    ed.wait("return require('agent_server.chat').text():find('✓ Edit s.py', 1, true)", what="the Edit line finished")
    assert path.read_text() == "a = 2\n"
    assert "⚙ Edit s.py" not in ed.chat(), ed.chat()


def test_a_permission_question_was_a_modal_inputlist_that_kept_the_user_from_the_file_and_the_chat(
        make_editor, endpoint, workspace):
    """Newcomer 5, finding 9c: with Neovim's own vim.ui.select a permission question was
    `inputlist()` — while it waited the user could not look at the file or the chat; `q` denied. It
    waits in the chat now, its options numbered, answered by :AgentAnswer N."""
    endpoint.push(tool_call_stream([call("b", "bash", command="echo hi > out.txt", description="write a file")]))
    endpoint.push(text_stream("wrote it"))
    ed = make_editor(env={"AGENT_SERVER_SANDBOX": "off"})  # every shell command asks first
    ed.cmd("AgentAsk write out.txt")
    deadline = time.monotonic() + HANG
    while "Answer with :AgentAnswer N" not in ed.chat():
        # a fast API call: it answers while inputlist() waits, when nvim_exec_lua would not
        assert not ed.nvim.request("nvim_get_mode")["blocking"], "the question blocked the editor (a modal picker)"
        assert time.monotonic() < deadline, ed.chat()
        time.sleep(0.05)
    assert "1 Allow" in ed.chat(), ed.chat()
    assert ed.nvim.request("nvim_get_mode") == {"mode": "n", "blocking": False}
    ed.cmd(f"edit {workspace / 'other.txt'}")  # the user looks elsewhere first: nothing is answered
    assert ed.lua("return require('agent_server.permissions').waiting()")
    n = ed.lua("""local line = require('agent_server.chat').text():match('Answer with :AgentAnswer N — ([^\\n]*)')
        for num, name in line:gmatch('(%d+) ([^·(]+)') do if vim.trim(name) == 'Allow once' or vim.trim(name) == 'Allow' then return tonumber(num) end end""")
    assert n, ed.chat()
    ed.cmd(f"AgentAnswer {n}")
    ed.idle()
    assert (workspace / "out.txt").read_text() == "hi\n"
    assert "wrote it" in ed.chat()


def two_asking_reads(endpoint, workspace, tmp_path):
    """The model's next answer: two reads run side by side that both ask (`.env`, a secret file, and
    a file outside the workspace, returned), then a text."""
    (workspace / ".env").write_text("API_TOKEN=sk-secret-value\n")
    outside = tmp_path / "outside" / "notes.txt"
    outside.parent.mkdir()
    outside.write_text("notes from elsewhere\n")
    endpoint.push(tool_call_stream([call("a", "read", path=".env"), call("b", "read", path=str(outside))]))
    endpoint.push(text_stream("read what I could"))
    return outside


TOP_QUESTION = """local text = require('agent_server.chat').text()
local at_env, at_out = text:find('Read .env', 1, true), text:find('Read {out}', 1, true)
return at_env and at_out and (at_env < at_out and 'env' or 'out') or nil"""


def test_with_two_questions_waiting_agent_answer_answered_the_one_below_the_one_read(
        make_editor, endpoint, workspace, tmp_path):
    """Two reads of one answer run side by side and both ask (a secret file, a file outside the
    workspace): both questions wait in the chat, each under its call with its options numbered.
    :AgentAnswer N answered the latest asked — the question below the one the user read first —
    so the Reject meant for `.env` rejected the other read, and the next answer, meant for that one,
    allowed `.env`: the secret went to the model. The questions are answered from the top down."""
    outside = two_asking_reads(endpoint, workspace, tmp_path)
    ed = make_editor()
    ed.cmd("AgentAsk read both")
    ed.wait("local _, n = require('agent_server.chat').text():gsub('Answer with :AgentAnswer N', '') return n == 2",
            what="both questions in the chat")
    top = ed.lua(TOP_QUESTION.replace("{out}", str(outside)))
    assert top in ("env", "out"), ed.chat()

    def option(name: str) -> int:  # the options are the same four for both questions
        line = ed.chat().split("Answer with :AgentAnswer N — ", 1)[1].split("\n", 1)[0]
        return next(int(n) for n, o in (p.split(" ", 1) for p in line.split(" (", 1)[0].split(" · "))
                    if o.startswith(name))

    # the user reads the top question first: rejects it; then allows the other one once
    ed.cmd(f"AgentAnswer {option('Reject')}")
    ed.cmd(f"AgentAnswer {option('Allow once')}")
    ed.idle()
    (results,) = [[m["content"] for m in r.json()["messages"] if m["role"] == "tool"] for r in endpoint.requests[1:]]
    by_call = dict(zip(("env", "out"), results))
    rejected, allowed = (by_call["env"], by_call["out"]) if top == "env" else (by_call["out"], by_call["env"])
    assert "sk-secret-value" not in rejected and "notes from elsewhere" not in rejected, by_call
    assert "sk-secret-value" in allowed or "notes from elsewhere" in allowed, by_call


def test_an_accepted_edit_whose_write_a_bufwritepre_error_stopped_told_the_model_the_user_had_unsaved_changes(
        make_editor, endpoint, workspace):
    """The Neovim side of 9a4745e: the buffer held nothing unsaved, the edit was accepted, and the
    write that saves it failed (a format-on-save BufWritePre that errors aborts `:write`). The chat
    said only "applied (not saved)" — the error swallowed — and the model was told the user had
    unsaved changes, to be saved by them. The answer carries `saveFailed` (docs/protocol.md): the
    model is told the editor's save did not complete, and the chat says why."""
    from support.nvim import tool_messages

    path = workspace / "fmt.txt"
    path.write_text("one\ntwo\n")
    push(endpoint, call("r", "read", path="fmt.txt"),
         call("e", "edit", path="fmt.txt", old_string="two", new_string="TWO"), text_stream("done"))
    ed = make_editor()
    ed.cmd(f"edit {path}")
    ed.lua("vim.api.nvim_create_autocmd('BufWritePre', { pattern = '*.txt', callback = function() "
           "error('the formatter crashed') end })")
    ed.cmd("AgentAsk change two")
    ed.proposal_open()
    ed.cmd("AgentAccept")
    ed.idle()
    assert path.read_text() == "one\ntwo\n"  # the write never happened
    told = tool_messages(endpoint, 2)[-1]["content"]
    assert "until the user saves it" not in told, told
    assert "the editor's save did not complete" in told, told
    assert "the formatter crashed" in ed.chat(), ed.chat()


def test_a_question_waiting_in_a_session_loaded_again_was_not_drawn_in_its_transcript(
        make_editor, endpoint, workspace):
    """Session A's turn went on after the user loaded session B (A's proposal accepted in its
    still-open tab) and A's next call asked: the question is drawn in A's part of the chat
    (e1eec85). The user loads A again to answer it: the replay draws A's transcript anew, and the
    question waiting was not in it — nothing to read, :AgentAnswer answering a question out of
    sight. It is drawn under its call in the loaded transcript, and answered there."""
    endpoint.push(text_stream("the first session's answer"))
    ed = make_editor(env={"AGENT_SERVER_SANDBOX": "off"})  # every shell command asks first
    ed.cmd("AgentAsk remember this")
    ed.idle()
    first = ed.lua("return require('agent_server.client').state.session_id")
    ed.cmd("AgentNew")
    ed.wait("return require('agent_server.client').state.session_id ~= ...", first, what="a new session")
    path = workspace / "s.py"
    editor_with_pending_edit(make_editor, endpoint, path, "a = 1", "a = 2",
                             call("b", "bash", command="echo hi > out.txt", description="write out.txt"),
                             text_stream("done"), ed=ed)
    second = ed.lua("return require('agent_server.client').state.session_id")
    ed.lua("_G.builtin_select = vim.ui.select")
    ed.choose(first)
    ed.cmd("AgentSessions")
    ed.wait("return require('agent_server.client').state.session_id == ... "
            "and require('agent_server.chat').text():find('replayed', 1, true) ~= nil", first, what="the load")
    ed.lua("vim.ui.select = _G.builtin_select")  # Neovim's own picker again: questions wait in the chat
    ed.cmd("AgentAccept")  # A's proposal, in its tab: A's turn goes on to its command, which asks
    ed.wait("return require('agent_server.permissions').waiting()", what="A's question")
    ed.lua("require('agent_server').load(...)", second)  # as :AgentSessions does once A is picked
    ed.wait("return require('agent_server.client').state.session_id == ... and require('agent_server.chat')"
            ".text():find('# Session ' .. ... .. ' (loaded)', 1, true) ~= nil", second, what="A loaded")
    ed.wait("local t = require('agent_server.chat').text() local at = t:find('# Session ' .. ... .. ' (loaded)', 1, true) "
            "return t:find('Answer with :AgentAnswer N', at, true) ~= nil", second,
            what="A's question in its loaded transcript")
    ed.cmd("AgentAnswer 1")
    ed.idle()
    assert (workspace / "out.txt").read_text() == "hi\n"

# A picker plugin's vim.ui.select as telescope-ui-select and dressing behave: one picker at a time,
# the one open ends with no choice (on_choice(nil)) when another opens; each choice is made later.
ONE_PICKER_AT_A_TIME = """
_G.pickers = {}
vim.ui.select = function(items, opts, on_choice)
  local open = _G.pickers[#_G.pickers]
  if open and not open.done then
    open.done = true
    open.on_choice(nil)
  end
  table.insert(_G.pickers, { items = items, prompt = opts.prompt, on_choice = on_choice })
end
function _G.pick(name)
  for _, p in ipairs(_G.pickers) do
    if not p.done then
      for _, it in ipairs(p.items) do
        if it.name == name then p.done = true; p.on_choice(it); return p.prompt end
      end
    end
  end
end
"""


def test_two_questions_at_once_with_a_picker_plugin_denied_the_first_unseen(make_editor, endpoint, workspace, tmp_path):
    """Two reads of one answer run side by side and both ask: with a picker plugin each question
    opened its picker at once, and the second one's closed the first with no choice — a denial the
    user never gave (`.env`'s read refused, unseen). The pickers open one after the other."""
    two_asking_reads(endpoint, workspace, tmp_path)
    ed = make_editor()
    ed.lua(ONE_PICKER_AT_A_TIME)
    ed.cmd("AgentAsk read both")
    ed.wait("return #_G.pickers >= 1", what="a picker")
    ed.wait("return require('agent_server.chat').text():find('notes.txt', 1, true) ~= nil "
            "and require('agent_server.chat').text():find('.env', 1, true) ~= nil", what="both questions drawn")
    assert ed.lua("return _G.pick('Allow once')"), ed.chat()  # the picker on screen
    ed.wait("return #vim.tbl_filter(function(p) return not p.done end, _G.pickers) == 1", what="the next picker")
    assert ed.lua("return _G.pick('Allow once')"), ed.chat()
    ed.idle()
    results = [m["content"] for m in endpoint.requests[1].json()["messages"] if m["role"] == "tool"]
    assert any("sk-secret-value" in r for r in results) and any("notes from elsewhere" in r for r in results), results
