"""The stdio serve path of ``agent-server`` (no sub-command): ACP for an editor.

Role: ``_serve`` says on stderr what it waits for when stdin is a terminal, answers the first
``initialize`` before ``asyncio``, ``httpx`` and pydantic are imported (start-up is a feature:
the editor waits for that answer) — and the ``session/new`` right after it when it is the plain
case (``server/acp/fast_session.py``) — then hands everything else, and the session it made, to
``serve_stdio``: ``AcpServer`` on a ``Connection`` over the stdio descriptors until EOF, SIGTERM or
SIGHUP. The server's modules load with the garbage collector paused (``_end_gc_pause``).

Must never: let anything but protocol messages reach the real stdout. The protocol gets a private
duplicate of descriptor 1, and descriptor 1 itself is pointed at stderr, so a stray ``print`` (or
a child process) cannot corrupt the stream.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Coroutine

FAST_LINE_LIMIT = 1 << 20
"""Longest line the fast path reads for itself (an ``initialize`` or ``session/new`` is far
shorter); a longer one is left whole to the engine, which takes any size in linear time and
answers one past ``jsonrpc.MAX_LINE_BYTES`` with ``-32600``."""


def _read_first_line(fd: int, buffer: bytes = b"", limit: int = FAST_LINE_LIMIT) -> tuple[bytes, bytes]:
    """Read from ``fd`` until the first newline (after what ``buffer`` already holds); returns
    ``(line, rest)`` (rest may be b""; line is b"" or unterminated at end of input). A line that
    passes ``limit`` bytes is not read further: ``(b"", everything read)``. Linear in what it
    reads (each chunk is searched once, the pieces joined once)."""
    if b"\n" in buffer:
        line, _, rest = buffer.partition(b"\n")
        return line + b"\n", rest
    pieces, size = [buffer], len(buffer)
    while size <= limit:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(pieces), b""
        end = chunk.find(b"\n")
        if end >= 0:
            pieces.append(chunk[:end + 1])
            return b"".join(pieces), chunk[end + 1:]
        pieces.append(chunk)
        size += len(chunk)
    return b"", b"".join(pieces)


def _fast_initialize(line: bytes, out_fd: int, config_path: str | None = None) -> dict | None:
    """Answer ``line`` at once if it is an ``initialize`` request; return its params, else None.
    ``promptCapabilities.image`` from the config file alone (``config.resolve.vision_configured``)."""
    import json

    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None  # the engine answers it with -32700
    if not (isinstance(message, dict) and message.get("method") == "initialize"
            and message.get("jsonrpc") == "2.0" and type(message.get("id")) in (int, str)):
        return None
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    from agent_server.config.resolve import vision_configured
    from agent_server.server.acp.initialize import initialize_result

    from agent_server.server.rpc.wire import write_all

    image = vision_configured(config_path, os.environ)
    response = {"jsonrpc": "2.0", "id": message["id"], "result": initialize_result(params or {}, image=image)}
    write_all(out_fd, (json.dumps(response, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii"))
    return params or {}


def _after_initialize(rest: bytes, out_fd: int, config_path: str | None) -> tuple[object, bytes]:
    """Once ``initialize`` is answered: answer the client's next message at once if it is a
    plain-case ``session/new`` (``server/acp/fast_session.py``); returns ``(HandedSession or None,
    the bytes for the server)``.

    A client that sends nothing for ``_IDLE_BEFORE_LOADING`` s meanwhile gets the server's modules
    loaded in a thread while it is idle, so a later request finds them loaded; one that sends at
    once does not (two threads sharing the interpreter made that ``session/new`` slower, and the
    prompt after it no faster: bench/README.md). SIGTERM and SIGHUP end the process
    with status 0 from now until the server's own handlers take over, as the server does when
    nothing runs (the only thing written so far, a log's header, is on disk before its answer)."""
    import select
    import signal

    from agent_server.server.acp import fast_session  # with its modules: a loader thread never races it on one

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_quietly)
    loader = None
    if b"\n" not in rest and not select.select([0], [], [], _IDLE_BEFORE_LOADING)[0]:
        import threading

        if not (os.environ.get("XDG_CONFIG_HOME") and os.environ.get("AGENT_SERVER_STATE_DIR")):
            import platformdirs  # noqa: F401 — what the fast path may still import, before the thread starts
        # the default switch interval: a shorter one made start-up slower on a loaded machine (bench/README.md)
        loader = threading.Thread(target=_load_server, name="agent-server-imports", daemon=True)
        loader.start()
    try:
        second, rest = _read_first_line(0, rest)
        handed = fast_session.fast_new_session(second, out_fd, config_path) if second.endswith(b"\n") else None
    finally:
        if loader is not None:
            loader.join()
    return handed, (rest if handed is not None else second + rest)


