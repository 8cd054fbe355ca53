"""An ``AgentSession`` in-process over real HTTP to a strict offline endpoint, with an editor
connection that stalls on a chosen update: the set-up of the tests that stop a turn at an exact
point (tests/agent/test_cancel_windows.py, test_stream_journal.py).

Import ``strict_endpoint`` into a test module to use the strict endpoint (one that answers 400 to a
history without a result for each call, as providers do) under the usual fixture name.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_server.agent import AgentSession, RequestHeader
from agent_server.config.load import AgentSettings, Config, ProviderSettings
from agent_server.llm import ChatClient
from agent_server.offline import OfflineEndpoint
from agent_server.session import EventLog
from agent_server.tools import BUILTIN_TOOLS, ToolContext
from agent_server.tools.pipeline import ToolRunner

from .timeouts import HANG


class StallingEditor:
    """An editor connection that records every update and stalls for ever on the ``n``-th update of
    kind ``stall_on`` (``None``: never); ``stalled`` is set when it does."""

    def __init__(self, stall_on: str | None = None, n: int = 1) -> None:
        self.updates: list[dict] = []
        self.stall_on, self.n, self.seen = stall_on, n, 0
        self.stalled = asyncio.Event()

    async def emit(self, update: dict) -> None:
        self.updates.append(update)
        if update["sessionUpdate"] == self.stall_on:
            self.seen += 1
            if self.seen == self.n:
                self.stalled.set()
                await asyncio.Event().wait()


@pytest.fixture(name="endpoint")
async def strict_endpoint():
    async with OfflineEndpoint(reject_invalid_history=True) as ep:
        yield ep


def make_session(folder: Path, endpoint: OfflineEndpoint, editor: StallingEditor, *, context_window: int,
                 reasoning_content: str, max_attempts: int = 1) -> AgentSession:
    """A session logging to ``folder/s/events.jsonl``, its tools working in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    log = EventLog.create(folder / "s" / "events.jsonl", {"cwd": str(folder)})
    provider = ProviderSettings(profile="custom", base_url=endpoint.base_url, model="m", context_window=context_window,
                                reasoning_content=reasoning_content, key_required=False)
    config = Config(provider=provider, agent=AgentSettings(retry_base_delay=0.0, max_attempts=max_attempts))
    client = ChatClient(endpoint.base_url, None)
    header = RequestHeader(system="S", model="m", params={}, tools=[], reasoning_content=reasoning_content)
    runner = ToolRunner(log, ToolContext.on_disk(folder), editor.emit, {t.name: t for t in BUILTIN_TOOLS})
    return AgentSession("s", log, config, header_factory=lambda: header, client_factory=lambda: client,
                        emit=editor.emit, runner=runner)


async def stall(session: AgentSession, editor: StallingEditor, text: str = "go") -> asyncio.Future:
    """Start a prompt and return its task once the editor has stalled."""
    task = asyncio.ensure_future(session.prompt([{"type": "text", "text": text}]))
    await asyncio.wait_for(editor.stalled.wait(), HANG)
    return task
