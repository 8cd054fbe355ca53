"""Stdio wiring: the protocol's reader and writer on file descriptors.

Role: ``open_reader`` connects an ``asyncio.StreamReader`` to stdin (a pipe through the event loop;
a regular file or a terminal through a thread), ``open_writer`` a writer to the protocol's stdout
descriptor (a pipe through the event loop; anything else written directly); a ``Connection`` runs
on them (``cli/serve.py: serve_stdio``).

Must never: import anything of ours outside ``server/rpc``, or buffer more than one line limit
(``MAX_LINE_BYTES``) of unread input.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from agent_server.server.rpc.jsonrpc import MAX_LINE_BYTES


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


async def open_reader(fd: int, prefeed: bytes) -> asyncio.StreamReader:
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


async def open_writer(fd: int) -> Any:
    loop = asyncio.get_running_loop()
    try:
        pipe = os.fdopen(fd, "wb", buffering=0, closefd=False)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, pipe)
        return asyncio.StreamWriter(transport, protocol, None, loop)
    except (ValueError, OSError):
        return _BlockingWriter(fd)