_IDLE_BEFORE_LOADING = 0.02
"""Seconds without a message after the ``initialize`` answer before the server's modules load in
a thread (an editor that sends ``session/new`` at once is answered before they load)."""


def _load_server() -> None:
    """Import what ``serve_stdio`` needs (asyncio, the ACP server, the host, pydantic, httpx …)."""
    try:
        import asyncio  # noqa: F401
        import logging  # noqa: F401

        import agent_server.config.load  # noqa: F401
        import agent_server.server.acp.server  # noqa: F401
        import agent_server.server.rpc.stdio  # noqa: F401
    except BaseException:  # noqa: BLE001 — the main thread imports them again and meets the error itself
        pass


def _end_gc_pause() -> None:
    """End the pause of the garbage collector ``_serve`` began before the server's imports.

    Loading the server builds tens of thousands of objects that live as long as the process
    (modules, classes, functions, pydantic schemas); collecting while they were built scanned its
    young generation again and again (bench/README.md), and every later full collection would walk
    them all again. So the collector is off while they load, and what it tracks then is frozen
    (``gc.freeze``, as ``session._parse`` does for a loaded log) before it is switched back on: the
    few objects that were already garbage cycles by then are kept, once.
    """
    import gc

    gc.freeze()
    gc.enable()


def _exit_quietly(signum: int, frame: object) -> None:
    os._exit(0)


_ON_A_TERMINAL = ("agent-server: waiting for an ACP client on stdin (JSON-RPC, one message a line): an editor "
                  "starts this command itself.\n  To try it from a terminal: agent-server run -p \"your prompt\""
                  " (see agent-server --help); Ctrl-D quits.\n")


def _serve(config_path: str | None) -> int:
    import gc  # built in

    gc.disable()  # until the server's modules are loaded: see _end_gc_pause
    out_fd = os.dup(1)
    os.dup2(2, 1)
    if os.isatty(0):  # a person, not an editor: say what this is waiting for
        os.write(2, _ON_A_TERMINAL.encode())
    first, rest = _read_first_line(0)
    if not first and not rest:
        return 0  # end of input before any message: nothing to serve
    answered = _fast_initialize(first, out_fd, config_path) if first else None
    prefeed = rest if answered is not None else first + rest
    handed = None
    if answered is not None:
        handed, prefeed = _after_initialize(rest, out_fd, config_path)

    import asyncio
    import logging

    level = os.environ.get("AGENT_SERVER_LOG_LEVEL", "WARNING").upper()
    if not isinstance(logging.getLevelName(level), int):
        sys.stderr.write(f"agent-server: unknown AGENT_SERVER_LOG_LEVEL {level!r}; using WARNING\n")
        level = "WARNING"
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="agent-server %(levelname)s %(name)s: %(message)s")
    try:
        try:  # what serve_stdio imports first, while the collector is paused
            import agent_server.config.load  # noqa: F401
            import agent_server.server.acp.server  # noqa: F401
        except Exception:  # noqa: BLE001 — serve_stdio imports them again and meets the error there, as before
            pass
        _end_gc_pause()
        return asyncio.run(_never_silent(serve_stdio(in_fd=0, out_fd=out_fd, prefeed=prefeed,
                                                     answered_initialize=answered, answered_session=handed,
                                                     config_path=config_path)))
    except KeyboardInterrupt:
        return 130


