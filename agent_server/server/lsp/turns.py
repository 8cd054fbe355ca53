"""One turn in an LSP editor: a work-done progress and a markdown transcript.

Role: ``TurnProgress`` receives the host's events (``session/update`` payloads) of one running
turn and shows them with ``$/progress``: ``begin`` when the turn starts, a ``report`` per tool step
(its title) and for the tail of the answer as it streams, ``end`` with how the turn ended. The
whole answer, with the prompt and the steps, is appended to the session's one markdown transcript
(``transcript.md`` in its state folder, a section per turn), which the editor is asked to show
(``window/showDocument`` of the same URI every turn, so it reuses its window) — else the answer is
shown with ``window/showMessage``.

Must never: report after ``end``, or let a failure to show something fail the turn.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from lsprotocol import types

log = logging.getLogger("agent_server.lsp")

TAIL_CHARS = 80
"""Characters of the answer's tail shown in a progress report."""
TAIL_EVERY = 0.25
"""Seconds between two answer-tail reports (a streaming answer is not one report per chunk)."""


class TurnProgress:
    """The progress and transcript of one turn.

    ``server``: the pygls ``LanguageServer``; ``token``: the work-done progress token (``None``:
    no progress is shown); ``prompt``: what was asked (for the transcript); ``transcript``: the
    markdown file to append to; ``turn_number``: the turn's number in its session.
    """

    def __init__(self, server: Any, token: Any, prompt: str, transcript: Path, turn_number: int = 1) -> None:
        self.turn_number = turn_number
        self.server = server
        self.token = token
        self.prompt = prompt
        self.transcript = transcript
        self.steps: list[str] = []
        self.answer: list[str] = []
        self._new_step = False  # a tool step came after text: the next text starts a new paragraph
        self._ended = False
        self._last_tail = 0.0
        self.command = False
        """Whether the prompt was a slash command (its section is headed with it, not a turn number)."""

    def _send(self, value: Any) -> None:
        if self.token is None or self._ended:
            return
        progress = self.server.work_done_progress  # begin registers the token for its cancel
        send = {"begin": progress.begin, "report": progress.report, "end": progress.end}[value.kind]
        try:
            send(self.token, value)
        except Exception:  # the editor is gone: the turn goes on
            log.debug("progress not sent", exc_info=True)

    def begin(self, title: str) -> None:
        """``$/progress`` begin (cancellable)."""
        self._send(types.WorkDoneProgressBegin(title=title, cancellable=True, message=_line(self.prompt)))

    async def on_update(self, update: dict[str, Any]) -> None:
        """One host event of the turn: tool steps and answer chunks are reported."""
        kind = update.get("sessionUpdate")
        if kind == "tool_call":
            title = str(update.get("title") or "tool")
            self.steps.append(title)
            self._new_step = bool(self.answer)
            self._send(types.WorkDoneProgressReport(message=title))
        elif kind == "agent_message_chunk":
            content = update.get("content") or {}
            if content.get("type") == "text":
                text = str(content.get("text", ""))
                if self._new_step and text:  # each step's text is its own paragraph ("Reading." "Fixing.")
                    self._new_step = False
                    before = "".join(self.answer[-2:])
                    self.answer.append("" if before.endswith("\n\n") else "\n" if before.endswith("\n") else "\n\n")
                self.answer.append(text)
                now = time.monotonic()
                if now - self._last_tail >= TAIL_EVERY:
                    self._last_tail = now
                    self._send(types.WorkDoneProgressReport(message=self.tail()))

    def tail(self) -> str:
        """The end of the answer so far, on one line."""
        text = " ".join("".join(self.answer).split())
        return text if len(text) <= TAIL_CHARS else "…" + text[-TAIL_CHARS:]

    def end(self, message: str) -> None:
        """``$/progress`` end; nothing is reported after it."""
        if self.answer:
            self._send(types.WorkDoneProgressReport(message=self.tail()))
        self._send(types.WorkDoneProgressEnd(message=message))
        self._ended = True

    def write_transcript(self, stop: str) -> Path:
        """Append this turn to the session's markdown transcript (its title first, in a new one);
        returns its path."""
        steps = "\n".join(f"- {s}" for s in self.steps) or "_none_"
        heading = f"## Command {_line(self.prompt)}" if self.command else f"## Turn {self.turn_number}: prompt"
        text = (f"{heading}\n\n{self.prompt}\n\n### Steps\n\n{steps}\n\n"
                f"### Answer\n\n{''.join(self.answer).strip() or '_no answer_'}\n\n---\n_{stop}_\n\n")
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        with open(self.transcript, "a", encoding="utf-8") as fh:
            if fh.tell() == 0:
                fh.write("# agent-server\n\n")
            fh.write(text)
        return self.transcript


def _line(text: str) -> str:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return first if len(first) <= TAIL_CHARS else first[:TAIL_CHARS - 1] + "…"
