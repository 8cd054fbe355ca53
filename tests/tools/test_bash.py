"""The ``bash`` tool: exit codes, combined output, bounded memory, timeouts and cancellation that
leave no process of the command's group alive."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from pathlib import Path

import pytest
from tooltest_helpers import call

from agent_server.tools.bash import HEAD_BYTES, TAIL_BYTES, BashArgs, BashTool, OutputBuffer
from support.timeouts import HANG


def _alive(marker: str) -> list[int]:
    """Pids of live (non-zombie) processes whose command line contains ``marker``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


async def _wait_until(predicate, timeout: float = HANG) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()


async def test_exit_code_and_combined_output_in_order(ctx):
    res = await call(ctx, "bash", command="echo one; echo two >&2; echo three; exit 3")
    assert res.text == "one\ntwo\nthree\nexit code: 3"
    assert res.is_error and res.meta["exit_code"] == 3


async def test_success_runs_in_the_first_root_with_stdin_closed(ctx, ws):
    res = await call(ctx, "bash", command="pwd; cat; echo done")
    assert not res.is_error
    assert res.text == f"{ws}\ndone\nexit code: 0"


async def test_no_output_says_so(ctx):
    assert (await call(ctx, "bash", command="true")).text == "(no output)\nexit code: 0"


async def test_env_from_the_context_is_used(ws, tmp_path):
    from agent_server.tools import ToolContext

    ctx = ToolContext.on_disk(ws, env={"PATH": os.environ["PATH"], "GREETING": "hej"})
    assert (await call(ctx, "bash", command="echo $GREETING")).text == "hej\nexit code: 0"


async def test_five_megabytes_of_output_are_bounded_and_reported(ctx):
    res = await call(ctx, "bash", command="head -c 5242880 /dev/zero | tr '\\0' 'a'; echo; echo END")
    assert not res.is_error
    assert res.meta["output_bytes"] == 5 * 1024 * 1024 + 5
    assert len(res.text) < HEAD_BYTES + TAIL_BYTES + 1000
    omitted = 5 * 1024 * 1024 + 5 - HEAD_BYTES - TAIL_BYTES
    assert f"{omitted:,} bytes of output omitted" in res.text
    assert res.text.endswith("a\nEND\nexit code: 0")


def test_output_buffer_keeps_head_and_tail_only():
    buf = OutputBuffer(head=4, tail=3)
    for piece in (b"ab", b"cdef", b"ghij", b"k"):
        buf.feed(piece)
    assert (bytes(buf.head), bytes(buf.tail), buf.total, buf.omitted) == (b"abcd", b"ijk", 11, 4)
    assert buf.text() == "abcd\n[… 4 bytes of output omitted …]\nijk"


async def test_bash_timeout_kills_process_group_with_grandchildren(ctx):
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.5"  # sleep accepts fractional seconds
    command = f"echo started; bash -c 'sleep {marker} & sleep {marker} & wait' & tail -f /dev/null"
    res = await call(ctx, "bash", command=command, timeout_ms=1000)
    assert res.is_error and res.meta["outcome"] == "timeout"
    assert "timed out after 1 s" in res.text and "started" in res.text
    assert await _wait_until(lambda: not _alive(marker)), _alive(marker)
    assert not _alive("tail -f /dev/null " + marker)


async def test_sigterm_ignoring_child_is_killed_after_the_grace(ctx):
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.25"
    command = f"trap '' TERM; sleep {marker} & trap '' TERM; wait"
    res = await call(ctx, "bash", command=command, timeout_ms=300)
    assert res.meta["outcome"] == "timeout"
    assert await _wait_until(lambda: not _alive(marker)), _alive(marker)


async def test_bash_cancelled_kills_the_group_and_still_returns_a_result(ctx):
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.75"
    tool = BashTool()
    args = BashArgs(command=f"echo partial; sleep {marker} & sleep {marker}")
    task = asyncio.ensure_future(tool.run(args, ctx))
    assert await _wait_until(lambda: len(_alive(marker)) >= 2)
    await asyncio.sleep(0.2)
    task.cancel()
    res = await task
    assert res.is_error and res.meta["outcome"] == "cancelled"
    assert "cancelled" in res.text and "partial" in res.text
    assert await _wait_until(lambda: not _alive(marker)), _alive(marker)


