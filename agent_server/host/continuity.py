"""Sessions that go on: attach a stored session (load, resume), replay it, close it, fork it.

Role: the parts of ``SessionHost`` that make a stored session live again and let it go.
``attach`` opens a stored log (or finds the session live), closes what a dead process left open
and makes it live; ``replay`` sends its history through the session's update gate (with what the
request in flight streamed so far, so a load of a running session misses nothing and doubles
nothing); ``close`` cancels the turn, stops the session's commands and frees it, keeping the
log; ``fork`` starts a new session from the parent's log up to a closed turn (``session.fork``),
leaving the parent's log untouched.

Must never: append to a log when nothing changed, replay anything on a resume, or change the
parent of a fork.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import weakref
from typing import Any, Callable, Iterator, Sequence, TypeVar

from agent_server import __version__
from agent_server.agent.compaction import Compactor
from agent_server.agent.recovery import waiting_prompts
from agent_server.agent.step import RetryPolicy
from agent_server.agent.session import AgentSession
from agent_server.host import lifecycle, takeover
from agent_server.host.errors import HostError, unknown_session
from agent_server.host.gate import without_waiting
from agent_server.agent.request_memo import RequestMemo
from agent_server.session import EventLog, LogCorruptError, LogVersionError, ProjectionMemo, SessionEvent, read_events
from agent_server.session.images import ImageMissing, ImageStore
from agent_server.tools.procs import reap_orphans
from agent_server.tools.registry import tool_schemas

log = logging.getLogger(__name__)
_T = TypeVar("_T")

SessionHost = Any
"""The ``host.SessionHost`` these functions serve (not imported: it imports this module)."""


async def attach(host: SessionHost, session_id: str, cwd: str, additional_directories: Sequence[str],
                 take_over: bool = False, first_prompt_now: bool = False
                 ) -> tuple[AgentSession, dict[str, Any] | None, list[dict[str, Any]]]:
    """The live session ``session_id`` — opened from its log when it is not live — with the
    recovery ``_meta`` and the ``tool_call_update``\\s of the calls recovery closed (both empty
    when nothing was open or the session was live). ``take_over``: a session another process holds
    is asked of it (``take_over``) instead of refused at once. ``first_prompt_now``: what its first
    prompt needs (``_after_load``) is made before it returns, in the thread that read the log
    (``session/load``: its replay would compete with a worker for the interpreter), not in a worker
    left running. Errors: ``lifecycle.open_log``, ``lifecycle.load_roots`` (``HostError``)."""
    session = host.sessions.get(session_id)
    if session is not None:
        lifecycle.check_cwd(session_id, session.log.events[0].data, cwd)
        return session, None, []
    opening = host.opening.get(session_id)
    if opening is not None:  # another load is opening it: this one waits and finds it live
        session = (await asyncio.shield(opening))[0]
        lifecycle.check_cwd(session_id, session.log.events[0].data, cwd)
        return session, None, []
    opening = host.opening[session_id] = asyncio.ensure_future(
        _open(host, session_id, cwd, additional_directories, take_over, first_prompt_now))
    opening.add_done_callback(lambda _: host.opening.pop(session_id, None))
    return await asyncio.shield(opening)


async def _open(host: SessionHost, session_id: str, cwd: str, additional_directories: Sequence[str],
                take_over: bool = False, first_prompt_now: bool = False
                ) -> tuple[AgentSession, dict[str, Any] | None, list[dict[str, Any]]]:
    """Open the stored log, check the folders, close what a dead process left open — in a worker
    thread: a long log takes a while to read, and the event loop (other sessions) goes on — and
    make the session live, even when the load that asked went away meanwhile (nothing is left
    open). The sandbox probe (a subprocess) is started, not waited for: as after ``session/new``,
    the session's first turn (``ensure_status``) and its first shell call wait for its result, and
    it is logged then. Returns what ``attach`` returns."""

    def work() -> tuple[EventLog, list[str], RequestMemo, dict[str, Any] | None, list[dict[str, Any]], Any]:
        with collector_paused():
            opened = take_in()
            if first_prompt_now:
                _after_load(opened[2], opened[5])
                return (*opened[:5], _PREPARED)
            return opened

    def take_in() -> tuple[EventLog, list[str], RequestMemo, dict[str, Any] | None, list[dict[str, Any]], Any]:
        roots: list[str] = []
        projection = ProjectionMemo()

        def check(events: list[SessionEvent]) -> None:  # before the log is changed (a repair, recovery)
            roots[:] = lifecycle.load_roots(session_id, events[0].data, cwd, additional_directories)
            # the projection the first request needs, built now: an event the model's history cannot be
            # made of (valid JSON of the wrong shape) refuses the load as LOG_CORRUPT at its line
            projection.shared(events)

        event_log = lifecycle.open_log(host.store, session_id, check)
        meta, closed = lifecycle.recover(session_id, event_log)
        # what the first request's estimate (and a compaction) needs of the whole history, made here,
        # off the loop and before the user's prompt: each message encoded, weighed and cut once
        requests = RequestMemo(projection)
        requests.prepare(event_log.events)
        # a history already over the limit: which transcript the first prompt's compaction will send
        try:
            window = host._provider(event_log).context_window
            summary = Compactor(event_log, _quiet, host.config.agent, window, RetryPolicy(), requests).plan_summary()
        except Exception:  # noqa: BLE001 — only a head start: the first prompt's compaction meets any error itself
            log.debug("planning the first compaction after a load failed", exc_info=True)
            summary = None
        return event_log, roots, requests, meta, closed, summary

    host.policies.start_probe()  # overlapped, as for session/new: the first turn waits for its result
    try:
        opened = await asyncio.to_thread(work)
    except HostError as exc:
        if not take_over or (exc.data or {}).get("code") != "SESSION_BUSY":
            raise
        opened = await _take_over(host, session_id, exc, work)
    event_log, roots, requests, meta, closed, summary = opened
    if summary is not _PREPARED:  # the rest in a worker, before a prompt needs it (a compaction waits for it)
        requests.rendering = asyncio.get_running_loop().run_in_executor(None, _after_load, requests, summary)
    return host.open_session(session_id, event_log, roots, requests=requests), meta, closed


_PREPARED: Any = object()
"""``work``'s summary when it made what the first prompt needs already (``first_prompt_now``)."""


