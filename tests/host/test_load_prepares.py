"""A load takes the whole history in for the first request, off the event loop (issue 33 item 6).

In process: the real ``AcpServer`` (no connection), the real offline endpoint.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os

from agent_server.agent.replay import logged_requests
from agent_server.config.load import load_config
from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.server.acp.server import AcpServer
from agent_server.session import SessionStore, read_events
from support.probe import answered
from support.timeouts import HANG


def _config(base_url: str, **env: str):
    """The configuration of the servers of these tests: the endpoint at ``base_url``, no sandbox."""
    return load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": base_url, "AGENT_SERVER_MODEL": "m",
                                             "AGENT_SERVER_API_KEY": "k", "AGENT_SERVER_SANDBOX": "off", **env})


async def test_the_first_prompt_after_a_load_encoded_and_weighed_the_whole_history_again(tmp_path):
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 3, 300)
        server = AcpServer(_config(endpoint.base_url), store)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
            session = server.host.sessions[sid]
            events = session.log.events
            assert session.requests.behind(events) == 0  # the load's worker thread took the log in
            messages = [m for _, m in session.requests.surface(events)]
            weighed = session.requests._spaced  # noqa: SLF001 — what a compaction reads (each message weighed)
            assert len(messages) == 12 and len(weighed) == len(messages)
            endpoint.push(text_stream("done"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "and now"}]}
            assert (await answered(server, "session/prompt", prompt, 10))["stopReason"] == "end_turn"
        finally:
            await server.aclose()
    sent = [r.body for r in endpoint.requests if r.path.endswith("/chat/completions")]
    assert [r.body for r in logged_requests(read_events(store.log_path(sid)))] == sent


LOAD_IN_A_FRESH_PROCESS = r"""
import asyncio, json, os, sys
from agent_server.config.load import load_config
from agent_server.server.acp.server import AcpServer
from agent_server.server.rpc.jsonrpc import RequestContext
from agent_server.session import SessionStore
NETWORK = ("agent_server.llm._client", "httpx", "anyio._backends._asyncio")
base_url, state, sid, cwd = sys.argv[1:]
async def main():
    config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": base_url, "AGENT_SERVER_MODEL": "m",
                                               "AGENT_SERVER_API_KEY": "k", "AGENT_SERVER_SANDBOX": "off"})
    server = AcpServer(config, SessionStore(state))
    server.remember_initialize({"protocolVersion": 1, "clientCapabilities": {}})
    before = [m for m in NETWORK if m in sys.modules]
    ctx = RequestContext(1, "session/load")
    await server.request_handlers()["session/load"]({"sessionId": sid, "cwd": cwd, "mcpServers": []}, ctx)
    # the answer is out (what the first prompt needs was made before it), the after-callbacks run next
    answered = [m for m in NETWORK if m in sys.modules]
    await server.aclose()
    print(json.dumps({"before": before, "answered": answered}))
