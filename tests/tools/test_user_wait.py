"""A call's deadline stands still while it waits on the user (``tools.user_wait``), and the LSP
front end's edit path waits for the user within the approval timeout, its clock paused."""

import asyncio
from pathlib import Path
from types import SimpleNamespace

from agent_server.server.lsp.documents import LspFiles
from agent_server.tools.files import FileSnapshot
from agent_server.tools.user_wait import CALL_CLOCK, CallClock, awaiting_user, run_within


async def test_a_call_that_runs_past_its_budget_is_timed_out():
    clock = CallClock()
    task = asyncio.ensure_future(asyncio.sleep(5))
    assert await run_within(task, clock, 0.1) is False
    task.cancel()


async def test_time_spent_awaiting_the_user_does_not_count_against_the_budget():
    now = [0.0]  # the clock's own time: the machine's load cannot move it

    async def reviewed():
        with awaiting_user():
            now[0] += 0.5  # five budgets of the user's time
            await asyncio.sleep(0)
        now[0] += 0.0625  # the call's own work
        await asyncio.sleep(0)
        return "done"
    clock = CallClock(now=lambda: now[0])
    token = CALL_CLOCK.set(clock)
    try:
        task = asyncio.ensure_future(reviewed())
    finally:
        CALL_CLOCK.reset(token)
    assert await run_within(task, clock, 0.1) is True and task.result() == "done"
    assert clock.elapsed() == 0.0625 and not clock.paused  # the user's 0.5 s left out


def _lsp_files(send, timeout):
    doc = SimpleNamespace(source="a\n", version=3)
    documents = SimpleNamespace(get=lambda path: doc)
    return LspFiles(documents, send, encoding=lambda: "utf-16", annotations=lambda: True,
                    approval_timeout=lambda: timeout)


async def test_lsp_apply_edit_left_unanswered_past_the_approval_timeout_is_a_clear_timeout(tmp_path):
    paused = []

    async def never(edit, label):
        paused.append(CALL_CLOCK.get().paused)
        await asyncio.sleep(60)
    clock = CallClock()
    token = CALL_CLOCK.set(clock)
    try:
        path = Path(tmp_path / "a.py")
        outcome = await _lsp_files(never, 0.2).write(path, b"b\n", base=FileSnapshot.of(path, b"a\n", 3))
    finally:
        CALL_CLOCK.reset(token)
    assert paused == [True] and not clock.paused
    assert outcome.status == "timeout" and "0.2 s" in outcome.message