async def prepared(session: AgentSession) -> None:
    """Wait for the work an opening of ``session`` left to a worker thread (``_after_load``: a
    ``session/resume``'s, when a load found the session being opened by it), if any is still
    running: ``session/load`` answers after it, so a prompt sent as soon as the answer arrives
    never waits for it (it ran on while the answer was out and held up such a prompt's
    compaction by up to its whole length: bench/README.md)."""
    rendering = getattr(getattr(session, "requests", None), "rendering", None)
    if rendering is not None and not rendering.done():
        await asyncio.wait([rendering])


def _after_load(requests: RequestMemo, summary: tuple[list[dict[str, Any]], dict[str, Any], Any] | None) -> None:
    """After a log is taken in (for ``session/load`` in the same thread, before its history is
    replayed; for ``session/resume`` in a worker thread after its answer): what its first prompt
    would otherwise do on the loop — import the network layer its first request needs (httpx,
    anyio's backend: ``ChatClient.preload``; done by the warm-up after the answer, it held up a
    prompt sent at once by the whole import, bench/README.md), build the builtin tools' schemas,
    and encode the body its compaction will send (``Compactor.plan_summary``,
    ``RequestMemo.compaction_body``). A compaction that starts before a worker's is done waits for it."""
    try:
        with collector_paused():
            from agent_server.llm import ChatClient

            ChatClient.preload()
            tool_schemas()
            if summary is not None:
                requests.compaction_body(summary[1], summary[0], summary[2])
    except Exception:  # noqa: BLE001 — only a head start: the first prompt meets any error itself
        log.debug("preparing the first prompt after a load failed", exc_info=True)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The garbage collector paused while a load takes a log in, and what it tracks frozen after
    (``gc.freeze``), as the parse does for the events alone (``session._parse``): the projection's
    messages, the request memo and the imports a load makes live as long as the session, hold no
    cycles, and were otherwise walked by every collection meanwhile (the young generations again
    and again) and by every later full one — which, on the event loop, held up whatever request
    it fell in (bench/README.md). Only when the collector was on (nested or concurrent loads: the
    first one switches it back on)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.freeze()
            gc.enable()


def let_go(closed: "weakref.ref[EventLog]") -> None:
    """After a session was closed (``closed``: its log): free it now if only cycles hold it. Those
    made since the last load are collected as any (a collection of what is not frozen: cheap, the
    loaded histories are frozen); those a load made since it was opened froze (``collector_paused``:
    a policy and its confiner …), which no collection looks at again — the session and its whole log
    would stay in memory for as long as the server runs. Then what is frozen is given back, one full
    collection frees what is garbage, and the rest is frozen again (a walk of everything live, at
    this close only)."""
    if closed() is None:
        return
    gc.collect()
    if closed() is not None and gc.get_freeze_count():
        gc.unfreeze()
        gc.collect()
        gc.freeze()