asyncio.run(main())
"""


async def test_a_prompt_sent_right_after_session_load_waited_for_the_network_layer_imports(tmp_path):
    """Across the pipe, the step after loading a long (compacted) log reached the model 0.35–0.91 s
    after its prompt against ~40 ms of its own work: the load's answer was followed, on the event
    loop, by the warm-up importing httpx, httpcore and anyio's backend, and a prompt sent at once
    waited for all of it (py-spy of the server). A worker thread the load starts imports them now,
    while the history is replayed. A fresh process (nothing imported yet: the control) loads a
    stored session."""
    import subprocess
    import sys

    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with OfflineEndpoint([text_stream("hello")]) as endpoint:
        store = SessionStore(tmp_path / "state")
        first = AcpServer(_config(endpoint.base_url), store)
        try:
            sid = (await answered(first, "session/new", {"cwd": str(workspace), "mcpServers": []}, 1))["sessionId"]
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]}
            assert (await answered(first, "session/prompt", prompt, 2))["stopReason"] == "end_turn"
        finally:
            await first.aclose()
        out = subprocess.run([sys.executable, "-c", LOAD_IN_A_FRESH_PROCESS, endpoint.base_url,
                              str(tmp_path / "state"), sid, str(workspace)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    seen = json.loads(out.stdout)
    assert seen["before"] == [], seen  # the control: the server's own imports leave them to the first request
    assert seen["answered"] == ["agent_server.llm._client", "httpx", "anyio._backends._asyncio"], seen


class _CountingEndpoint(OfflineEndpoint):
    """The offline endpoint, counting the connections it accepted (``accepted``)."""

    accepted = 0

    async def _connection(self, reader, writer):
        self.accepted += 1
        await super()._connection(reader, writer)


async def _accepted(endpoint: _CountingEndpoint, count: int) -> None:
    while endpoint.accepted < count:
        await asyncio.sleep(0)  # a yield: the endpoint's accept callback is on this loop


async def _served_session(endpoint, tmp_path, turns: int, size: int) -> tuple[SessionStore, str, object]:
    """A stored session of ``turns`` turns, each a read of a ``size``-byte file and an answer."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "a.txt").write_text("".join(f"line {i} of the file\n" for i in range(size // 20)))
    store = SessionStore(tmp_path / "state")
    first = AcpServer(_config(endpoint.base_url), store)
    try:
        sid = (await answered(first, "session/new", {"cwd": str(workspace), "mcpServers": []}, 1))["sessionId"]
        for n in range(turns):
            endpoint.push(tool_call_stream([(f"r{n}", "read", json.dumps({"path": "a.txt"}))]))
            endpoint.push(text_stream(f"answer {n}"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"read it {n}"}]}
            assert (await answered(first, "session/prompt", prompt, 2 + n))["stopReason"] == "end_turn"
    finally:
        await first.aclose()
    return store, sid, workspace


async def test_the_first_prompt_after_a_load_made_its_http_client_and_its_connection_on_its_way_to_the_model(tmp_path):
    """Issue 33 item 6: after a load, the first prompt's request made the endpoint's HTTP client
    (0.5–0.9 ms) and opened its connection (a cold pool) between the prompt and the request, and the
    warm-up after the load's answer ran on the loop in between. Now the load, before its answer,
    makes the client and opens the connection its first request goes out on — nothing is sent on
    it before — and no warm-up follows the answer."""
    from agent_server.llm import ChatClient
    from agent_server.server.rpc.jsonrpc import RequestContext

    ChatClient.preload()  # as the load's worker thread does (in a fresh process, during the replay)
    async with _CountingEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 2, 400)
        served = endpoint.accepted
        server = AcpServer(_config(endpoint.base_url), store)
        try:
            server.remember_initialize({"protocolVersion": 1, "clientCapabilities": {}})
            ctx = RequestContext(9, "session/load")
            await server.request_handlers()["session/load"]({"sessionId": sid, "cwd": str(workspace),
                                                             "mcpServers": []}, ctx)
            client = server.host.pool.get(endpoint.base_url, "k")
            assert client._tails, "the client was not made, or opened no connection, before the load's answer"
            await asyncio.gather(*client._tails)
            await asyncio.wait_for(_accepted(endpoint, served + 1), HANG)  # its accept runs on this loop, after the connect
            assert len(endpoint.requests) == 2 * 2  # nothing sent on it
            warmed: list[str] = []
            server.host.warm = lambda session_id: warmed.append(session_id)  # type: ignore[method-assign]
            for callback in ctx._after:  # the answer is out: what follows it
                await callback()
            assert warmed == []
            endpoint.push(text_stream("done"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "and now"}]}
            assert (await answered(server, "session/prompt", prompt, 10))["stopReason"] == "end_turn"
        finally:
            await server.aclose()
    assert endpoint.accepted == served + 1  # the request went out on the connection opened ahead
    sent = [r.body for r in endpoint.requests if r.path.endswith("/chat/completions")]
    assert [r.body for r in logged_requests(read_events(store.log_path(sid)))] == sent


