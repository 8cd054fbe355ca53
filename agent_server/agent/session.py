"""A live session: its log, its turns, and the turn/step loop.

Role: ``AgentSession.prompt(blocks)`` runs one turn — ``turn/start`` and ``user`` are logged, then
steps run until the model stops or an exit is raised — and always ends it with exactly one
``turn/end`` carrying the exit. Turns of one session run one after another (a prompt that waits is
logged as ``inbox/queued``, then ``inbox/started`` or ``inbox/cancelled``); ``cancel()`` stops the
running one, whose calls all get a result and whose end is announced to the model by a notice
(``recovery.close_cancelled_turn``). Before each step the history may be compacted
(``compaction.Compactor``: estimate over ``compact_threshold`` × window); a step the provider answers
``CONTEXT_WINDOW_EXCEEDED`` is compacted once and retried once, a second overflow ends the turn.

Must never: keep a message list (every request is rebuilt from the log), call a tool directly, or
leave a turn without its ``turn/end``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from agent_server.agent.exits import (
    STOP_REASONS,
    EndTurn,
    MaxTokens,
    MaxTurnRequests,
    Refusal,
    TurnExit,
    TurnFailed,
)
from agent_server.agent.step import (
    Emit,
    ModelClient,
    PartialMessage,
    RequestHeader,
    RetryPolicy,
    dropped_calls_text,
    log_request_inputs,
    stream_step,
)
from agent_server.agent.budget import CostMemo, body_chars, usage_update
from agent_server.agent.request import RequestRebuildError
from agent_server.agent.compaction import COLD_EVENTS, Compactor
from agent_server.agent.request_memo import RequestMemo
from agent_server.agent.recovery import LOG_FAILED, close_cancelled_turn, close_open_turn
from agent_server.agent.user_input import prompt_text
from agent_server.config.load import Config, ProviderSettings, redact_url
from agent_server.llm import AssembledMessage
from agent_server.session import EventLog, LogWriteError, ProjectionMemo
from agent_server.session.images import ImageStore
from agent_server.session.journal import StreamJournal, journal_path
from agent_server.tools.pipeline import ToolRunner

log = logging.getLogger("agent_server.agent")


SYNC_SWITCH_INTERVAL = 0.0001
"""The interpreter's switch interval (s) while a deferred ``fsync``'s worker thread runs."""


class DurableSync:
    """The ``fsync`` of what a log left unsynced (``EventLog.append(…, sync_later=True)``), started
    in a worker thread by ``start``: ``future`` settles it on the loop (``EventLog.synced``) and
    raises its ``LogWriteError`` when it failed (the events from the first unsynced one on are cut
    off); ``settled_now()`` settles it at once when the worker is done but the loop has not yet run
    its callback (a request made meanwhile then goes without waiting).

    A thread that wants the interpreter while the loop computes gets it only at the loop's next
    wait or after the interpreter's switch interval (5 ms) — the loop's short system calls let go of
    it and take it back before the woken thread runs: the ``fsync`` would start once the request was
    made, not while, and a worker whose ``fsync`` had returned could not say so before the request's
    first send (its last byte held, the loop turned to hear of it). So the interval is
    ``SYNC_SWITCH_INTERVAL`` until the worker has marked its ``fsync`` returned, then put back (in
    ``os.fsync`` the worker holds no interpreter; other threads contending meanwhile switch as often)."""

    def __init__(self, log: EventLog) -> None:
        self._log = log
        self._token = log.unsynced
        self._interval = sys.getswitchinterval()
        self._lowered = False
        self._synced = self._token is None  # the worker's fsync returned (or there was none to do)
        self._error: OSError | None = None
        self._settled = False
        self._failure: LogWriteError | None = None
        self.future: asyncio.Future[None]

    @classmethod
    def start(cls, log: EventLog) -> "DurableSync":
        sync = cls(log)
        loop = asyncio.get_running_loop()
        if sync._synced:
            sync.future = loop.create_future()
            sync.future.set_result(None)
            return sync
        if sync._interval > SYNC_SWITCH_INTERVAL:
            sync._lowered = True
            sys.setswitchinterval(SYNC_SWITCH_INTERVAL)
        try:
            running = loop.run_in_executor(None, sync._run)
        except BaseException:
            sync._restore()
            raise

        async def settle() -> None:
            try:
                await running
            finally:
                sync._restore()  # (the worker did, unless it never ran)
            sync._settle()
        sync.future = asyncio.ensure_future(settle())
        return sync

    def _restore(self) -> None:
        if self._lowered:
            self._lowered = False
            sys.setswitchinterval(self._interval)

    def _run(self) -> None:  # the worker thread
        try:
            self._log.sync()
        except OSError as exc:
            self._error = exc
        finally:
            self._synced = True
            self._restore()

    def _settle(self) -> None:
        """On the loop, once the worker is done (idempotent): ``EventLog.synced``; raises its ``LogWriteError``."""
        if not self._settled:
            self._settled = True
            try:
                self._log.synced(self._token, self._error)  # type: ignore[arg-type]
            except LogWriteError as exc:
                self._failure = exc
        if self._failure is not None:
            raise self._failure

    def settled_now(self) -> bool:
        """Whether the ``fsync`` is done and settled (``True``), or still running (``False``);
        raises its ``LogWriteError`` when it failed."""
        if self.future.done():
            self.future.result()
            return True
        if not self._synced:
            return False
        self._settle()
        return True


class _Settled:
    """An awaitable of ``durable``'s ``fsync`` that a cancelled waiter does not cancel (a shield made
    when awaited); ``done_now()``: whether it is done already (``DurableSync.settled_now``), asked by
    the transport right before it would hold the request's last byte back."""

    def __init__(self, durable: DurableSync) -> None:
        self._durable = durable

    def __await__(self) -> Any:
        return asyncio.shield(self._durable.future).__await__()

    def done_now(self) -> bool:
        return self._durable.settled_now()


