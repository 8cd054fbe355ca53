"""The CLI's start-up fast path reads its first lines in one pass and never keeps a huge one: a line
past ``FAST_LINE_LIMIT`` is left, as read so far, to the engine (which skips or parses it in
linear time) — it used to be gathered by ``bytes += chunk`` with a whole-buffer search per 64 KiB,
time quadratic in the line's size."""

import os
import threading

from agent_server.cli import serve as cli


def _pipe_with(data: bytes) -> int:
    read_fd, write_fd = os.pipe()

    def feed() -> None:
        try:
            os.write(write_fd, data)
        except BrokenPipeError:
            pass
        finally:
            os.close(write_fd)
    threading.Thread(target=feed, daemon=True).start()
    return read_fd


def test_fast_path_stops_reading_a_line_longer_than_its_limit_and_hands_it_on_whole():
    line = b'{"x":"' + b"a" * (4 * cli.FAST_LINE_LIMIT) + b'"}\n'
    fd = _pipe_with(line + b'{"next":1}\n')
    try:
        first, rest = cli._read_first_line(fd)
        assert first == b"" and cli.FAST_LINE_LIMIT < len(rest) <= cli.FAST_LINE_LIMIT + (1 << 16)
        assert line.startswith(rest)  # what was read goes on to the engine, in order
    finally:
        os.close(fd)


def test_fast_path_reads_short_lines_and_keeps_what_follows():
    fd = _pipe_with(b'{"a":1}\n{"b":2}\n')
    try:
        first, rest = cli._read_first_line(fd)
        assert first == b'{"a":1}\n'
        second, rest = cli._read_first_line(fd, rest)
        assert second == b'{"b":2}\n' and rest == b""
    finally:
        os.close(fd)