async def test_the_first_compaction_after_a_load_encoded_its_summary_request_on_its_way_to_the_model(tmp_path, monkeypatch):
    """Issue 33 item 6: the first prompt after loading a history over the limit compacts it first;
    its summarising request (the transcript of the whole replaced history: 1.2 MB for 100k events)
    was encoded between the prompt and the request — 10–24 ms, as long as the floor itself. The
    load encodes it in its worker thread now (``RequestMemo.compaction_body``), and the compaction
    sends those bytes, equal to the log's rebuild."""
    from agent_server.agent import compaction, request_memo
    from agent_server.llm import encode_body

    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 6, 8_000)
        before = len(endpoint.requests)
        server = AcpServer(_config(endpoint.base_url, AGENT_SERVER_CONTEXT_WINDOW="12000"), store)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
            encoded: list[int] = []
            for module in (compaction, request_memo):
                monkeypatch.setattr(module, "encode_body", lambda body: encoded.append(1) or encode_body(body),
                                    raising=False)
            endpoint.push(text_stream("Summary: the file was read."))
            endpoint.push(text_stream("done"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "and now"}]}
            assert (await answered(server, "session/prompt", prompt, 10))["stopReason"] == "end_turn"
        finally:
            await server.aclose()
    sent = [r.body for r in endpoint.requests[before:]]
    assert len(sent) == 2 and json.loads(sent[0])["messages"][0]["content"].startswith("You summarise")
    assert encoded == []  # the summarising request was not encoded on the prompt's way to the model
    events = read_events(store.log_path(sid))
    assert [e.type for e in events].count("compaction/end") == 1
    assert [r.body for r in logged_requests(events)][-2:] == sent  # what the model saw = the log's rebuild


async def test_a_prompt_sent_right_after_the_load_answered_waited_for_the_loads_worker(tmp_path, monkeypatch):
    """Issue 33 item 6: a load answered once its history was replayed, while its worker thread
    (``continuity._after_load``: the network layer's imports, the tools' schemas, the body of the
    compaction the first prompt makes) could still be at work; a prompt sent as soon as the answer
    arrived then waited for it in its compaction (``Compactor.compact`` waits for the load's body),
    by up to the worker's whole length (the bench's first request ranged 17–114 ms). And while it
    ran beside the replay, the two competed for the interpreter (the load's CPU ~15 % higher). Now
    that work is done in the thread that read the log, before the replay, and the answer follows
    it. Here a worker left running is held until the load has answered: the answer must not come
    first."""
    import sys
    import threading

    from agent_server.agent import compaction
    from agent_server.host import continuity
    from agent_server.server.rpc.jsonrpc import RequestContext

    # the job that reads the log (``_open``'s ``work``): the first prompt's work done in it, or in a job of its own
    continuity_work = next(c for c in continuity._open.__code__.co_consts if getattr(c, "co_name", "") == "work")

    answered_load = threading.Event()
    order: list[str] = []
    real_after, real_replay = continuity._after_load, continuity.replay

    def after_load(requests, summary):
        if sys._getframe(1).f_code is not continuity_work:  # a job of its own, left running beside the replay
            answered_load.wait(30)  # still at work when the load answers (or never: 30 s, then it goes on)
        real_after(requests, summary)
        order.append("the first prompt's work done")

    async def replay(host, session, cwd):
        order.append("replayed")
        return await real_replay(host, session, cwd)

    monkeypatch.setattr(continuity, "_after_load", after_load)
    monkeypatch.setattr(continuity, "replay", replay)
    waited: list[bool] = []
    real_compact = compaction.Compactor.compact

    async def compact(self, *args, **kwargs):
        rendering = self.requests.rendering
        waited.append(rendering is not None and not rendering.done())  # it would wait for the load's worker
        return await real_compact(self, *args, **kwargs)

    monkeypatch.setattr(compaction.Compactor, "compact", compact)
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 6, 8_000)
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                                   "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k",
                                                   "AGENT_SERVER_SANDBOX": "off", "AGENT_SERVER_CONTEXT_WINDOW": "12000"})
        server = AcpServer(config, store)
        try:
            server.remember_initialize({"protocolVersion": 1, "clientCapabilities": {}})
            ctx = RequestContext(9, "session/load")
            await server.request_handlers()["session/load"]({"sessionId": sid, "cwd": str(workspace),
                                                             "mcpServers": []}, ctx)
            order.append("answered")
            answered_load.set()
            for callback in ctx._after:
                await callback()
            endpoint.push(text_stream("Summary: the file was read."))
            endpoint.push(text_stream("done"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "and now"}]}
            assert (await answered(server, "session/prompt", prompt, 10))["stopReason"] == "end_turn"
        finally:
            answered_load.set()
            await server.aclose()
    assert order[:3] == ["the first prompt's work done", "replayed", "answered"]
    assert waited == [False]  # the prompt compacted first, and found the load's work done
    events = read_events(store.log_path(sid))
    sent = [r.body for r in endpoint.requests if r.path.endswith("/chat/completions")]
    assert [r.body for r in logged_requests(events)] == sent