async def _never_silent(serving: Coroutine[Any, Any, int]) -> int:
    """``serving``'s exit status; an exception out of the serve loop is written to stderr and ends
    the process at once (status 70) — never a live process that answers nothing (issue 32 §5: the
    loop's shutdown then waited forever)."""
    try:
        return await serving
    except Exception:  # noqa: BLE001 — the last resort: said, then gone
        import traceback

        sys.stderr.write("agent-server: the server stopped on an internal error:\n" + traceback.format_exc())
        sys.stderr.flush()
        os._exit(70)


async def serve_stdio(
    *, in_fd: int, out_fd: int, prefeed: bytes, answered_initialize: dict | None,
    config_path: str | None, answered_session: object = None,
) -> int:
    """Serve ACP on ``in_fd``/``out_fd`` until EOF, SIGTERM or SIGHUP; returns the exit status.

    On the way out every running or queued turn is cancelled and logs its ``turn/end``, and
    every pending prompt is answered ``cancelled`` before the process exits.

    ``prefeed``: bytes already read from ``in_fd``; ``answered_initialize``: params of an
    ``initialize`` the CLI's fast path already answered (so capabilities are recorded);
    ``answered_session``: the ``fast_session.HandedSession`` of a ``session/new`` it answered too —
    adopted (its log descriptor, holding the lock, becomes the session's ``EventLog``) before any
    request in ``prefeed`` is read, and followed by what follows a ``session/new`` answer.
    """
    import asyncio
    import logging
    import signal

    from agent_server.config.load import ConfigError, load_config
    from agent_server.server.acp.server import AcpServer
    from agent_server.server.rpc.jsonrpc import Connection
    from agent_server.server.rpc.stdio import open_reader, open_writer
    from agent_server.session import SessionStore, default_state_dir

    log = logging.getLogger("agent_server.stdio")

    config_error = None
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        log.error("%s", exc)
        config_error = str(exc)
        config = load_config(env={}, path=os.devnull)
    server = AcpServer(config, SessionStore(default_state_dir()), config_error=config_error,
                       config_loader=lambda: load_config(config_path))
    server.host.policies.start_probe()  # in the background from now on; the first turn waits for it
    if answered_initialize is not None:
        server.remember_initialize(answered_initialize)
    reader = await open_reader(in_fd, prefeed)
    writer = await open_writer(out_fd)
    connection = Connection(reader, writer, requests=server.request_handlers(),
                            notifications=server.notification_handlers())
    server.bind(connection)
    after = None
    if answered_session is not None:  # registered before the first request of prefeed is read
        try:
            after = asyncio.ensure_future(server.adopt_session(answered_session)())  # runs first: FIFO
        except Exception as exc:  # noqa: BLE001 — its session/new was answered: its requests say why, we serve on
            log.error("session %s (answered before the server loaded) could not be opened: %s",
                      answered_session.session_id, exc)
            if answered_session.session_id not in server.host.unusable:
                server.host.adoption_failed(answered_session.session_id, exc)
    serving = asyncio.ensure_future(connection.serve())
    loop = asyncio.get_running_loop()
    stopped_by: list[int] = []

    def stop(signum: int) -> None:
        stopped_by.append(signum)
        serving.cancel()

    for signum in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(signum, stop, signum)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
    releases: set[asyncio.Future] = set()

    def release() -> None:  # another agent-server takes one of our sessions over (host/takeover.py)
        task = asyncio.ensure_future(server.host.release_requested())
        releases.add(task)
        task.add_done_callback(releases.discard)

    try:
        loop.add_signal_handler(signal.SIGUSR1, release)
    except (NotImplementedError, RuntimeError, ValueError):
        pass
    try:
        await serving
    except asyncio.CancelledError:
        if not stopped_by:
            raise
        log.info("stopping on signal %s: cancelling running turns", stopped_by[0])
    finally:
        if after is not None:
            await asyncio.gather(after, return_exceptions=True)
        await server.aclose()
        await connection.wait_idle()
    return 0
