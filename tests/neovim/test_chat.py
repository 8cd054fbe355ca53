"""The chat buffer against the real agent-server: thoughts folded, one line per tool call whose sign
changes in place, the plan replaced in place, usage in the header, the stop reason at the end."""

from __future__ import annotations

from support.nvim import call

from agent_server.offline import text_stream, tool_call_stream


def test_chat_shows_folded_thoughts_tool_lines_plan_usage_and_the_stop_reason(make_editor, endpoint, workspace):
    (workspace / "a.txt").write_text("alpha\n")
    endpoint.push(tool_call_stream([call("p1", "plan", entries=[
        {"content": "read a.txt", "status": "in_progress"}, {"content": "answer", "status": "pending"}])]))
    endpoint.push(tool_call_stream([call("r", "read", path="a.txt")]))
    endpoint.push(tool_call_stream([call("p2", "plan", entries=[
        {"content": "read a.txt", "status": "completed"}, {"content": "answer", "status": "in_progress"}])]))
    endpoint.push(text_stream("It says alpha.", reasoning="The file holds one word.\nSay it."))
    ed = make_editor()
    ed.cmd("AgentChat")
    ed.cmd("AgentAsk what is in a.txt?")
    ed.idle()
    chat = ed.chat()
    lines = chat.splitlines()
    assert lines[0].startswith("<!-- agent-server · idle") and "tokens" in lines[0]  # state and usage
    assert chat.count("**Plan**") == 1  # replaced in place, not appended
    assert "- [x] read a.txt\n- [~] answer" in chat
    assert chat.count("Read a.txt") == 1 and "- ✓ Read a.txt" in chat  # one line, its sign updated
    assert "> The file holds one word.\n> Say it." in chat
    assert "It says alpha." in chat and chat.rstrip().endswith("_— stop: end_turn —_")
    thought = lines.index("> The file holds one word.") + 1
    assert ed.lua("return vim.fn.foldclosed(...)", thought) != -1  # folded in the chat window
    assert ed.lua("return vim.fn.foldclosed(...)", lines.index("It says alpha.") + 1) == -1
