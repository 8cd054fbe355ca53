#!/usr/bin/env python3
"""The model request's own CPU: from ``ChatClient.stream(body)`` to its ``sendmsg``, against encoding that body.

Role: the offline endpoint runs in a thread; this thread's CPU clock (``time.thread_time``) is read
when ``stream()`` is entered and when ``SocketStream`` sends the request (its ``sendmsg``), for
``--requests`` requests of a step-sized body (~95 KB: 200 messages), each on a connection opened
ahead (``SocketBackend.open_spare``, as after a load; the endpoint closes each connection). The
floor, in the same process: ``encode_body`` of the same body (best of 5 × 20). ``--code DIR`` runs
another tree's ``agent_server`` (e.g. ``git archive <commit> agent_server | tar -x -C DIR``) for a
before/after; ``--rounds`` alternates the trees given with ``--code`` and this one.

Must never: report a figure without the machine it was taken on (``bench/README.md`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

CHILD = r"""
import asyncio, gc, json, statistics, sys, time, timeit
from agent_server.llm import ChatClient, encode_body
from agent_server.llm import _transport
from agent_server.offline import OfflineEndpoint, text_stream

N = int(sys.argv[1])
messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": ("word %d " % i) * 60} for i in range(200)]
request = {"model": "m", "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
body = encode_body(request)
sent_at = []
real = _transport.SocketStream._send_unsent
async def send_unsent(self, timeout):
    sent_at.append(time.thread_time())
    await real(self, timeout)
_transport.SocketStream._send_unsent = send_unsent

async def main():
    endpoint = OfflineEndpoint.start_in_thread([text_stream("hi")], loop=True)
    port = int(endpoint.base_url.split(":")[2].split("/")[0])
    client = ChatClient(endpoint.base_url, "sk-bench")
    client.warm()
    cpu = []
    for i in range(N + 20):
        assert await client._transport.backend.open_spare("127.0.0.1", port)
        sent_at.clear()
        start = time.thread_time()
        async for _ in client.stream(body):
            pass
        if i >= 20:
            cpu.append(sent_at[0] - start)
    await client.aclose()
    endpoint.stop()
    return cpu

cpu = asyncio.run(main())
gc.collect()
encode = min(timeit.repeat(lambda: encode_body(request), number=20, repeat=5)) / 20
print(json.dumps({"request_ms": statistics.median(cpu) * 1e3, "p10_ms": sorted(cpu)[len(cpu) // 10] * 1e3,
                  "encode_ms": encode * 1e3, "bytes": len(body)}))
"""


def run(code: Path, requests: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(code))
    out = subprocess.run([sys.executable, "-c", CHILD, str(requests)], env=env, cwd=code,
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--code", action="append", default=[], help="another tree's root (its agent_server/)")
    args = parser.parse_args()
    trees = [Path(c).resolve() for c in args.code] + [HERE]
    load = [os.getloadavg()[0]]
    rows: dict[str, list[dict]] = {str(t): [] for t in trees}
    for _ in range(args.rounds):
        for tree in trees:
            rows[str(tree)].append(run(tree, args.requests))
    load.append(os.getloadavg()[0])
    print(json.dumps({"machine": f"{os.cpu_count()} cores, {platform.python_version()}",
                      "load": [round(x, 1) for x in load], "trees": {
                          tree: {"request_ms": [round(r["request_ms"], 3) for r in runs],
                                 "encode_ms": [round(r["encode_ms"], 3) for r in runs],
                                 "ratio": [round(r["request_ms"] / r["encode_ms"], 2) for r in runs],
                                 "median_ratio": round(statistics.median(r["request_ms"] / r["encode_ms"] for r in runs), 2),
                                 "bytes": runs[0]["bytes"]}
                          for tree, runs in rows.items()}}, indent=1))


if __name__ == "__main__":
    main()