class AfterSync:
    """A turn's model client whose requests complete only once the turn's ``user`` event is on disk:
    while its ``fsync`` runs (``durable``), each request is made and sent but for its last bytes
    (``ModelClient.stream``'s ``ready``); once it failed, no request starts (its ``LogWriteError``)."""

    def __init__(self, client: ModelClient, durable: DurableSync) -> None:
        self._client = client
        self._durable = durable

    def stream(self, body: bytes) -> Any:
        if not self._durable.settled_now():  # (raises the fsync's LogWriteError: nothing is sent)
            return self._client.stream(body, ready=_Settled(self._durable))
        return self._client.stream(body)


class PromptTicket:
    """One prompt's place in its session: ``cancel()`` stops it running or waiting."""

    def __init__(self, session: "AgentSession") -> None:
        self._session = session
        self.cancelled = False
        self.task: asyncio.Task[TurnOutcome] | None = None
        self.waiter: asyncio.Future[Any] | None = None
        # set by a front end that answers the prompt after the turn (ACP: done once the response is
        # written): the next queued turn sends nothing before it, so no client draws it in this answer
        self.answered: asyncio.Future[None] | None = None

    def cancel(self) -> None:
        """Cancel this prompt only: its turn if it runs, its place in the queue if it waits
        (a waiting prompt is answered ``cancelled`` at once, not when the running turn ends)."""
        self.cancelled = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.cancel()
        self._session._cancel_task(self.task)


def log_write_failure(exc: LogWriteError) -> dict[str, Any]:
    """The turn error for a session log that cannot be written: ``{"code": "STORAGE", "message",
    "retryable": True}`` — retrying after space is freed continues the session."""
    return {"code": "STORAGE", "retryable": True, "message": (
        f"{exc}. The turn was stopped and nothing more is written to the session log; free space (or fix "
        "the disk) and send the prompt again: the session continues where its log ends.")}


@dataclass(frozen=True)
class TurnOutcome:
    """How a turn ended: ``exit`` (PROTOCOL.md turn exits), ``stop_reason`` (``None`` for
    ``error``), ``error`` (``{"code", "message", "retryable"}`` for ``error``)."""

    exit: str
    stop_reason: str | None
    error: dict[str, Any] | None = None


