"""A turn's ``user`` event is durable before the model can have a request that carries it — and its
``fsync`` no longer holds up the making of that request (issue 33 item 6).

In process, over real HTTP to the offline endpoint; ``os.fsync`` is wrapped so the test decides
when the ``user`` event's ``fsync`` returns (or that it fails), and the model client reports when
its request waits for it (``ready``). Structure and order only, no timing."""

import asyncio
import errno
import json
import os
import sys
import threading

import pytest

from agent_server.agent import AgentSession, RequestHeader, attempt_steps, request_body
from agent_server.config.load import AgentSettings, Config, ProviderSettings
from agent_server.llm import ChatClient, encode_body
from agent_server.offline import OfflineEndpoint, text_stream
from agent_server.session import EventLog
from agent_server.tools.base import ToolContext
from agent_server.tools.pipeline import ToolRunner
from support.timeouts import HANG

HEADER = RequestHeader(system="SYSTEM", model="m", params={}, tools=[], reasoning_content="drop")


class WatchedClient(ChatClient):
    """A ``ChatClient`` that says when a request waits for its ``ready`` (``waiting``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.waiting = asyncio.Event()
        self.readies = []

    def stream(self, body, *, ready=None):
        self.readies.append(ready is not None)
        if ready is None:
            return super().stream(body)

        async def watched():
            self.waiting.set()
            await ready
        return super().stream(body, ready=watched())


def session_over(log, client, updates):
    provider = ProviderSettings(profile="custom", base_url="http://unused", model="m", context_window=100_000,
                                reasoning_content="drop", key_required=False)
    config = Config(provider=provider, agent=AgentSettings(retry_base_delay=0.0))

    async def emit(update):
        updates.append(update)
    runner = ToolRunner(log, ToolContext.on_disk(log.path.parent.parent, session_dir=log.path.parent), emit, tools={})
    return AgentSession("s1", log, config, header_factory=lambda: HEADER, client_factory=lambda: client,
                        emit=emit, runner=runner)


@pytest.fixture
async def endpoint():
    async with OfflineEndpoint() as ep:
        yield ep


async def loaded_session(tmp_path, endpoint):
    """A session with one turn behind it, closed and loaded again (``EventLog.open``)."""
    endpoint.push(text_stream("first answer"))
    path = tmp_path / "s" / "events.jsonl"
    log = EventLog.create(path, {"cwd": str(tmp_path)})
    client = ChatClient(endpoint.base_url, None)
    assert (await session_over(log, client, []).prompt([{"type": "text", "text": "one"}])).exit == "end_turn"
    await client.aclose()
    log.close()
    log = EventLog.open(path)
    client = WatchedClient(endpoint.base_url, None)
    return log, client, session_over(log, client, [])


def assert_log_explains_every_request(log, endpoint):
    rebuilt = [encode_body(request_body(log.events, seq)) for seq in attempt_steps(log.events)]
    assert rebuilt == [r.body for r in endpoint.requests]


async def goes_on_without_the_lost_prompt(session, client, endpoint):
    """After a turn whose prompt ``lost`` was cut off: the next prompt closes the interrupted turn
    and goes on, nothing of ``lost`` sent, every request replayed; then the client and log close."""
    outcome = await session.prompt([{"type": "text", "text": "again"}])
    assert outcome.exit == "end_turn"
    assert len(endpoint.requests) == 2 and b'"lost"' not in endpoint.requests[1].body
    assert_log_explains_every_request(session.log, endpoint)
    await client.aclose()
    session.log.close()


async def test_the_first_prompt_after_a_load_waited_for_the_user_events_fsync_before_building_its_request(
        tmp_path, endpoint, monkeypatch):
    log, client, session = await loaded_session(tmp_path, endpoint)
    endpoint.push(text_stream("second answer"))
    loop_thread = threading.get_ident()
    entered, release = threading.Event(), threading.Event()
    calls = []  # (thread, requests the endpoint had when the fsync returned)
    real_fsync = os.fsync

    def fsync(fd):
        if calls or fd != log._file.fileno():
            return real_fsync(fd)
        calls.append(threading.get_ident())
        entered.set()
        if threading.get_ident() != loop_thread:  # on the loop (the old code) it is not held: no deadlock
            release.wait(timeout=HANG)
        real_fsync(fd)
        calls.append(len(endpoint.requests))

    monkeypatch.setattr(os, "fsync", fsync)
    turn = asyncio.ensure_future(session.prompt([{"type": "text", "text": "two"}]))
    assert await asyncio.to_thread(entered.wait, 60)
    assert calls[0] != loop_thread, "the user event was fsynced on the event loop: the request waited for it"
    await asyncio.wait_for(client.waiting.wait(), HANG)  # the request is made; it waits for the fsync
    types = [e.type for e in log.events]
    assert types[types.index("user", 9):] == ["user", "step/start"]  # (the header is logged once: kept)
    assert endpoint.requests[1:] == [] and not turn.done()  # the model has nothing while the fsync runs
    release.set()
    outcome = await turn
    assert outcome.exit == "end_turn"
    assert calls[1] == 1  # the endpoint had only the first turn's request when the fsync returned
    assert len(endpoint.requests) == 2 and client.readies == [True]
    assert json.loads(endpoint.requests[1].body)["messages"][-1] == {"role": "user", "content": "two"}
    assert_log_explains_every_request(log, endpoint)
    await client.aclose()
    log.close()


async def test_a_user_event_whose_fsync_failed_while_its_request_was_made_reached_no_model_and_was_cut_off(
        tmp_path, endpoint, monkeypatch):
    log, client, session = await loaded_session(tmp_path, endpoint)
    endpoint.push(text_stream("never sent"))
    endpoint.push(text_stream("after the disk came back"))
    before = [e.type for e in log.events]
    size = log.path.stat().st_size
    real_fsync = os.fsync
    failing = [True]
    held = threading.Event()

    def fsync(fd):
        if failing and fd == log._file.fileno():
            failing.clear()
            held.wait(timeout=HANG)  # until the request waits for it
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    turn = asyncio.ensure_future(session.prompt([{"type": "text", "text": "lost"}]))
    await asyncio.wait_for(client.waiting.wait(), HANG)
    held.set()
    outcome = await turn
    assert outcome.exit == "error" and outcome.error["code"] == "STORAGE" and outcome.error["retryable"]
    assert len(endpoint.requests) == 1  # the first turn's only: the failed one never reached the model
    # the user event and what followed it are cut off, in memory and on disk: only turn/start stayed
    assert [e.type for e in log.events] == [*before, "turn/start"]
    assert log.path.stat().st_size > size and b'"lost"' not in log.path.read_bytes()
    # the disk is back: the next prompt closes the interrupted turn and goes on, every request replayed
    await goes_on_without_the_lost_prompt(session, client, endpoint)


async def test_a_request_made_after_the_user_events_fsync_returned_waited_for_the_loop_to_hear_of_it(
        tmp_path, endpoint, monkeypatch):
    """The worker's ``fsync`` returned while the loop was still making the request (the loop had
    not run the worker's callback yet): the request goes whole at once, not in two sends with a turn
    of the loop between them."""
    from agent_server.agent import session as agent_session

    log, client, session = await loaded_session(tmp_path, endpoint)
    endpoint.push(text_stream("second answer"))
    returned = threading.Event()
    original = agent_session.DurableSync._run

    def run(self):
        original(self)
        returned.set()

    monkeypatch.setattr(agent_session.DurableSync, "_run", run)
    session._client_factory = lambda: (returned.wait(60), client)[1]  # the loop busy until the fsync returned
    outcome = await session.prompt([{"type": "text", "text": "two"}])
    assert outcome.exit == "end_turn" and returned.is_set()
    assert client.readies == [False] and len(endpoint.requests) == 2
    assert_log_explains_every_request(log, endpoint)
    await client.aclose()
    log.close()


async def test_the_fsync_worker_waited_for_the_interpreter_until_the_request_was_sent_though_its_fsync_had_ended(
        tmp_path, endpoint, monkeypatch):
    """The worker put the interpreter's switch interval (5 ms) back before its ``fsync``: one that
    returned while the loop made the request waited for the interpreter until the loop's next wait
    (the request's first send; the loop's short system calls let go of it and took it back before
    the worker ran) — so the request's last byte was held for a prompt already on disk. The worker
    now asks for the interpreter back with the short interval, and puts the interval back after."""
    from agent_server.agent import session as agent_session

    log, client, session = await loaded_session(tmp_path, endpoint)
    endpoint.push(text_stream("second answer"))
    before = sys.getswitchinterval()
    assert before > agent_session.SYNC_SWITCH_INTERVAL
    loop_thread = threading.get_ident()
    asked_back_with = []  # the interval in force when the worker's fsync returned
    real_fsync = os.fsync

    def fsync(fd):
        real_fsync(fd)
        if fd == log._file.fileno() and threading.get_ident() != loop_thread:
            asked_back_with.append(sys.getswitchinterval())

    monkeypatch.setattr(os, "fsync", fsync)
    outcome = await session.prompt([{"type": "text", "text": "two"}])
    assert outcome.exit == "end_turn" and len(endpoint.requests) == 2
    assert asked_back_with == [pytest.approx(agent_session.SYNC_SWITCH_INTERVAL)]
    assert sys.getswitchinterval() == before
    assert_log_explains_every_request(log, endpoint)
    await client.aclose()
    log.close()


async def test_a_turn_cancelled_while_its_request_waited_for_the_user_events_fsync_ended_cancelled_with_nothing_sent(
        tmp_path, endpoint, monkeypatch):
    """A cancel while the request waits for the ``fsync`` (its last byte held): the turn ends
    ``cancelled`` once the ``fsync`` has settled (the user event stays: it is on disk), the endpoint
    never held that request, and the next turn goes on with every request replayed."""
    log, client, session = await loaded_session(tmp_path, endpoint)
    endpoint.push(text_stream("never read"))
    endpoint.push(text_stream("third answer"))
    release = threading.Event()
    real_fsync = os.fsync
    held = []

    def fsync(fd):
        if not held and fd == log._file.fileno():
            held.append(threading.get_ident())
            release.wait(timeout=60)
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    ticket = session.new_ticket()
    turn = asyncio.ensure_future(session.prompt([{"type": "text", "text": "two"}], ticket))
    await asyncio.wait_for(client.waiting.wait(), 60)
    session.cancel()
    await asyncio.sleep(0)  # the cancel reaches the request; the turn's end waits for the fsync
    assert not turn.done()
    release.set()
    outcome = await turn
    assert outcome.exit == "cancelled"
    assert len(endpoint.requests) == 1  # the first turn's only
    types = [e.type for e in log.events]
    assert types[-1] == "turn/end" and "user" in types[types.index("turn/start", 9):]
    outcome = await session.prompt([{"type": "text", "text": "three"}])
    assert outcome.exit == "end_turn" and len(endpoint.requests) == 2
    assert json.loads(endpoint.requests[1].body)["messages"][-1] == {"role": "user", "content": "three"}
    # the log explains every request: the cancelled step's never reached the endpoint whole
    rebuilt = [encode_body(request_body(log.events, seq)) for seq in attempt_steps(log.events)]
    assert len(rebuilt) == 3 and [rebuilt[0], rebuilt[2]] == [r.body for r in endpoint.requests]
    await client.aclose()
    log.close()


async def test_a_user_event_cut_off_by_another_appends_failure_while_its_fsync_ran_still_reached_the_model(
        tmp_path, endpoint, monkeypatch):
    """While the ``user`` event's ``fsync`` ran in its worker and the request waited for it, a prompt
    sent meanwhile was logged (``inbox/queued``) and that append failed (here its ``fsync``; a full
    disk fails its write the same way): the log cut itself back to before the unsynced ``user``
    event. The worker's ``fsync`` then returned 0, the settle found nothing pending and let the
    request's last byte go: the model answered a prompt the log no longer held. The request never
    completes, the turn ends ``STORAGE``, and the next prompt goes on with every request replayed."""
    from agent_server.agent import session as agent_session

    log, client, session = await loaded_session(tmp_path, endpoint)
    endpoint.push(text_stream("never sent"))
    endpoint.push(text_stream("after the disk came back"))
    before = [e.type for e in log.events]
    loop_thread = threading.get_ident()
    release = threading.Event()
    real_fsync, original_run = os.fsync, agent_session.DurableSync._run
    failed = []

    def fsync(fd):
        if fd == log._file.fileno() and not failed and threading.get_ident() == loop_thread:
            failed.append(fd)  # the queued prompt's append
            raise OSError(errno.EIO, "Input/output error")
        return real_fsync(fd)

    def run(self):  # the worker, until the queued prompt's append failed; its own fsync succeeds
        release.wait(timeout=HANG)
        original_run(self)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(agent_session.DurableSync, "_run", run)
    turn = asyncio.ensure_future(session.prompt([{"type": "text", "text": "lost"}]))
    await asyncio.wait_for(client.waiting.wait(), HANG)
    queued = await session.prompt([{"type": "text", "text": "meanwhile"}])
    assert queued.exit == "error" and queued.error["code"] == "STORAGE"
    release.set()
    outcome = await turn
    assert outcome.exit == "error" and outcome.error["code"] == "STORAGE"
    assert len(endpoint.requests) == 1  # the first turn's only: the cut prompt never reached the model
    assert [e.type for e in log.events] == [*before, "turn/start"]
    await goes_on_without_the_lost_prompt(session, client, endpoint)


async def test_a_cancelled_turn_and_the_logs_close_fsynced_three_times_where_one_keeps_the_same_on_disk(
        tmp_path, endpoint, monkeypatch):
    """``agent-server run``'s exit after a SIGINT: the cancelled turn's ``notice`` was ``fsync``\\ed,
    then its ``turn/end``, then ``EventLog.close`` ``fsync``\\ed a file no byte had been written to
    since. The ``notice`` now goes to disk with the ``turn/end``'s ``fsync`` and ``close`` has nothing
    left to sync: one ``fsync``, the same bytes on disk (the prompt was durable before the turn)."""
    path = tmp_path / "s" / "events.jsonl"
    log = EventLog.create(path, {"cwd": str(tmp_path)})
    client = ChatClient(endpoint.base_url, None)
    updates = []
    session = session_over(log, client, updates)
    endpoint.push({"kind": "hang", "headers": True})
    turn = asyncio.ensure_future(session.prompt([{"type": "text", "text": "what the user typed"}]))
    async with asyncio.timeout(HANG):
        while not endpoint.requests:  # the request is out: the user event is on disk
            await asyncio.sleep(0.005)
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    session.cancel()
    assert (await turn).exit == "cancelled"
    await client.aclose()
    written = [e.type for e in log.events]
    log.close()
    assert written[-2:] == ["notice", "turn/end"] and len(synced) == 1
    assert [e.type for e in EventLog.open(path).events] == written  # all of it on disk
    assert [e.data.get("content") for e in EventLog.open(path).events if e.type == "user"] == ["what the user typed"]


def test_the_logs_close_still_fsyncs_what_was_written_after_the_last_fsync(tmp_path, monkeypatch):
    log = EventLog.create(tmp_path / "s" / "events.jsonl", {"cwd": str(tmp_path)})
    log.append("turn/end", {"turn": 1, "exit": "end_turn"})
    log.append("assistant/chunk", {"text": "only flushed"})
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    log.close()
    assert len(synced) == 1
