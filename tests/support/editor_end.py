"""The editor's end of an ACP connection as ``EditorFiles`` sees it, scripted, for the server's tests.

Role: ``EditorEnd`` answers ``fs/read_text_file`` with a fixed text (and ``_meta.agentServer`` when
given), takes ``fs/write_text_file`` into its buffer when it has a file to save it to, and keeps the
proposals it is sent, each answered at once with a fixed outcome. ``quiet`` is an emitter that says nothing.

Must never: check or apply a proposal (``support.editor`` is the editor that does).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any


class EditorEnd:
    """Reads answer ``text`` (with ``meta`` as ``_meta.agentServer`` unless ``None``); a write is
    refused unless ``saves_to`` is given, then it is kept in ``writes`` and saved there (the buffer
    saved: the file is written); proposals are kept in ``proposals`` and answered ``answer``
    (``rejected`` by default)."""

    def __init__(self, text: str, meta: dict[str, Any] | None = None, *, saves_to: Path | None = None,
                 answer: dict[str, Any] | None = None) -> None:
        self.text, self.meta, self.saves_to = text, meta, saves_to
        self.answer = answer or {"outcome": "rejected"}
        self.writes: list[str] = []
        self.proposals: list[dict[str, Any]] = []

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        if method == "fs/read_text_file":
            return {"content": self.text} if self.meta is None else {"content": self.text,
                                                                     "_meta": {"agentServer": self.meta}}
        assert method == "fs/write_text_file" and self.saves_to is not None, method
        self.writes.append(params["content"])
        self.saves_to.write_text(params["content"])
        return {}

    async def begin_request(self, method: str, params: dict[str, Any]):
        self.proposals.append(params)
        future = asyncio.get_running_loop().create_future()
        future.set_result(self.answer)
        return 1, future

    def forget(self, request_id: int) -> None:
        pass

    def cancel_outgoing(self, request_id: int) -> None:
        pass


async def quiet(update: dict[str, Any]) -> None:
    """An emitter of session updates that sends nothing."""
