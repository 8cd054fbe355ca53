"""Stdio wiring: the protocol's reader and writer on file descriptors, and the serve loop.

Role: connect an ``asyncio.StreamReader`` to stdin and a writer to the protocol's stdout
descriptor (pipes through the event loop; regular files and terminals through a thread), then run
``AcpServer`` on a ``Connection`` until the client closes stdin.

Must never: write to the protocol descriptor except through the ``Connection``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import Any

from agent_server.server.rpc.jsonrpc import MAX_LINE_BYTES, Connection

log = logging.getLogger("agent_server.stdio")


class _BlockingWriter:
    """Writer for a descriptor the event loop cannot watch (a regular file)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    async def drain(self) -> None:
        return None


async def _open_reader(fd: int, prefeed: bytes) -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    if prefeed:
        reader.feed_data(prefeed)
    try:
        pipe = os.fdopen(fd, "rb", buffering=0, closefd=False)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except (ValueError, OSError):

        def pump() -> None:
            while chunk := os.read(fd, 1 << 16):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)

        loop.run_in_executor(None, pump)
    return reader


async def _open_writer(fd: int) -> Any:
    loop = asyncio.get_running_loop()
    try:
        pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
        return asyncio.StreamWriter(transport, protocol, None, loop)
    except (ValueError, OSError):
        return _BlockingWriter(fd)


async def serve_stdio(
    *, in_fd: int, out_fd: int, prefeed: bytes, answered_initialize: dict[str, Any] | None,
    config_path: str | None, answered_session: Any = None,
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
    from agent_server.config.load import ConfigError, load_config
    from agent_server.server.acp.server import AcpServer
    from agent_server.session import SessionStore, default_state_dir

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
    reader = await _open_reader(in_fd, prefeed)
    writer = await _open_writer(out_fd)
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