async def test_every_full_collection_after_a_load_walked_the_loaded_history_again(tmp_path):
    """Issue 33 item 6: the parse froze the loaded events (``gc.freeze``), but what the load built
    from them next — the projection's messages, the request memo — stayed in the collector's
    generations: a full collection after loading the bench's 100k-event log walked ~84,000 objects
    (21 ms of CPU in process, more across the pipe), on the event loop, in whatever request it
    fell — the first prompt's among them. The load's work is done with the collector paused and
    frozen after, as the parse is."""
    import gc

    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 4, 400)
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                                   "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k",
                                                   "AGENT_SERVER_SANDBOX": "off"})
        server = AcpServer(config, store)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
            memo = server.host.sessions[sid].requests
            built = [o for o in (memo.messages, *(m for _, m in memo.messages), memo._bare, memo._cuts)  # noqa: SLF001
                     if gc.is_tracked(o)]  # (a dict of strings alone is not tracked: CPython leaves it out)
            assert len(built) > 4  # the lists, and each assistant message with its tool calls
            walked = {id(o) for o in gc.get_objects()}  # what a collection walks (the frozen ones are not)
            assert [o for o in built if id(o) in walked] == []
            assert gc.isenabled()
        finally:
            await server.aclose()


async def test_the_first_prompt_after_a_load_made_its_request_header_three_times_on_its_way_to_the_model(
        tmp_path, monkeypatch):
    """The header of the first request after a load is made (and its size checked) before the load
    is answered, and made again only when something it is made of changed: a mode switch is still
    told to the model, in the next request."""
    from agent_server.host.host import SessionHost

    workspace = tmp_path / "ws"
    workspace.mkdir()
    async with OfflineEndpoint() as endpoint:
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.base_url,
                                                   "AGENT_SERVER_MODEL": "m", "AGENT_SERVER_API_KEY": "k",
                                                   "AGENT_SERVER_SANDBOX": "off"})
        store = SessionStore(tmp_path / "state")
        first = AcpServer(config, store)
        try:
            sid = (await answered(first, "session/new", {"cwd": str(workspace), "mcpServers": []}, 1))["sessionId"]
            endpoint.push(text_stream("one"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "first"}]}
            assert (await answered(first, "session/prompt", prompt, 2))["stopReason"] == "end_turn"
        finally:
            await first.aclose()
        made = []
        original = SessionHost._request_header

        def counted(self, *args, **kwargs):
            made.append(kwargs)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(SessionHost, "_request_header", counted)
        server = AcpServer(config, store)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 3)
            at_load = len(made)
            endpoint.push(text_stream("two"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "second"}]}
            assert (await answered(server, "session/prompt", prompt, 4))["stopReason"] == "end_turn"
            assert at_load == 1 and len(made) == 1, made  # made by the load, kept for the prompt's three looks
            await answered(server, "session/set_mode", {"sessionId": sid, "modeId": "read-only"}, 5)
            endpoint.push(text_stream("three"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "third"}]}
            assert (await answered(server, "session/prompt", prompt, 6))["stopReason"] == "end_turn"
            assert len(made) > 1  # the mode changed: made again
        finally:
            await server.aclose()
    sent = [r.body for r in endpoint.requests if r.path.endswith("/chat/completions")]
    assert [r.body for r in logged_requests(read_events(store.log_path(sid)))] == sent
    last = json.loads(sent[-1])["messages"]
    assert any("read-only" in str(m.get("content")) for m in last[2:]), last  # the switch, told in a note