async def _quiet(update: dict[str, Any]) -> None:
    """An emitter for a compactor that only prepares (``Compactor.plan_summary`` says nothing)."""


async def replay(host: SessionHost, session: AgentSession, cwd: str) -> int:
    """Send ``session``'s history as updates, with no live update in between; how many were sent.
    The updates are made one at a time while they are sent (memory stays bounded by the log,
    whatever its length), all from what the session held when the replay began.

    A live update already waiting at the gate follows the replay: a streamed delta is cut from
    the replayed partial message, a ``tool_call`` from the replayed calls, a retry notice (its
    ``_meta`` names its ``assistant/attempt`` event) from the replayed attempts, so each is shown once.
    """
    header = session.log.events[0].data
    roots = [str(header.get("cwd") or cwd), *(header.get("additional_directories") or [])]

    def build(waiting: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        # everything is read now (the log so far, what the request in flight streamed so far);
        # the updates are made from it one at a time while they are sent
        coming = {u.get("toolCallId") for u in waiting if u.get("sessionUpdate") == "tool_call"}
        notices = [u for u in waiting if "_meta" in u and u.get("sessionUpdate") == "agent_message_chunk"]
        terminal = host.frontend is not None and bool(host.frontend.terminal_output())
        store = getattr(session, "images", None)  # the session's stored prompt images (shown again with their data)
        history = (u for u in lifecycle.history_updates(session.log.events, roots, terminal=terminal,
                                                        images=store.base64 if store is not None else None)
                   if not (u["sessionUpdate"] == "tool_call" and u["toolCallId"] in coming)
                   and not ("_meta" in u and u in notices))
        streaming: list[dict[str, Any]] = []
        partial = session.partial
        if partial is not None and partial.step is not None:  # a request is streaming now
            for kind, text in (("agent_thought_chunk", partial.reasoning), ("agent_message_chunk", partial.text)):
                text = without_waiting(text, waiting, kind)
                if text:
                    streaming.append({"sessionUpdate": kind, "content": {"type": "text", "text": text}})
        return itertools.chain(history, streaming)

    return await host.gates[session.id].replay(build)


def _copy_images(parent: ImageStore, child: ImageStore, events: Sequence[SessionEvent]) -> None:
    """The prompt images the copied history names, stored in the fork's folder too (its requests
    resolve them there); one that is gone from the parent stays gone (its requests then fail as
    the parent's would)."""
    for event in events:
        for block in event.data.get("blocks") or () if event.type in ("user", "inbox/queued") else ():
            if isinstance(block, dict) and block.get("type") == "image" and isinstance(block.get("sha256"), str):
                try:
                    child.put(parent.read(block["sha256"]))
                except ImageMissing:
                    pass


async def _take_over(host: SessionHost, session_id: str, busy: HostError, work: Callable[[], _T]) -> _T:
    """Ask the process holding ``session_id`` to release it (``takeover.request_release``), then open
    it (``work``) once it has: ``SESSION_BUSY`` saying why when the holder cannot be asked or has not
    released it within ``takeover.TAKE_OVER_WAIT`` s (its request withdrawn then)."""
    path = host.store.log_path(session_id)
    holder = (busy.data or {}).get("lockedBy")
    if not holder or not holder.get("answersTakeOver"):
        raise lifecycle.busy_error("load", session_id, path, "it cannot be taken over: "
                                   + ("its holder is unknown" if not holder else
                                      f"pid {holder['pid']} does not answer take-over requests"))
    try:
        takeover.request_release(path, holder)
    except OSError as exc:
        raise lifecycle.busy_error("load", session_id, path, f"the take-over request failed ({exc})") from None
    log.warning("session %s: asked pid %s to release it (take-over)", session_id, holder["pid"])
    deadline = asyncio.get_running_loop().time() + takeover.TAKE_OVER_WAIT
    while True:
        try:
            return await asyncio.to_thread(work)
        except HostError as exc:
            if (exc.data or {}).get("code") != "SESSION_BUSY" or asyncio.get_running_loop().time() >= deadline:
                takeover.withdraw_request(path)
                if (exc.data or {}).get("code") != "SESSION_BUSY":
                    raise
                raise lifecycle.busy_error("load", session_id, path, f"pid {holder['pid']} did not release it "
                                           f"within {takeover.TAKE_OVER_WAIT:g} s") from None
        await asyncio.sleep(0.05)  # the lock has no wake-up to wait on: try again shortly


async def release_requested(host: SessionHost) -> None:
    """The holder's side of a take-over (``SIGUSR1``): each live session another process asked for
    (``takeover.take_requests``) is closed as ``session/close`` closes it — its turn cancelled, its
    pending permission requests and proposals withdrawn, its log closed — the release logged, and its
    client (if one is still there) told in a notice."""
    asked = takeover.take_requests((sid, host.store.log_path(sid).parent) for sid in list(host.sessions))
    for session_id, pid in asked:
        log.warning("releasing session %s: agent-server pid %s takes it over (session/load with takeOver); "
                    "its turn is cancelled and its log closed here", session_id, pid)
        try:
            await close(host, session_id)
        except Exception:  # noqa: BLE001 — the others are released all the same; the asker's wait says it failed
            log.exception("releasing session %s failed", session_id)
            continue
        log.warning("released session %s to pid %s", session_id, pid)
        text = (f"[agent-server] This session was taken over by another agent-server process (pid {pid}: "
                "another window): it is closed here. Load it again to take it back.")
        try:  # its client, if one is still there, learns why the session is gone
            await host.emitter(session_id)({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
                                            "_meta": {"agentServer": {"notice": {"severity": "warning",
                                                                                        "takenOver": {"pid": pid}}}}})
        except Exception:  # noqa: BLE001 — a client that went away: the log line above says it
            log.debug("the release notice of session %s was not sent", session_id, exc_info=True)


async def close(host: SessionHost, session_id: str) -> None:
    """``session/close``: cancel the running turn (and prompts queued behind it), wait for it to
    log its end, stop any command of the session still running, close the log and free the
    session. Closing a stored session that is not live does nothing. ``HostError`` ``invalid``
    for a malformed id, ``not_found`` for an unknown one."""
    try:
        path = host.store.log_path(session_id)
    except ValueError as exc:
        raise HostError("invalid", str(exc), {"sessionId": session_id}) from None
    session = host.sessions.get(session_id)
    if session is None:
        if not path.is_file():
            raise unknown_session(session_id)
        return
    session.cancel()
    await session.close()
    reap_orphans(path.parent)  # a command that outlived the cancel (pid + start time must match)
    await host.forget(session_id)  # and its MCP servers stop
    closed = weakref.ref(session.log)
    del session
    let_go(closed)


async def fork(host: SessionHost, parent_id: str, cwd: str, additional_directories: Sequence[str],
               mcp_servers: Sequence[str | None], turn: int | None) -> str:
    """``session/fork``: a new live session whose log is the parent's up to the end of ``turn``
    (default: the last closed turn, the whole log when the parent is idle), copied verbatim after
    its own header (``forked_from {session_id, turn, seq}``); returns its id.

    The parent is read, never written: from memory when it is live here, else from disk (a turn a
    dead process left open is simply not copied). A prompt that was queued in the copied part
    and had not started is marked ``inbox/cancelled`` in the fork. Errors (``HostError``):
    ``invalid`` for a malformed id, another ``cwd``, a missing folder or a turn that did not end;
    ``not_found``; ``internal`` for an unreadable log.
    """
    try:
        path = host.store.log_path(parent_id)
    except ValueError as exc:
        raise HostError("invalid", str(exc), {"sessionId": parent_id}) from None
    live = host.sessions.get(parent_id)
    if live is not None:
        events = list(live.log.events)
    elif not path.is_file():
        raise unknown_session(parent_id)
    else:
        try:
            events = read_events(path)
            ProjectionMemo().shared(events)  # an event of the wrong shape would fail every request of the fork
        except (LogCorruptError, LogVersionError) as exc:
            raise HostError("internal", f"cannot fork session {parent_id}: {exc}",
                            {"code": "LOG_CORRUPT", "path": str(path), "retryable": False}) from None
    header = events[0].data
    roots = lifecycle.load_roots(parent_id, header, cwd, additional_directories)
    from agent_server.session import ForkError, fork_history  # session/fork only: not loaded with the server

    try:
        point = fork_history(events, turn)
    except ForkError as exc:
        raise HostError("invalid", str(exc), {"sessionId": parent_id, "turn": turn}) from None
    await host.policies.prepare()
    session_id, event_log = host.store.create_fork({
        "cwd": cwd,
        "additional_directories": roots[1:],
        "mcp_servers": list(mcp_servers),
        "agent": {"name": "agent-server", "version": __version__},
        "forked_from": {"session_id": parent_id, "turn": point.turn, "seq": point.seq},
    }, point.history)
    for queued in waiting_prompts(event_log.events):
        event_log.append("inbox/cancelled", {"queued_seq": queued.seq, "reason": "forked"})
    _copy_images(ImageStore(path.parent), ImageStore(event_log.path.parent), event_log.events)
    host.open_session(session_id, event_log, roots)
    return session_id
