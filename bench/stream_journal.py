#!/usr/bin/env python3
"""What the stream journal costs per streamed delta, next to the stream's own write of it.

Role: time, per delta of a model's answer, (a) ``StreamJournal.text`` — one JSON line appended to
``stream.journal`` with one ``os.write`` — and (b) what the server does anyway for a delta it sends
uncoalesced: the ACP ``session/update`` line encoded (``server.rpc.wire.encode_message``) and written
to a pipe the "editor" (a thread) drains; then the ratio a/b. Also the per-step fixed cost:
``begin`` + the file's creation at the first delta + ``end`` (close and unlink).

Must never: report a figure without the machine it was taken on (``bench/README.md`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_server.server.rpc.wire import encode_message  # noqa: E402
from agent_server.session.journal import StreamJournal  # noqa: E402

WORDS = ["the", "function", "returns", "a", "list", "of", "values;", "café", "naïve", "→", "`x`", "\n", "42,", "über"]


def deltas(count: int, seed: int = 1) -> list[str]:
    """Deltas shaped like a model's: 1–4 words (a token or a few), some non-ASCII."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4))) + " " for _ in range(count)]


def drained_pipe() -> tuple[int, threading.Thread]:
    """The write end of a pipe whose read end a thread empties, as an editor reads the server's stdout."""
    read_fd, write_fd = os.pipe()

    def drain() -> None:
        while os.read(read_fd, 1 << 16):
            pass
        os.close(read_fd)

    thread = threading.Thread(target=drain, daemon=True)
    thread.start()
    return write_fd, thread


def time_stream_write(chunks: list[str], fd: int) -> float:
    """Seconds to encode and write one ``agent_message_chunk`` notification per delta."""
    start = time.perf_counter()
    for i, text in enumerate(chunks):
        os.write(fd, encode_message({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": "sess_0123456789abcdef0123456789abcdef", "update": {
                "sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
                "messageId": "msg-1234"}}}))
    return time.perf_counter() - start


def time_journal(chunks: list[str], folder: Path) -> float:
    """Seconds to journal every delta of one attempt (its file made at the first one)."""
    journal = StreamJournal(folder / "stream.journal")
    journal.begin(step_seq=1234, turn=3, step=2, attempt=1)
    journal.text(chunks[0])  # the file's creation is the per-step cost, timed apart
    start = time.perf_counter()
    for text in chunks[1:]:
        journal.text(text)
    elapsed = time.perf_counter() - start
    journal.end()
    return elapsed


def time_step_fixed(folder: Path, steps: int) -> float:
    """Seconds per step for begin + the first delta (creates the file) + end (close, unlink)."""
    journal = StreamJournal(folder / "stream.journal")
    start = time.perf_counter()
    for _ in range(steps):
        journal.begin(step_seq=1234, turn=3, step=2, attempt=1)
        journal.text("x")
        journal.end()
    return (time.perf_counter() - start) / steps


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--deltas", type=int, default=5000, help="deltas per round (default 5000)")
    parser.add_argument("--rounds", type=int, default=9, help="rounds; the median is reported (default 9)")
    parser.add_argument("--dir", default=None, help="folder for the journal (default: a temporary one; use the "
                        "state folder's file system to measure that disk)")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args()
    chunks = deltas(args.deltas)
    fd, thread = drained_pipe()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        time_stream_write(chunks[:200], fd)  # warm-up
        time_journal(chunks[:200], folder)
        stream, journal = [], []
        for _ in range(args.rounds):  # alternated, so drift hits both alike
            stream.append(time_stream_write(chunks, fd) / len(chunks))
            journal.append(time_journal(chunks, folder) / (len(chunks) - 1))
        fixed = statistics.median(time_step_fixed(folder, 500) for _ in range(args.rounds))
    os.close(fd)
    thread.join(timeout=5)
    result = {
        "deltas": args.deltas, "rounds": args.rounds,
        "stream_write_us": round(statistics.median(stream) * 1e6, 2),
        "journal_us": round(statistics.median(journal) * 1e6, 2),
        "ratio": round(statistics.median(journal) / statistics.median(stream), 2),
        "per_step_fixed_us": round(fixed * 1e6, 1),
        "python": platform.python_version(), "cores": os.cpu_count(),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"per delta: stream's own write {result['stream_write_us']} µs, journal {result['journal_us']} µs "
              f"(ratio {result['ratio']}); per step: begin + create + end {result['per_step_fixed_us']} µs "
              f"(median of {args.rounds} rounds of {args.deltas} deltas; Python {result['python']}, "
              f"{result['cores']} cores)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