async def test_a_closed_session_stayed_in_memory_with_its_whole_log_for_as_long_as_the_server_ran(tmp_path):
    """Each live session wrapped its ``bash`` tool in a class of its own (``Checkpoints.shell``),
    whose schema the tools' class-keyed cache kept for ever — and with it, through the class's
    method, the session's checkpoints and its whole log (a loaded 100k-event log: ~30 MB more for
    every session a server ever opened). Class objects are cycles, so a load's ``gc.freeze`` of
    another session also made them permanent. After ``session/close`` (another session loaded
    meanwhile) and a full collection, nothing of the closed session is left."""
    import gc
    import weakref

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, a, 2, 200)
        other_store, other, other_workspace = await _served_session(endpoint, b, 1, 200)
        server, loader = AcpServer(_config(endpoint.base_url), store), AcpServer(_config(endpoint.base_url), other_store)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
            closed = weakref.ref(server.host.sessions[sid].log)
            await answered(loader, "session/load", {"sessionId": other, "cwd": str(other_workspace), "mcpServers": []}, 9)
            await answered(server, "session/close", {"sessionId": sid}, 10)
            gc.collect()
            assert closed() is None, [type(r).__name__ for r in gc.get_referrers(closed())]
        finally:
            await server.aclose()
            await loader.aclose()


async def test_closing_a_session_ran_a_full_collection_because_its_policy_and_shell_confiner_held_each_other(
        tmp_path, monkeypatch):
    """``session/close`` took 120–170 ms of CPU with a long log live in the process (bench/README.md):
    the closed session stayed alive after its last reference went, held by a cycle — its policy
    gave its shell confiner a bound method of its own (``ask_keep``) — so ``continuity.let_go``
    had to collect (and, after another load froze it, unfreeze and collect everything). With no
    cycle, the close frees it at once and ``let_go`` finds nothing to do."""
    import gc

    from agent_server.host import continuity

    at_let_go: list[bool] = []
    real = continuity.let_go
    monkeypatch.setattr(continuity, "let_go", lambda closed: (at_let_go.append(closed() is None), real(closed)))
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 1, 200)
        server = AcpServer(_config(endpoint.base_url), store)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
            gc.collect()
            gc.disable()  # no automatic collection between the close and let_go: only refcounts free it
            try:
                await answered(server, "session/close", {"sessionId": sid}, 10)
            finally:
                gc.enable()
        finally:
            await server.aclose()
    assert at_let_go == [True]


