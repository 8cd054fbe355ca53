"""The tool-call pipeline: prepare → guards → dispatch → complete, and the ordered commit.

Role: ``ToolRunner.run_batch(turn, calls)`` runs the tool calls of one assistant message. Every
call is logged as ``tool/call`` (and announced to the editor as a pending ``tool_call``) before
anything runs (invariant 1); safe calls run in parallel in a pool of 4, any other call is a
barrier (invariant 4); results are committed as ``tool/result`` strictly in the model's order by a
commit pointer that only moves over contiguous finished slots (invariant 3); and on every path —
success, error, denial, timeout, cancellation — each call gets exactly one result (invariant 2).

Must never: let a guard rewrite arguments (guards see a frozen ``PreparedCall`` and may only
deny), or commit a result out of order.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from dataclasses import dataclass, field, replace
from typing import Any, Awaitable, Callable, Protocol, Sequence

from pydantic import BaseModel

from agent_server.policy.decision import Guard
from agent_server.session import EventLog
from agent_server.tools.base import DEFAULT_RESULT_CHARS, Tool, ToolContext, ToolResult, validate_args
from agent_server.tools.files import CURRENT_TOOL_CALL
from agent_server.tools.live import LIVE_OUTPUT, LiveOutput, end_terminal, terminal_block
from agent_server.tools.output import SPILL_THRESHOLD, spill, spill_room, trim_for_model
from agent_server.tools.repeats import RepeatCounter, repeat_reminder
from agent_server.tools.user_wait import CALL_CLOCK, CallClock, run_within

log = logging.getLogger("agent_server.tools")

POOL_LIMIT = 4
"""Most concurrency-safe calls running at once (DESIGN.md §4, invariant 4)."""

TIMEOUT_GRACE = 5.0
"""Seconds the pipeline waits beyond a tool's own timeout before cancelling it (tools such as
``bash`` enforce their timeout themselves and report it; this is the backstop). The time a call
spends waiting on the user (an edit proposal in the editor: ``tools.user_wait``) is not counted."""

ABORTED_BEFORE_DISPATCH = "ABORTED_BEFORE_DISPATCH"

MIN_RESULT_CHARS = 2_000
"""Even a tiny context window lets a result carry this much (with the notice saying how to page)."""
CANCELLED_AWAITING_APPROVAL = ("Cancelled: the turn was cancelled while this call was waiting for its checks "
                               "(a permission request to the user was pending); the call did not run.")

Emit = Callable[[dict[str, Any]], Awaitable[None]]


class ToolCallLike(Protocol):
    """An assembled call from the model: its ``id``, tool ``name`` and raw JSON ``arguments``."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class PreparedCall:
    """A call after preparation, as guards see it (frozen: a guard cannot rewrite it).

    ``call_id``: the model's id; ``tool_call_id``: the editor's (unique in the session);
    ``tool``: ``None`` for an unknown name; ``args``: validated arguments or ``None``;
    ``error``: the preparation error result, if any; ``title`` and ``locations``: what the
    ``tool_call`` update showed the editor (a permission request repeats them); ``terminal``:
    the editor was given a terminal for the call's live output (``tools.live``);
    ``check``: ``await check()`` gives the tool's precondition error (``Tool.precondition``) —
    guards call it through ``precondition()`` before asking the user.
    """

    call_id: str
    tool_call_id: str
    name: str
    raw_arguments: str
    tool: Tool | None
    args: BaseModel | None
    error: ToolResult | None = None
    title: str = ""
    locations: tuple[dict[str, Any], ...] = ()
    terminal: bool = False
    check: Callable[[], Awaitable[ToolResult | None]] | None = field(default=None, repr=False, compare=False)

    async def precondition(self) -> ToolResult | None:
        """The error this call would surely end with, found without changing anything (``None``:
        none known)."""
        return await self.check() if self.check is not None else None


@dataclass
class _Slot:
    call: PreparedCall
    result: ToolResult | None = None
    status: str = "pending"  # pending → running → done
    reason: str = ""  # why a synthetic result was made (timeout, interrupted, aborted…)
    live_partial: bool = False  # the editor's terminal did not get the whole output (capped, cancelled)
    task: asyncio.Task[None] | None = field(default=None, repr=False)


