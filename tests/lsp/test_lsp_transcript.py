"""The LSP turn's markdown transcript (``server/lsp/turns.py``): each step's text stays its own
paragraph, never glued to the next step's ("Reading.Fixing.Fixed add.")."""

from __future__ import annotations

import asyncio

from agent_server.server.lsp.turns import TurnProgress


def _text(text: str) -> dict:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}


def _tool(title: str) -> dict:
    return {"sessionUpdate": "tool_call", "toolCallId": title, "title": title, "status": "pending"}


def test_transcript_joins_step_texts_without_a_break(tmp_path):
    turn = TurnProgress(None, None, "fix add", tmp_path / "turn-1.md")
    updates = [_text("Read"), _text("ing."), _tool("Read calc.py"), _text("Fixing."), _tool("Edit calc.py"),
               _tool("Run the tests"), _text("Fixed "), _text("add.")]

    async def feed():
        for u in updates:
            await turn.on_update(u)
    asyncio.run(feed())
    text = turn.write_transcript("end_turn").read_text()
    assert "### Answer\n\nReading.\n\nFixing.\n\nFixed add.\n" in text, text
    assert turn.tail() == "Reading. Fixing. Fixed add."


def test_transcript_keeps_a_step_text_that_already_ends_its_paragraph(tmp_path):
    turn = TurnProgress(None, None, "q", tmp_path / "turn-1.md")

    async def feed():
        for u in [_text("One.\n\n"), _tool("Read a"), _text("Two.\n"), _tool("Read b"), _text("Three.")]:
            await turn.on_update(u)
    asyncio.run(feed())
    assert "### Answer\n\nOne.\n\nTwo.\n\nThree.\n" in turn.write_transcript("end_turn").read_text()