class _Writes:
    """A connection's writer keeping each write (``asyncio.StreamWriter``'s two methods)."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.changed = asyncio.Event()

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))
        self.changed.set()

    async def drain(self) -> None:
        pass


@contextlib.asynccontextmanager
async def _connected(server: AcpServer):
    """``server`` bound to an in-memory connection, served while the block runs: ``(reader, writes,
    connection)`` — a request fed to ``reader`` is read, what the server writes kept in ``writes``."""
    from agent_server.server.rpc.jsonrpc import Connection

    reader, out = asyncio.StreamReader(), _Writes()
    connection = Connection(reader, out, requests=server.request_handlers(),
                            notifications=server.notification_handlers())
    server.bind(connection)
    serving = asyncio.ensure_future(connection.serve())
    try:
        yield reader, out, connection
    finally:
        reader.feed_eof()
        await serving
        await server.aclose()


def _feed(reader: asyncio.StreamReader, n: int, method: str, params: dict) -> None:
    reader.feed_data(json.dumps({"jsonrpc": "2.0", "id": n, "method": method, "params": params}).encode() + b"\n")


async def test_the_load_s_answer_and_its_slash_commands_woke_the_client_twice(tmp_path):
    """Issue 33 item 6: after writing the load's answer the server wrote the slash commands
    (``available_commands_update``) in a write of its own a moment later. A client that prompts as
    soon as it reads the answer (the bench) was woken for the answer, wrote its prompt, and the
    server — preempted by that wake-up on a busy machine — wrote the commands (waking the client
    again) before it read the prompt: 2–6 ms of the first request at load 3 (traced). The commands
    now go in the answer's write, after it, on the same connection."""
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 2, 400)
        async with _connected(AcpServer(_config(endpoint.base_url), store)) as (reader, out, connection):
            for n, (method, params) in enumerate([
                    ("initialize", {"protocolVersion": 1, "clientCapabilities": {}}),
                    ("session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})], 1):
                _feed(reader, n, method, params)

                async def answer(n: int = n) -> int:
                    while True:
                        for i, data in enumerate(out.writes):
                            if any(json.loads(line).get("id") == n for line in data.splitlines()):
                                return i
                        out.changed.clear()
                        await out.changed.wait()
                at = await asyncio.wait_for(answer(), HANG)
            await connection.wait_idle()  # the load's after-response work done
            lines = [json.loads(line) for line in out.writes[at].splitlines()]
            assert [line.get("id") for line in lines][-2:] == [2, None], lines  # the answer, then …
            assert lines[-1]["params"]["update"]["sessionUpdate"] == "available_commands_update"  # … in its write
            later = [json.loads(line) for data in out.writes[at + 1:] for line in data.splitlines()]
            assert later == []  # nothing written after the answer's write


async def test_the_load_opened_its_first_connection_only_after_its_replay(tmp_path, monkeypatch):
    """Issue 33 item 6: the load started the connection its first request goes out on after the
    history was replayed, just before the answer, so its connect (and the endpoint woken to accept
    it) ran after the answer — where a prompt sent at once waited behind it (0.5–2.9 ms, traced at
    load 3). It is started before the replay now: a long replay's writes leave it time to open."""
    from agent_server.llm import ChatClient

    ChatClient.preload()  # as the load's worker thread does
    happened: list[str] = []
    original = ChatClient.preconnect

    def preconnect(self):
        happened.append("connect")
        return original(self)

    monkeypatch.setattr(ChatClient, "preconnect", preconnect)
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 2, 400)
        happened.clear()  # (the session's own server connected too)
        server = AcpServer(_config(endpoint.base_url), store)

        def emitter(session_id):
            async def emit(update):
                happened.append("update")
            return emit

        server.emitter = emitter  # type: ignore[method-assign]
        server.batch_emitter = lambda session_id: (lambda updates: emitter(session_id)(updates))  # type: ignore[method-assign]
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
        finally:
            await server.aclose()
    assert "update" in happened and happened[0] == "connect", happened  # before the first replayed update


async def test_a_load_built_a_json_encoder_for_every_message_and_update_it_encoded(tmp_path, monkeypatch):
    """Issue 33 item 6: a load encodes each message of the history for the request memo and each
    replayed update for the client — 33k and 25k of them for the bench's 100k-event log — and
    ``json.JSONEncoder.encode`` built its C encoder anew at every call (``iterencode``): a quarter of a
    small message's encoding, ~55 ms of that load. Each is built once now (``llm.compact_encoder``,
    the wire's own), with the same text (the memo's bodies are still the log's rebuild)."""
    import json as stdlib_json

    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 6, 400)
        server = AcpServer(_config(endpoint.base_url), store)
        server.remember_initialize({"protocolVersion": 1, "clientCapabilities": {}})
        built = []
        original = stdlib_json.encoder.c_make_encoder
        monkeypatch.setattr(stdlib_json.encoder, "c_make_encoder", lambda *a: built.append(1) or original(*a))
        async with _connected(server) as (reader, out, connection):
            _feed(reader, 1, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []})
            while not any(b'"id":1,' in data for data in out.writes):
                out.changed.clear()
                await asyncio.wait_for(out.changed.wait(), HANG)
            monkeypatch.undo()
            await connection.wait_idle()
            session = server.host.sessions[sid]
            messages = len(session.requests.messages)
            updates = sum(data.count(b'"session/update"') for data in out.writes)
            assert messages > 20 and updates > 15
            assert len(built) <= 5, (len(built), messages, updates)  # (the log's own lines: a few)
            endpoint.push(text_stream("done"))
            _feed(reader, 2, "session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "and now"}]})
            while not any(b'"id":2,' in data for data in out.writes):
                out.changed.clear()
                await asyncio.wait_for(out.changed.wait(), HANG)
    sent = [r.body for r in endpoint.requests if r.path.endswith("/chat/completions")]
    assert [r.body for r in logged_requests(read_events(store.log_path(sid)))] == sent


async def _load_iterating(endpoint, store, sid: str, workspace, monkeypatch, iterate) -> None:
    """``session/load`` of ``sid`` by a fresh server, ``Prefix.__iter__`` being ``iterate`` while it runs
    (a walk of the log counted)."""
    from agent_server.session.view import Prefix

    server = AcpServer(_config(endpoint.base_url), store)
    monkeypatch.setattr(Prefix, "__iter__", iterate)
    try:
        await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
    finally:
        monkeypatch.undo()
        await server.aclose()


async def test_opening_a_loaded_session_walked_its_whole_log_for_events_it_holds_a_few_of(tmp_path, monkeypatch):
    """Issue 33 item 6: making a loaded session live walked its whole history four more times on
    the event loop, for events a long log holds a few of, near its start: the mode
    (``ModeState.from_events``, then whether any ``mode/changed`` was logged), the files seen
    (``seen_files``) and the nested repositories said (``Checkpoints``) — ~6.5 ms each for the
    bench's 100k events (in process, load 10), whose one ``mode/changed`` and one ``file/seen`` are
    among its first 20 events. The log counts its events by type (``EventLog.count``, ``latest``):
    a walk stops at the last event of its type, and none is made for a type the log does not hold."""
    import sys

    from agent_server.session.view import Prefix

    consumed: dict[str, int] = {}
    original = Prefix.__iter__

    def counted(self):
        code = sys._getframe(1).f_code  # noqa: SLF001
        caller = f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_name}"
        for n, event in enumerate(original(self), 1):
            consumed[caller] = max(consumed.get(caller, 0), n)
            yield event

    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 6, 200)
        log = read_events(store.log_path(sid))
        assert [e.type for e in log].count("checkpoint/nested") == 0
        last = max(e.seq for e in log if e.type in ("file/seen", "mode/changed"))
        assert last < len(log) / 3
        await _load_iterating(endpoint, store, sid, workspace, monkeypatch, counted)
    walks = {name: n for name, n in consumed.items() if name.split(":")[0] in ("modes.py", "policies.py", "ledger.py",
                                                                                "recorder.py")}
    assert all(n <= last for n in walks.values()), (walks, last, len(log), consumed)


