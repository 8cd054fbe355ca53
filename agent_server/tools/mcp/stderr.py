"""A stdio MCP server's stderr, kept out of ours and bounded: only its last bytes are kept.

Role: ``StderrTail.pipe()`` gives the file to start a server with (``stdio_client(errlog=…)``):
the write end of a pipe this object reads on the running loop as output comes, keeping the last
``keep`` bytes in memory and counting what it dropped before them. ``spawned()`` closes our copy
of the write end once the server runs; ``text(limit)`` is the end of what the server wrote (for
"did not start" and "stopped" messages), and ``written``/``dropped`` say how much there was. One
object lives as long as its connection: a restarted server gets a new pipe, the tail goes on.

Must never: grow without bound (a server that logs every request for a day), block the server on
a full pipe (it is read as it comes), or leak a pipe per restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from typing import TextIO

KEEP_BYTES = 64 * 1024
"""The most stderr bytes kept per server (its end)."""


class StderrTail:
    """The bounded end of one server's stderr (see the module docstring); ``keep``: bytes kept."""

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self.keep = keep
        self.written = 0
        """Bytes the server (all its runs) wrote to stderr."""
        self._kept = bytearray()
        self._read_fd: int | None = None
        self._write: TextIO | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def dropped(self) -> int:
        """Bytes written but no longer kept (cut from the start)."""
        return self.written - len(self._kept)

    def pipe(self) -> TextIO:
        """A new pipe for a server about to start (the previous one is read to its end and
        closed); returns its write end, to pass as the server's stderr. Call on the running loop."""
        self.close()
        read_fd, write_fd = os.pipe()
        os.set_blocking(read_fd, False)
        self._read_fd = read_fd
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(read_fd, self._drain)
        self._write = os.fdopen(write_fd, "w", encoding="utf-8", errors="replace")
        return self._write

    def spawned(self) -> None:
        """The server runs (it holds its own copy of the write end): close ours, so the pipe ends
        when the server and its children do."""
        write, self._write = self._write, None
        if write is not None:
            with contextlib.suppress(OSError):
                write.close()

    def text(self, limit: int = 400) -> str:
        """The last ``limit`` characters the server wrote to stderr, stripped (``""``: none)."""
        self._drain()
        return bytes(self._kept[-limit * 4:]).decode("utf-8", "replace")[-limit:].strip()

    def close(self) -> None:
        """Read what is left in the pipe, stop reading and close it (the tail is kept)."""
        self._drain()
        self.spawned()
        read_fd, self._read_fd = self._read_fd, None
        if read_fd is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(read_fd)
        os.close(read_fd)

    def _drain(self) -> None:
        """Read everything the pipe holds now (non-blocking); at its end, stop reading."""
        fd = self._read_fd
        while fd is not None:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:  # every writer is gone
                if self._loop is not None and not self._loop.is_closed():
                    self._loop.remove_reader(fd)
                os.close(fd)
                self._read_fd = None
                return
            self.written += len(chunk)
            self._kept += chunk
            if len(self._kept) > self.keep:
                del self._kept[: len(self._kept) - self.keep]


__all__ = ["KEEP_BYTES", "StderrTail"]