async def test_without_the_reaper_a_job_holding_the_pipe_is_stopped_but_a_redirected_one_survives(ctx, ws,
                                                                                                   monkeypatch):
    """Where no subreaper can run (not Linux): the output pipe's drain is the only stop."""
    from agent_server.tools import bash

    monkeypatch.setattr(bash, "reaped", lambda argv: argv)
    held = f"{uuid.uuid4().int % 10**6 + 10**6}.125"
    res = await call(ctx, "bash", command=f"sleep {held} & echo bye", timeout_ms=10_000)
    assert res.meta["outcome"] == "exited" and res.text.startswith("bye\n")
    assert "kept the output open" in res.text
    assert await _wait_until(lambda: not _alive(held))
    free = f"{uuid.uuid4().int % 10**6 + 10**6}.375"
    res = await call(ctx, "bash", command=f"sleep {free} > /dev/null 2>&1 & echo $!")
    try:
        assert res.text.endswith("exit code: 0") and "kept the output open" not in res.text
        assert _alive(free)
    finally:
        for pid in _alive(free):
            os.kill(pid, 9)


async def test_unconfined_shell_calls_let_a_setsid_child_that_ignores_sigterm_and_sighup_outlive_them(ctx):
    """Issue 32 §11: without the sandbox a command was stopped by its process group only, so a child
    detached with setsid (ignoring SIGTERM and SIGHUP) outlived the call and the session. Now the
    command runs under a child subreaper that kills everything it left — when it exits, times out
    or is cancelled."""
    for how in ("exits", "timeout", "cancelled"):
        marker = f"{uuid.uuid4().int % 10**6 + 10**6}.625"
        command = (f"setsid bash -c \"trap '' TERM HUP; exec sleep {marker}\" > /dev/null 2>&1 < /dev/null & "
                   f"nohup sleep {marker} > /dev/null 2>&1 & echo started")
        if how == "exits":
            res = await call(ctx, "bash", command=command)
            assert res.meta["outcome"] == "exited" and "started" in res.text
        elif how == "timeout":
            res = await call(ctx, "bash", command=command + "; sleep 30", timeout_ms=1000)
            assert res.meta["outcome"] == "timeout"
        else:
            task = asyncio.ensure_future(BashTool().run(BashArgs(command=command + "; sleep 30"), ctx))
            assert await _wait_until(lambda: len(_alive(marker)) >= 2)
            task.cancel()
            assert (await task).meta["outcome"] == "cancelled"
        try:
            assert await _wait_until(lambda: not _alive(marker)), (how, _alive(marker))
        finally:
            for pid in _alive(marker):
                os.kill(pid, 9)


async def test_the_exit_status_and_death_signal_of_an_unconfined_command_are_its_own(ctx):
    res = await call(ctx, "bash", command="exit 7")
    assert res.meta["exit_code"] == 7
    res = await call(ctx, "bash", command="kill -KILL $$")
    assert res.meta["exit_code"] == -9 and "killed by SIGKILL" in res.text


def test_timeout_and_title():
    tool = BashTool()
    assert tool.timeout(BashArgs(command="x")) == 120
    assert tool.timeout(BashArgs(command="x", timeout_ms=1500)) == 1.5
    assert tool.title(BashArgs(command="pytest -q"), None) == "Run `pytest -q`"
    assert tool.title(BashArgs(command="pytest -q", description="Run the tests"), None) == "Run the tests"
    assert tool.title(BashArgs(command="make\nmake install"), None) == "Run `make…`"


@pytest.mark.parametrize("bad", ['{"command": "x", "timeout_ms": 600001}', '{"command": "x", "timeout_ms": 0}'])
def test_timeout_over_the_maximum_is_an_argument_error(bad):
    from agent_server.tools import ToolResult, validate_args

    res = validate_args(BashTool(), bad)
    assert isinstance(res, ToolResult) and res.is_error and "timeout_ms" in res.text


async def test_memory_stays_bounded_for_a_64_megabyte_output(ctx):
    import tracemalloc

    tracemalloc.start()
    try:
        res = await call(ctx, "bash", command="head -c 67108864 /dev/zero | tr '\\0' 'b'")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.meta["output_bytes"] == 64 * 1024 * 1024
    assert peak < 16 * 1024 * 1024, f"peak {peak:,} bytes"  # head + tail and their text, not 64 MB