async def test_a_load_walked_its_whole_log_twice_for_queued_prompts_it_held_none_of(tmp_path, monkeypatch):
    """Issue 33 item 6: a load's recovery looked for prompts a dead process left queued
    (``waiting_prompts``: the closed ones, then the queued ones) with two walks of the whole
    history — ~7 ms each for the bench's 100k events, which hold none. A log without an
    ``inbox/queued`` event (``EventLog.count``) is not walked for them."""
    from agent_server.agent import recovery

    looked: list[int] = []
    original = recovery.waiting_prompts
    monkeypatch.setattr(recovery, "waiting_prompts", lambda events: looked.append(len(events)) or original(events))
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 2, 200)
        assert not [e for e in read_events(store.log_path(sid)) if e.type.startswith("inbox/")]
        server = AcpServer(_config(endpoint.base_url), store)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
        finally:
            await server.aclose()
    assert looked == []


async def test_the_load_s_replay_walked_the_whole_history_three_times(tmp_path, monkeypatch):
    """Issue 33 item 6: the replay (``lifecycle.history_updates``) walked the whole history once for
    the calls' results and changed files, once more for the calls announced, then once to make the
    updates — ~7 ms a walk for the bench's 100k events. The first two are one walk now; the
    updates are the same (the load's replay tests)."""
    import sys

    from agent_server.session.view import Prefix

    walks: list[str] = []
    original = Prefix.__iter__

    def counted(self):
        code = sys._getframe(1).f_code  # noqa: SLF001
        if code.co_filename.endswith("lifecycle.py") and len(self) > 20:
            walks.append(code.co_name)
        return original(self)

    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 3, 200)
        await _load_iterating(endpoint, store, sid, workspace, monkeypatch, counted)
    assert walks == ["history_updates", "history_updates"], walks