class AgentSession:
    """One conversation bound to its log.

    ``log``: the open ``EventLog``; ``config``: resolved settings; ``header_factory()``: returns
    the ``RequestHeader`` for the next step (system text, tools, params); ``client_factory()``:
    returns the ``ModelClient`` (raises ``TurnFailed`` when no model is configured); ``emit``:
    sends ACP session updates to the editor; ``runner``: runs the tool calls of a step;
    ``flush()`` (optional): sends what ``emit`` held back of the streamed text, at the end of a step;
    ``projection`` (optional): a ``ProjectionMemo`` that already saw the log (a load's), so the
    first request does not project the whole history again; ``requests`` (optional): a
    ``RequestMemo`` that already encoded it (``RequestMemo.prepare``, a load's), instead.
    """

    def __init__(
        self,
        session_id: str,
        log: EventLog,
        config: Config,
        *,
        header_factory: Callable[[], RequestHeader],
        client_factory: Callable[[], ModelClient],
        emit: Emit,
        runner: ToolRunner,
        provider_factory: Callable[[], ProviderSettings] | None = None,
        flush: Callable[[], Awaitable[None]] | None = None,
        projection: ProjectionMemo | None = None,
        requests: RequestMemo | None = None,
    ) -> None:
        self.id = session_id
        self.log = log
        self.config = config
        self._header_factory = header_factory
        self._client_factory = client_factory
        self._emit = emit
        self._flush = flush
        """Sends the streamed text ``emit`` may hold back (coalescing) at the end of a step."""
        self._runner = runner
        self._provider_factory = provider_factory or (lambda: config.provider)
        self.partial: PartialMessage | None = None
        """What the request in flight has streamed so far (``None`` between turns): a load of the
        running session replays it, so the editor misses nothing of the step."""
        self.before_turn: Callable[[list[dict[str, Any]]], Awaitable[None] | None] | None = None
        self.prepare_instructions: Callable[[], Any] | None = None  # (the host's: ``prepare_prompt``)
        """Called right after ``turn/start`` with the prompt blocks; may only append events."""
        self.tool_owner: Callable[[str], str | None] = lambda name: None
        """The MCP server that offers the tool of that name (``None``: a built-in tool): named
        when the tool schemas do not fit the model's window."""
        self._turn_lock = asyncio.Lock()
        self._answered: asyncio.Future[None] | None = None  # the last started turn's PromptTicket.answered
        self._turn_task: asyncio.Task[TurnOutcome] | None = None
        self._waiting: list[PromptTicket] = []
        self._preparing: list[PromptTicket] = []  # prompts waiting for what must be known before a turn
        self._compacting: asyncio.Task[Any] | None = None
        self._cancelling = False
        self._closed = False
        self._tools_chars: tuple[list[dict[str, Any]], int] = ([], 0)  # the last tools weighed (_check_head_fits)
        settings = config.agent
        self.retry = RetryPolicy(settings.max_attempts, settings.retry_base_delay, settings.retry_max_delay)
        self.requests = requests if requests is not None else RequestMemo(projection)
        self.images = ImageStore(log.path.parent)
        self.journal = StreamJournal(journal_path(log.path))
        """The stream journal of this session's steps (``session.journal``; read by crash recovery)."""
        """The session's stored prompt images (``session.images``): references resolved before sending."""
        self.costs = CostMemo()
        """``session_cost`` memoised over this session's log (``budget``)."""
        """The request builder memoised over this session's log (``request_memo``)."""
        self.compactor = Compactor(log, emit, settings, self.provider.context_window, self.retry, self.requests)

    # -- public surface ---------------------------------------------------------------------

    @property
    def provider(self) -> ProviderSettings:
        """Where this session's requests go now: the provider of its current model."""
        return self._provider_factory()

    @property
    def running(self) -> bool:
        """Whether a turn is running now."""
        return self._turn_task is not None and not self._turn_task.done()

    def prepare_turn(self) -> None:
        """Make now what the next turn's first step would make on its way to the model: its request
        header (the header factory keeps it while nothing it is made of changes) and the head's
        size check. A load calls this before its answer; an error is left for the turn to meet."""
        try:
            self._check_head_fits(self._header_factory())
        except Exception:  # noqa: BLE001 — only a head start
            log.debug("preparing the next turn of %s failed", self.id, exc_info=True)

    def new_ticket(self) -> "PromptTicket":
        """A handle for one prompt, made before it is queued, so it can be cancelled by itself
        (``$/cancel_request`` on that prompt) whether it is running or still waiting."""
        return PromptTicket(self)

    async def wait_ready(self, ticket: "PromptTicket", ready: "asyncio.Future[Any] | None") -> bool:
        """Wait, on behalf of ``ticket``, for ``ready`` — what must be known before a turn may start
        (the sandbox status, MCP servers still starting; ``None``: nothing) — before ``prompt``
        queues it. Returns ``False`` when the ticket is cancelled (``session/cancel``,
        ``$/cancel_request``) or the session closes meanwhile; ``ready`` itself is shielded (a shared
        probe goes on for others). Nothing is logged: a prompt cancelled here never started a turn."""
        if ticket.cancelled or self._closed:
            return False
        if ready is None:
            return True
        self._preparing.append(ticket)
        # once the ticket stops waiting, nobody else reads ready's outcome: retrieve it here
        ready.add_done_callback(lambda done: done.cancelled() or done.exception())
        ticket.waiter = asyncio.ensure_future(asyncio.shield(ready))
        try:
            await ticket.waiter
        except asyncio.CancelledError:
            if not ticket.cancelled and not self._closed:
                raise
            return False
        finally:
            ticket.waiter = None
            self._preparing.remove(ticket)
        return not (ticket.cancelled or self._closed)

    async def prompt(self, blocks: list[dict[str, Any]], ticket: "PromptTicket | None" = None) -> TurnOutcome:
        """Run one turn for the ACP prompt ``blocks``; it waits behind a running turn.

        A prompt that has to wait is logged as ``inbox/queued`` (content and blocks, ``fsync``ed),
        then ``inbox/started {queued_seq, turn}`` when its turn starts or ``inbox/cancelled
        {queued_seq}`` if it is cancelled (or the session closed) first, in which case it returns
        ``cancelled`` at once without starting a turn.
        """
        ticket = ticket or self.new_ticket()
        queued = None
        try:
            if self._turn_lock.locked() or self._waiting:
                queued = self.log.append("inbox/queued", {"content": prompt_text(blocks), "blocks": blocks}).seq
        except LogWriteError as exc:
            return TurnOutcome("error", None, log_write_failure(exc))
        self._waiting.append(ticket)
        try:
            if not await self._take_turn(ticket):
                if queued is not None:
                    with contextlib.suppress(LogWriteError):  # the log says the prompt waited; recovery drops it
                        self.log.append("inbox/cancelled", {"queued_seq": queued})
                return TurnOutcome("cancelled", "cancelled")
            try:
                try:
                    self._recover_log()
                    if queued is not None:
                        self.log.append("inbox/started", {"queued_seq": queued, "turn": self._next_turn_number()})
                except LogWriteError as exc:
                    return TurnOutcome("error", None, log_write_failure(exc))
                self._cancelling = False
                self._turn_task = asyncio.ensure_future(self._run_turn(blocks))
                ticket.task = self._turn_task
                try:
                    return await asyncio.shield(self._turn_task)
                finally:
                    self._turn_task = None
            finally:
                self._turn_lock.release()
        finally:
            self._waiting.remove(ticket)

    async def _take_turn(self, ticket: "PromptTicket") -> bool:
        """Acquire the turn lock for ``ticket``; ``False`` (lock not held) if the ticket is
        cancelled or the session closed first."""
        if ticket.cancelled or self._closed:
            return False
        previous = self._answered
        if not self._turn_lock.locked() and (previous is None or previous.done()):
            await self._turn_lock.acquire()  # free, the turn before answered: taken at once
        else:
            ticket.waiter = asyncio.ensure_future(self._acquire_turn())
            try:
                await ticket.waiter
            except asyncio.CancelledError:
                if not ticket.cancelled:
                    raise
                return False
            finally:
                ticket.waiter = None
        if ticket.cancelled or self._closed:
            self._turn_lock.release()
            return False
        self._answered = ticket.answered
        return True

    async def _acquire_turn(self) -> None:
        """The turn lock, then the previous turn's answer written (``PromptTicket.answered``)."""
        await self._turn_lock.acquire()
        try:
            previous = self._answered
            if previous is not None and not previous.done():
                await asyncio.shield(previous)
        except BaseException:
            self._turn_lock.release()
            raise

    def cancel(self) -> None:
        """``session/cancel``: stop the running turn, every prompt waiting behind it, and a
        running ``/compact``."""
        for ticket in list(self._preparing) + list(self._waiting):
            ticket.cancel()
        if self._compacting is not None and not self._compacting.done():
            self._compacting.cancel()

    async def compact_now(self) -> str | None:
        """``/compact``: compact the history now (after a running turn, never during one); returns
        the text for the user, or ``None`` when ``cancel()`` stopped it (nothing is replaced then).
        Logged like any compaction, with ``reason: "command"``."""
        task = asyncio.current_task()
        self._compacting = task
        try:
            async with self._turn_lock:
                if not self.compactor.has_earlier_part():
                    return ("Nothing to compact yet: the history is still short (compaction summarises earlier "
                            f"turns; the model's context window is {self.compactor.window:,} tokens).")
                try:
                    client = self._client_factory()
                    header = self._header_factory()
                    self._log_inputs(header)
                    turn = self._next_turn_number() - 1
                    await self.compactor.compact(client, header, turn=turn, step=0, reason="command", announce=False)
                except TurnFailed as exc:
                    return f"The history was not compacted: {exc.error.get('message')}"
        except asyncio.CancelledError:
            if task is not None and task.cancelling():
                task.uncancel()
            return None
        finally:
            self._compacting = None
        before, after = self.compactor.last_change or (0, 0)
        return (f"The history was compacted (about {before:,} → {after:,} tokens): earlier messages are now one "
                "checkpoint summary.")

    async def close(self) -> None:
        """Cancel everything, wait for the running turn to log its end, close the log."""
        self._closed = True
        self.cancel()
        async with self._turn_lock:
            self.log.close()

    def _recover_log(self) -> None:
        """Before a turn: if an append failed earlier, make the log writable again and close the
        turn it stopped (synthetic results for its calls, a notice, ``turn/end``), as after a
        crash. Raises ``LogWriteError`` while the log still cannot be written."""
        if self.log.recover():
            recovery = close_open_turn(self.log, cause=LOG_FAILED)
            log.warning("session %s: the log is writable again; closed turn %s", self.id, recovery.turn)

    def _cancel_task(self, task: "asyncio.Task[TurnOutcome] | None") -> None:
        # once only: a second cancel would cut the pipeline's shielded commit of the last results
        if task is not None and not task.done() and not self._cancelling:
            self._cancelling = True
            task.cancel()

    # -- the loop ------------------------------------------------------------------------------

    def _next_turn_number(self) -> int:
        return self.log.count("turn/start") + 1

    def _check_prompt_fits(self, text: str, images: int = 0) -> None:
        """A prompt that alone exceeds the model's context window is refused before it enters the
        log: logged, it would be in every later request and no compaction could ever make the
        session fit again. Raises ``TurnFailed`` (``CONTEXT_WINDOW_EXCEEDED``)."""
        window = self.provider.context_window
        tokens = round(len(text) / self.config.agent.chars_per_token) + images * self.config.agent.image_tokens
        if window and tokens > window:
            raise TurnFailed({"code": "CONTEXT_WINDOW_EXCEEDED", "retryable": False, "message": (
                f"the prompt alone is about {tokens:,} tokens, more than the model's context window "
                f"({window:,} tokens); it was not sent and is not kept in the session: send a shorter "
                "prompt (attach less, or a part of the file)")})

    def _check_head_fits(self, header: RequestHeader, text: str = "") -> None:
        """A request whose system text, tool schemas and prompt ``text`` alone pass the compaction
        limit (the threshold × the model's window) can never be sent: no compaction shrinks them.
        It is refused before its ``request/header`` is logged (a server with thousands of tools
        logged megabytes per failed prompt), naming the MCP servers whose tools take the room. A
        prompt that alone passes the window is left to ``_check_prompt_fits``. Raises
        ``TurnFailed`` (``CONTEXT_WINDOW_EXCEEDED``)."""
        window = self.provider.context_window
        if not window:
            return
        cpt = self.config.agent.chars_per_token
        prompt = round(len(text) / cpt)
        limit = int(self.config.agent.compact_threshold * window)
        tools = round(self._tool_chars(header.tools) / cpt) if header.tools else 0
        head = tools + round(len(header.system) / cpt)
        if head + prompt <= limit or prompt > window:
            return
        servers: dict[str, list[int]] = {}
        for schema in header.tools:
            owner = self.tool_owner(str(schema.get("function", {}).get("name")))
            if owner is not None:
                share = servers.setdefault(owner, [0, 0])
                share[0] += 1
                share[1] += round(body_chars({"t": schema}) / cpt)
        named = "; ".join(f"MCP server {name!r}: {count:,} tool{'s' if count != 1 else ''}, about {size:,} tokens"
                          for name, (count, size) in sorted(servers.items(), key=lambda kv: -kv[1][1]))
        tools_said = f"about {tools:,} tokens ({named or 'the built-in tools'})"
        over = (f"more than the {limit:,} the model's context window ({window:,} tokens) allows: nothing was "
                f"sent{' or kept' if text else ''}. To go on, ")
        advice = ("remove the server from the editor's MCP settings, lower [agent] max_tools, or use a model with a "
                  "larger window") if servers else "use a model with a larger window"
        if head > limit:
            message = (f"the tool schemas alone are {tools_said}; with the system prompt the request would be about "
                       f"{head + prompt:,} tokens, {over}{advice}.")
        else:
            message = (f"the prompt is about {prompt:,} tokens; with the system prompt and the tool schemas "
                       f"({tools_said}) the request would be about {head + prompt:,} tokens, {over}send a shorter "
                       f"prompt, or {advice}.")
        raise TurnFailed({"code": "CONTEXT_WINDOW_EXCEEDED", "retryable": False, "message": message,
                          **({"servers": sorted(servers)} if servers else {})})

    def _tool_chars(self, tools: list[dict[str, Any]]) -> int:
        """``body_chars({"tools": tools})``, kept for the last list weighed: a header is made (and
        checked) more than once a step, each time with equal schemas, and comparing them is a
        fraction of encoding them."""
        known, chars = self._tools_chars
        if tools is not known and tools != known:
            chars = body_chars({"tools": tools})
            self._tools_chars = (tools, chars)
        return chars

    async def _run_turn(self, blocks: list[dict[str, Any]]) -> TurnOutcome:
        turn = self._next_turn_number()
        try:  # a request that can never fit is refused before anything of its turn is logged
            self._check_head_fits(self._header_factory(), prompt_text(blocks))
        except TurnFailed as exc:
            return TurnOutcome("error", None, exc.error)
        try:
            self.log.append("turn/start", {"turn": turn})
            if self.before_turn is not None:  # e.g. log changed project instructions: the turn's header sees them
                told = self.before_turn(blocks)
                if told is not None:  # and the user is told so, before the turn's first update
                    await told
        except LogWriteError as exc:
            return TurnOutcome("error", None, log_write_failure(exc))
        partial = self.partial = PartialMessage(journal=self.journal)
        outcome: TurnOutcome | None = None
        settled: list[Any] = []
        durable: DurableSync | None = None
        try:
            self._check_prompt_fits(prompt_text(blocks), sum(b.get("type") == "image" for b in blocks))
            header = self._header_factory()
            if header.note is not None:  # a change since the last request is told before the prompt it preceded
                self._log_inputs(header)
            # durable, its fsync in a worker thread while the request is made: the request's last bytes wait for it
            self.log.append("user", {"turn": turn, "content": prompt_text(blocks), "blocks": blocks}, sync_later=True)
            durable = DurableSync.start(self.log)
            client = AfterSync(self._client_factory(), durable)
            budget = self.config.agent.max_steps_per_turn
            for step in range(1, budget + 1):
                await self._step(client, turn, step, partial)
            await self._announce_budget(turn, budget)
            raise MaxTurnRequests()
        except TurnFailed as exc:
            outcome = TurnOutcome("error", None, exc.error)
        except LogWriteError as exc:  # the log froze: nothing more is written; the next prompt recovers
            outcome = TurnOutcome("error", None, log_write_failure(exc))
        except TurnExit as exc:
            outcome = TurnOutcome(exc.exit, STOP_REASONS[exc.exit])
        except asyncio.CancelledError:
            if not self._cancelling:
                outcome = TurnOutcome("cancelled", "cancelled")
                raise
            self._commit_interrupted(turn, partial)
            outcome = TurnOutcome("cancelled", "cancelled")
        except Exception as exc:  # a bug: end the turn cleanly, report it, keep serving
            log.exception("turn %s failed", turn)
            outcome = TurnOutcome("error", None, {"code": "INTERNAL", "message": f"{type(exc).__name__}: {exc}", "retryable": False})
        finally:
            if outcome is None:
                outcome = TurnOutcome("cancelled", "cancelled")
            self.partial = None
            if durable is not None:  # the user event's fsync settled before anything else is written
                try:
                    await asyncio.shield(durable.future)
                except LogWriteError as exc:
                    outcome = TurnOutcome("error", None, log_write_failure(exc))
            try:
                if outcome.exit == "cancelled":  # no dangling call, and the model is told (recovery.py)
                    settled = close_cancelled_turn(self.log, turn)
                end: dict[str, Any] = {"turn": turn, "exit": outcome.exit}
                if outcome.error:
                    end["error"] = outcome.error
                self.log.append("turn/end", end)
                self.journal.end()  # a turn cancelled before its step's text was logged: nothing left to recover
            except LogWriteError as exc:  # no turn/end: the turn stays open until the log recovers
                settled = []
                outcome = TurnOutcome("error", None, log_write_failure(exc))
        for result in settled:  # calls announced but never reached by the pipeline
            if result.data.get("announced"):
                await self._emit({"sessionUpdate": "tool_call_update", "toolCallId": result.data["tool_call_id"],
                                  "status": "failed", "content": [{"type": "content", "content": {
                                      "type": "text", "text": result.data["content"]}}]})
        return outcome

    async def _step(self, client: ModelClient, turn: int, step: int, partial: PartialMessage) -> None:
        header = self._header_factory()
        self._check_head_fits(header)  # tools a server added during the turn may not fit either
        self._log_inputs(header)
        compacted = self.log.latest("compaction/end")
        estimate = await self.compactor.before_step(client, header, turn=turn, step=step)
        if self.log.latest("compaction/end") is not compacted:
            estimate = self._after_compaction()
        try:
            message = await stream_step(self.log, client, self._emit, turn=turn, step=step, retry=self.retry, partial=partial,
                                        requests=self.requests, flush=self._flush, images=self.images.resolve)
        except TurnFailed as exc:  # the provider says it does not fit: compact once, retry the step once
            if exc.error.get("code") != "CONTEXT_WINDOW_EXCEEDED":
                raise
            await self.compactor.compact(client, header, turn=turn, step=step, reason="context_window_exceeded")
            estimate = self._after_compaction()
            try:
                message = await stream_step(self.log, client, self._emit, turn=turn, step=step, retry=self.retry,
                                            partial=partial, requests=self.requests, flush=self._flush,
                                            images=self.images.resolve)
            except TurnFailed as again:
                if again.error.get("code") != "CONTEXT_WINDOW_EXCEEDED":
                    raise
                raise TurnFailed({**again.error, "message": "the request is still too large for the model's context "
                                  f"window after compacting the history: {again.error.get('message')}"}) from again
        if self._flush is not None:  # the step's text is all out before its tool calls run
            await self._flush()
        self._commit_assistant(turn, step, message)
        partial.step = None  # committed: a cancel from here on keeps nothing of it twice
        await self._emit_usage(message, estimate)
        if message.finish_reason == "length":
            raise MaxTokens()
        if message.finish_reason == "content_filter" or message.refusal:
            raise Refusal()
        if not message.tool_calls:
            raise EndTurn()
        try:
            await self._runner.run_batch(turn, message.tool_calls)
        finally:  # after the results (a notice between a call and its result breaks the request)
            if message.dropped_tool_calls:
                self._notice_dropped_calls(turn, message)
        if message.dropped_tool_calls:
            await self._emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": dropped_calls_text(
                message.dropped_tool_calls, len(message.tool_calls))}, "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})

    def _notice_dropped_calls(self, turn: int, message: AssembledMessage) -> None:
        """Tell the model (a logged notice, seen in the next request) how many of its calls past
        the per-answer cap were dropped."""
        kept, dropped = len(message.tool_calls), message.dropped_tool_calls
        self.log.append("notice", {"turn": turn, "reason": "tool_calls_dropped", "dropped": dropped, "text": (
            f"Your last answer made {kept + dropped:,} tool calls; only the first {kept} were run (at most {kept} "
            f"tool calls per answer, max_tool_calls_per_step). The other {dropped:,} were dropped and did not run: "
            "make the calls still needed in your next answers.")})

    def _after_compaction(self) -> int:
        """After a compaction: the header again (its system text is rendered anew, with what its
        replaced notes told: ``agent.header``) and the estimate of the request now."""
        self._log_inputs(self._header_factory())
        return self.compactor.estimate()

    def _log_inputs(self, header: RequestHeader) -> None:
        provider = self.provider
        self.compactor.window = provider.context_window  # the model may have been switched
        log_request_inputs(
            self.log,
            header,
            {"provider": provider.profile, "base_url": redact_url(provider.base_url), "model": header.model,
             "context_window": provider.context_window},
        )

    def _commit_assistant(self, turn: int, step: int, message: AssembledMessage) -> None:
        data: dict[str, Any] = {
            "turn": turn,
            "step": step,
            "text": message.content,
            "reasoning": message.reasoning,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls],
            "finish_reason": message.finish_reason,
            "usage": message.usage,
        }
        if message.refusal:
            data["refusal"] = message.refusal
        if message.dropped_tool_calls:
            data["dropped_tool_calls"] = message.dropped_tool_calls
        self.log.append("assistant", data)
        self.journal.end()  # what the step streamed is in the log now
        self.log.append("step/end", {"turn": turn, "step": step, "finish_reason": message.finish_reason})

    def _commit_interrupted(self, turn: int, partial: PartialMessage) -> None:
        """Keep what a cancelled request streamed; an empty one is logged too (so the log accounts
        for the request) but is never projected (invariant 10)."""
        if partial.step is not None:
            self.log.append(
                "assistant",
                {"turn": turn, "step": partial.step, "text": partial.text, "reasoning": partial.reasoning, "tool_calls": [],
                 "finish_reason": None, "usage": None, "interrupted": True},
            )
            self.journal.end()

    async def _announce_budget(self, turn: int, budget: int) -> None:
        """Tell the model (a logged notice it sees in later requests) and the user that the step
        budget ended the turn — never stop silently."""
        requests = f"{budget} model request{'' if budget == 1 else 's'}"
        text = (f"The turn was stopped: it reached its limit of {requests} "
                "(max_steps_per_turn) before the task was finished. Results of the last tool calls are "
                "above. Continue only when the user asks you to.")
        self.log.append("notice", {"turn": turn, "reason": "max_turn_requests", "text": text})
        await self._emit({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text":
                          f"\n\n[agent-server] Stopped after {requests} in this turn "
                          "(max_steps_per_turn). Send a message to let the agent continue."}, "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})

    async def _emit_usage(self, message: AssembledMessage, estimate: int | None) -> None:
        """``usage_update`` after a step: ``used`` ≤ ``size``, ``cost`` when a price is configured."""
        events = self.log.events
        if self.costs.behind(events) > COLD_EVENTS:  # the first cost of a long loaded log: off the loop
            await asyncio.to_thread(self.costs.cost, events, self.config.agent)
        try:  # what the next request carries: the answer is part of it
            carried: int | None = self.compactor.estimate()
        except RequestRebuildError:
            carried = None
        update = usage_update(events, message.usage, estimate, self.provider.context_window,
                              self.config.agent, self.costs, carried)
        if update is not None:
            await self._emit(update)