@dataclass
class _Batch:
    """One assistant message's calls and the commit pointer over them."""

    turn: int
    slots: list[_Slot]
    committed: int = 0


class ToolRunner:
    """Runs batches of tool calls for one session.

    ``log``: the session log; ``context``: what tools get; ``emit``: ACP session updates;
    ``tools``: name → ``Tool``; ``guards``: pre-execute checks, in order; ``terminal_output``:
    returns the ``_meta`` key of the editor's terminal convention (``"terminal_output"`` or
    ``"terminal_output_delta"``), or ``None`` when the editor did not announce it.
    """

    def __init__(self, log: EventLog, context: ToolContext, emit: Emit, tools: dict[str, Tool],
                 guards: Sequence[Guard] = (), *, result_budget: int | None = None,
                 terminal_output: Callable[[], str | None] | None = None) -> None:
        self.log = log
        self.context = context
        self.emit = emit
        self.tools = tools
        self.guards = list(guards)
        self.result_budget = result_budget
        """Most characters one result may carry (from the context window; ``None``: the tools' own)."""
        self.terminal_output = terminal_output or (lambda: None)
        self.repeats = RepeatCounter()
        """Counts identical calls of a turn as results are committed (no walk of the turn per call)."""

    async def run_batch(self, turn: int, calls: Sequence[ToolCallLike]) -> None:
        """Run ``calls`` (one assistant message's, in model order) and commit one result each.

        Returns when every result is committed. ``asyncio.CancelledError`` propagates after the
        remaining results were committed (running calls as interrupted, the others as
        ``ABORTED_BEFORE_DISPATCH``).
        """
        slots = [await self._announce(turn, call) for call in calls]
        batch = _Batch(turn, slots)
        try:
            for group in _groups(slots):
                if len(group) == 1 or not all(_safe(s) for s in group):
                    for slot in group:
                        await self._run(slot)
                        await self._commit_ready(batch)
                else:
                    await self._run_parallel(batch, group)
        finally:
            rest = slots[batch.committed:]
            for slot in rest:
                if slot.status == "running" and slot.task is not None and not slot.task.done():
                    slot.task.cancel()
                    await asyncio.gather(slot.task, return_exceptions=True)
                if slot.result is None:
                    if slot.status == "pending":
                        slot.result = ToolResult(
                            f"{ABORTED_BEFORE_DISPATCH}: this call was not run because the turn was "
                            "cancelled before it started.", is_error=True)
                        slot.reason = "aborted"
                    else:
                        slot.result = ToolResult(
                            "Interrupted: the turn was cancelled while this call was running; it may "
                            "have had part of its effect.", is_error=True)
                        slot.reason = "interrupted"
                    slot.status = "done"
            await asyncio.shield(self._commit_ready(batch))

    # -- stages ---------------------------------------------------------------------------------

    async def _announce(self, turn: int, call: ToolCallLike) -> _Slot:
        event = self.log.append("tool/call", {"turn": turn, "call_id": call.id, "name": call.name,
                                              "arguments": call.arguments})
        tool_call_id = f"tc-{event.seq}"
        prepared = self._prepare(call, tool_call_id)
        update: dict[str, Any] = {"sessionUpdate": "tool_call", "toolCallId": tool_call_id, "name": call.name,
                                  "title": call.name, "kind": "other", "status": "pending",
                                  "rawInput": _raw_input(call.arguments)}
        if prepared.tool is not None and prepared.args is not None:
            update["kind"] = prepared.tool.kind
            update["title"] = _safely(lambda: prepared.tool.title(prepared.args, self.context), call.name)
            locations = _safely(lambda: prepared.tool.locations(prepared.args, self.context), [])
            if locations:
                update["locations"] = locations
            if prepared.tool.live_output and self.terminal_output():
                update["content"] = [terminal_block(tool_call_id)]
                update["_meta"] = {"terminal_info": {"terminal_id": tool_call_id, "cwd": str(self.context.cwd)}}
        prepared = replace(prepared, title=update["title"], locations=tuple(update.get("locations", ())),
                           terminal="_meta" in update)
        await self.emit(update)
        return _Slot(prepared)

    def _prepare(self, call: ToolCallLike, tool_call_id: str) -> PreparedCall:
        tool = self.tools.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            error = ToolResult(f"Error: there is no tool named {call.name!r}. Available tools: {known}.",
                               is_error=True)
            return PreparedCall(call.id, tool_call_id, call.name, call.arguments, None, None, error)
        checked = validate_args(tool, call.arguments)
        if isinstance(checked, ToolResult):
            return PreparedCall(call.id, tool_call_id, call.name, call.arguments, tool, None, checked)
        context = self.context
        return PreparedCall(call.id, tool_call_id, call.name, call.arguments, tool, checked,
                            check=lambda: tool.checked_precondition(checked, context))

    async def _run(self, slot: _Slot) -> None:
        slot.status = "running"
        call = slot.call
        try:
            if call.error is not None:
                slot.result = call.error
                return
            for guard in self.guards:
                try:
                    denial = await guard(call)
                except asyncio.CancelledError:  # e.g. while a permission request was pending
                    slot.result = ToolResult(CANCELLED_AWAITING_APPROVAL, is_error=True)
                    slot.reason = "cancelled"
                    raise
                if denial is not None and isinstance(denial.result, ToolResult):  # failed its precondition
                    slot.result = denial.result
                    return
                if denial is not None:
                    slot.result = ToolResult(denial.reason, is_error=True)
                    slot.reason = "denied"
                    return
            running: dict[str, Any] = {"sessionUpdate": "tool_call_update", "toolCallId": call.tool_call_id,
                                        "status": "in_progress"}
            if call.terminal:  # back in the card: a permission question's text replaced it
                running["content"] = [terminal_block(call.tool_call_id)]
            await self.emit(running)
            slot.result = await self._dispatch(slot)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a tool must not raise; if one does, the model still gets a result
            log.exception("tool %s raised", call.name)
            slot.result = ToolResult(f"Error: the {call.name} tool failed internally: {type(exc).__name__}: {exc}",
                                     is_error=True)
        finally:
            if slot.result is not None:
                slot.status = "done"

    async def _dispatch(self, slot: _Slot) -> ToolResult:
        """Run the tool with its timeout enforced on its own run time: the call's ``CallClock``
        stands still while the call waits on the user (``tools.user_wait``; that wait has its own
        bound, the approval timeout). On cancellation the tool is cancelled too, and whatever
        result it still gives (``bash`` reports its output so far) becomes the call's result,
        marked interrupted."""
        call = slot.call
        assert call.tool is not None and call.args is not None
        limit = call.tool.timeout(call.args)
        key = self.terminal_output() if call.terminal else None
        live = LiveOutput(self.emit, call.tool_call_id, key, self.context.redact) if key else None
        clock = CallClock()
        token = CURRENT_TOOL_CALL.set(call.tool_call_id)
        live_token = LIVE_OUTPUT.set(live)
        clock_token = CALL_CLOCK.set(clock)
        try:  # the task copies the context now: backends see which call they work for
            task = asyncio.ensure_future(call.tool.run(call.args, self.context))
        finally:
            CALL_CLOCK.reset(clock_token)
            LIVE_OUTPUT.reset(live_token)
            CURRENT_TOOL_CALL.reset(token)
        try:
            if not await run_within(task, clock, limit + TIMEOUT_GRACE):
                raise asyncio.TimeoutError
            result = task.result()
            if live is not None:  # the rest of the live output leaves before the result
                await live.close()
                slot.live_partial = live.capped
            return result
        except asyncio.TimeoutError:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            if live is not None:
                await live.close()
                slot.live_partial = live.capped
            return ToolResult(f"Error: {call.name} timed out after {limit:g} s and was stopped.", is_error=True)
        except asyncio.CancelledError:
            if live is not None:
                live.abort()
                slot.live_partial = True
            task.cancel()
            (late,) = await asyncio.gather(task, return_exceptions=True)
            if isinstance(late, ToolResult):
                slot.result = ToolResult(
                    "Interrupted: the turn was cancelled while this call was running.\n" + late.text,
                    is_error=True, content=late.content, locations=late.locations, meta=late.meta)
                slot.reason = "interrupted"
            raise

    async def _run_parallel(self, batch: "_Batch", group: list[_Slot]) -> None:
        pool = asyncio.Semaphore(POOL_LIMIT)
        finished = asyncio.Event()

        async def one(slot: _Slot) -> None:
            async with pool:
                await self._run(slot)
            finished.set()

        for slot in group:
            slot.task = asyncio.ensure_future(one(slot))
        end = next(i for i, s in enumerate(batch.slots) if s is group[-1]) + 1  # the group is done when its last is in
        while True:
            finished.clear()
            await self._commit_ready(batch)
            if batch.committed >= end:
                return
            await finished.wait()

    async def _commit_ready(self, batch: "_Batch") -> None:
        """Move the commit pointer over every contiguous finished slot (it never moves back)."""
        while batch.committed < len(batch.slots) and batch.slots[batch.committed].status == "done":
            slot = batch.slots[batch.committed]
            batch.committed += 1  # before the first await: _commit logs synchronously, then emits
            await self._commit(batch.turn, slot)

    async def _commit(self, turn: int, slot: _Slot) -> None:
        call, result = slot.call, slot.result
        assert result is not None
        limit = max(DEFAULT_RESULT_CHARS, call.tool.max_result_chars if call.tool else 0)
        if self.result_budget is not None:  # a small context window bounds every result further
            limit = max(MIN_RESULT_CHARS, min(limit, self.result_budget))
        spilled = Path(result.meta["spill"]) if result.meta.get("spill") else None
        spill_dir = self.context.session_dir / "spill" if self.context.session_dir is not None else None
        if spilled is None and len(result.text) >= SPILL_THRESHOLD and spill_dir is not None and \
                len(result.text.encode("utf-8", "replace")) <= spill_room(spill_dir, self.context.max_session_spill_bytes):
            spilled = spill(result.text, spill_dir)
            spill_bytes: int | None = spilled.stat().st_size
        else:  # a result the session's spill budget has no room for is only trimmed
            spill_bytes = result.meta.get("spill_bytes")
        scale = limit / DEFAULT_RESULT_CHARS if limit >= DEFAULT_RESULT_CHARS else limit / 5120
        text, cut = trim_for_model(result.text, limit=limit, head=int(4096 * scale), tail=int(1024 * scale),
                                   spill_path=spilled, spill_bytes=spill_bytes,
                                   spill_dropped=result.meta.get("spill_dropped_bytes", 0))
        text += repeat_reminder(self.log.events, turn, call.name, call.raw_arguments, int(call.tool_call_id[3:]),
                                self.repeats)
        data: dict[str, Any] = {"turn": turn, "call_id": call.call_id, "tool_call_id": call.tool_call_id,
                                "name": call.name, "status": "failed" if result.is_error else "completed",
                                "content": text}
        if slot.reason:
            data["reason"] = slot.reason
        if result.meta:
            data["meta"] = result.meta
        if cut:
            data["cut_chars"] = cut
        if spilled is not None:
            data["spill"] = str(spilled)
        self.log.append("tool/result", data)
        update: dict[str, Any] = {
            "sessionUpdate": "tool_call_update", "toolCallId": call.tool_call_id, "status": data["status"],
            "content": [{"type": "content", "content": {"type": "text", "text": text}}, *result.content],
        }
        if call.terminal:
            end_terminal(update, call.tool_call_id, result, partial=slot.live_partial)
        if result.locations:
            update["locations"] = result.locations
        await self.emit(update)
        for extra in result.updates:
            await self.emit(extra)


def _groups(slots: list[_Slot]) -> list[list[_Slot]]:
    """Consecutive safe calls form one parallel group; every other call is its own barrier."""
    groups: list[list[_Slot]] = []
    last_safe = False  # whether the last group is a safe one (every call in it is safe)
    for slot in slots:
        safe = _safe(slot)
        if safe and last_safe:
            groups[-1].append(slot)
        else:
            groups.append([slot])
        last_safe = safe
    return groups


def _safe(slot: _Slot) -> bool:
    tool = slot.call.tool
    return tool is not None and slot.call.error is None and tool.concurrency_safe


def _raw_input(arguments: str) -> Any:
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return {"arguments": arguments}


def _safely(make: Callable[[], Any], default: Any) -> Any:
    try:
        return make()
    except Exception:
        log.exception("tool display helper failed")
        return default