async def test_each_turn_resolved_its_roots_and_looked_for_agents_md_again_though_nothing_had_changed(
        tmp_path, monkeypatch):
    """Issue 33 item 6: every turn resolved each root and its ``AGENTS.md`` (``realpath`` of both, an
    ``lstat``) and read the file again to see whether it changed — 0.13–0.27 ms of the step after a
    load, on its way to the model. Now the load reads them before its answer and each turn finds them
    unchanged by a ``stat`` of the root and an ``lstat`` of the file (``InstructionsMemo``); an edit
    is still seen at the next turn."""
    from agent_server.prompt import instructions

    monkeypatch.setattr(instructions, "RACY_SECONDS", -3600.0, raising=False)  # the files written here count as old
    async with OfflineEndpoint() as endpoint:
        store, sid, workspace = await _served_session(endpoint, tmp_path, 1, 200)
        agents = workspace / "AGENTS.md"
        agents.write_text("Run the tests.\n")
        server = AcpServer(_config(endpoint.base_url), store)
        resolved: list[str] = []
        opened: list[str] = []
        realpath, os_open = os.path.realpath, os.open

        def counted_realpath(path, *args, **kwargs):
            if os.fspath(path) in (str(workspace), str(agents)):
                resolved.append(os.fspath(path))
            return realpath(path, *args, **kwargs)

        def counted_open(path, *args, **kwargs):
            if os.fspath(path).endswith("AGENTS.md"):
                opened.append(os.fspath(path))
            return os_open(path, *args, **kwargs)
        try:
            await answered(server, "session/load", {"sessionId": sid, "cwd": str(workspace), "mcpServers": []}, 9)
            monkeypatch.setattr(os.path, "realpath", counted_realpath)
            monkeypatch.setattr(os, "open", counted_open)
            for n in range(2):
                endpoint.push(text_stream("done"))
                prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": f"and now {n}"}]}
                assert (await answered(server, "session/prompt", prompt, 10 + n))["stopReason"] == "end_turn"
            assert resolved == [] and opened == [], (resolved, opened)
            agents.write_text("Run the tests, then lint.\n")  # an edit: read at the next turn
            endpoint.push(text_stream("done"))
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "and after the edit"}]}
            assert (await answered(server, "session/prompt", prompt, 12))["stopReason"] == "end_turn"
            assert opened, "the edited AGENTS.md was not read again"
        finally:
            monkeypatch.undo()
            await server.aclose()
    events = read_events(store.log_path(sid))
    told = [e.data["files"][0]["text"] for e in events if e.type == "project/instructions" and e.data["files"]]
    assert told == ["Run the tests.\n", "Run the tests, then lint.\n"], told
    sent = [r.body for r in endpoint.requests if r.path.endswith("/chat/completions")]
    assert [r.body for r in logged_requests(events)] == sent
