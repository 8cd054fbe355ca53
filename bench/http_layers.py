#!/usr/bin/env python3
"""What one model request costs through each layer of the HTTP stack, on the same kept connection.

Role: the offline endpoint (``keep_alive``) runs in a process of its own; this process sends
``--requests`` step-sized requests (~95 KB body: 200 messages) on one kept connection through each
layer, alternated in rounds, and reads this thread's CPU clock (``time.thread_time``):

* ``chat_client`` — ``ChatClient.stream(body)``: httpx, httpcore, h11, our transport, the SSE parse;
* ``httpx`` — ``AsyncClient.send`` of a request made as ``ChatClient._request`` makes it, the body
  read raw (no SSE parse);
* ``httpcore`` — our ``EndpointPool`` (httpcore's pool and HTTP/1.1 connection, our socket backend)
  directly, the body read raw;
* ``h11`` — h11's ``Connection`` on the socket itself (``send_with_data_passthrough``: the head,
  then the body's own bytes, one ``sendmsg``), the answer read by h11.

For each: ``to_send_ms``, the CPU from the call to the request's ``sendmsg`` (the part on the way to
the model); ``whole_ms``, to the answer read to its end. ``--cold N``: N fresh processes per layer,
each ``ChatClient.warm`` and a connection opened ahead (as a load leaves them), then the CPU to the
``sendmsg`` of its first three requests: the first request after a load runs code the process has
not run yet. The floor: ``encode_body`` of the same body
(best of 5 × 20) in the same process. Medians over the requests of a round; the rounds' ranges.

Must never: report a figure without the machine it was taken on (``bench/README.md`` keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ENDPOINT = r"""
import asyncio, sys
from agent_server.offline import OfflineEndpoint, text_stream
async def main():
    endpoint = OfflineEndpoint([text_stream("Go on.", chunk_size=64)], loop=True, keep_alive=True)
    await endpoint.start()
    print(endpoint.base_url, flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    await endpoint.stop()
asyncio.run(main())
"""


def _body() -> tuple[dict[str, Any], bytes]:
    from agent_server.llm import encode_body
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": ("word %d " % i) * 60} for i in range(200)]
    request = {"model": "m", "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
    return request, encode_body(request)


class _Sends:
    """The CPU clock at each request's first ``sendmsg`` (patched into our socket stream and into
    the socket h11's path writes to)."""

    def __init__(self) -> None:
        self.at: list[float] = []

    def install(self) -> None:
        from agent_server.llm import _transport
        real = _transport.SocketStream._send_unsent
        sends = self

        async def send_unsent(stream: Any, timeout: Any) -> None:
            sends.at.append(time.thread_time())
            await real(stream, timeout)
        _transport.SocketStream._send_unsent = send_unsent  # type: ignore[method-assign]


async def _chat_client(client: Any, body: bytes) -> None:
    async for _ in client.stream(body):
        pass
    await asyncio.gather(*client._tails)  # the answer's end read (in a task): the connection back in the pool


async def _httpx(client: Any, body: bytes) -> None:
    response = await client._client.send(client._request(body, None), stream=True)
    async for _ in response.aiter_raw():
        pass
    await response.aclose()


async def _httpcore(client: Any, body: bytes) -> None:
    import httpcore
    request = client._request(body, None)
    pool = client._transport._pool
    response = await pool.handle_async_request(httpcore.Request(
        b"POST", httpcore.URL(scheme=b"http", host=request.url.raw_host, port=request.url.port, target=request.url.raw_path),
        headers=request.headers.raw, content=body, extensions={"timeout": client._timeouts}))
    async for _ in response.aiter_stream():
        pass
    await response.aclose()


class _H11:
    """h11's ``Connection`` on one socket, kept between requests."""

    def __init__(self, host: str, port: int, head: list[tuple[bytes, bytes]], sends: _Sends) -> None:
        self.address = (host, port)
        self.head = head
        self.sends = sends
        self.sock: socket.socket | None = None
        self.conn: Any = None

    async def connect(self) -> None:
        import h11
        self.sock = socket.socket()
        self.sock.setblocking(False)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await asyncio.get_running_loop().sock_connect(self.sock, self.address)
        self.conn = h11.Connection(h11.CLIENT)

    async def __call__(self, client: Any, body: bytes) -> None:
        import h11
        loop = asyncio.get_running_loop()
        if self.sock is None:
            await self.connect()
        assert self.sock is not None
        conn = self.conn
        pieces = conn.send_with_data_passthrough(h11.Request(
            method=b"POST", target=b"/v1/chat/completions",
            headers=[*self.head, (b"Content-Length", str(len(body)).encode())]))
        pieces += conn.send_with_data_passthrough(h11.Data(data=body))
        pieces += conn.send_with_data_passthrough(h11.EndOfMessage())
        self.sends.at.append(time.thread_time())
        sent = self.sock.sendmsg(pieces)
        total = sum(map(len, pieces))
        if sent < total:
            await loop.sock_sendall(self.sock, b"".join(pieces)[sent:])
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await loop.sock_recv(self.sock, 65536))
            elif isinstance(event, h11.EndOfMessage):
                break
        conn.start_next_cycle()


def _layers(client: Any, base_url: str, sends: _Sends) -> dict[str, Any]:
    host, port = base_url.split("//")[1].split("/")[0].split(":")
    head = [(k, v) for k, v in client._request(b"", None).headers.raw if k.lower() != b"content-length"]
    return {"chat_client": _chat_client, "httpx": _httpx, "httpcore": _httpcore, "h11": _H11(host, int(port), head, sends)}


async def _cold(base_url: str, layer: str, body: bytes, sends: _Sends) -> list[float]:
    """In a fresh process: the CPU to the ``sendmsg`` of the first three requests through ``layer``,
    after ``ChatClient.warm`` and a connection opened ahead, as a load leaves them."""
    from agent_server.llm import ChatClient
    client = ChatClient(base_url, "sk-bench")
    client.warm()
    call = _layers(client, base_url, sends)[layer]
    if layer == "h11":
        await call.connect()
    else:
        client.preconnect()
        await asyncio.gather(*client._tails)
    out = []
    for _ in range(3):
        sends.at.clear()
        start = time.thread_time()
        await call(client, body)
        out.append((sends.at[0] - start) * 1e3)
    await client.aclose()
    return out


async def _round(base_url: str, requests: int, body: bytes, sends: _Sends) -> dict[str, dict[str, float]]:
    from agent_server.llm import ChatClient
    client = ChatClient(base_url, "sk-bench")
    client.warm()
    layers = _layers(client, base_url, sends)
    out: dict[str, dict[str, float]] = {}
    for name, call in layers.items():
        to_send, whole = [], []
        for i in range(requests + 20):  # the first 20: warming (the interpreter specialises the code)
            sends.at.clear()
            start = time.thread_time()
            await call(client, body)
            end = time.thread_time()
            if i >= 20:
                to_send.append(sends.at[0] - start)
                whole.append(end - start)
        out[name] = {"to_send_ms": statistics.median(to_send) * 1e3, "whole_ms": statistics.median(whole) * 1e3}
    await client.aclose()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cold", type=int, default=0, help="also N fresh processes per layer: its first requests")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # LAYER BASE_URL: one cold process
    args, rest = parser.parse_known_args()
    if args.child:
        sends = _Sends()
        sends.install()
        print(json.dumps(asyncio.run(_cold(rest[0], args.child, _body()[1], sends))))
        return
    root = Path(__file__).resolve().parents[1]
    endpoint = subprocess.Popen([sys.executable, "-c", ENDPOINT], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                text=True, cwd=str(root))
    try:
        base_url = endpoint.stdout.readline().strip()  # type: ignore[union-attr]
        request, body = _body()
        sends = _Sends()
        sends.install()
        load = [os.getloadavg()[0]]
        rounds = []
        for _ in range(args.rounds):
            rounds.append(asyncio.run(_round(base_url, args.requests, body, sends)))
        colds: dict[str, list[list[float]]] = {}
        for _ in range(args.cold):
            for layer in ("chat_client", "httpx", "httpcore", "h11"):
                out = subprocess.run([sys.executable, __file__, "--child", layer, base_url], capture_output=True,
                                     text=True, check=True, cwd=str(root))
                colds.setdefault(layer, []).append(json.loads(out.stdout))
        load.append(os.getloadavg()[0])
    finally:
        endpoint.stdin.write("\n")  # type: ignore[union-attr]
        endpoint.stdin.flush()  # type: ignore[union-attr]
        endpoint.wait(timeout=10)
    from agent_server.llm import encode_body
    gc.collect()
    encode = min(timeit.repeat(lambda: encode_body(request), number=20, repeat=5)) / 20 * 1e3
    figures = {}
    for name in rounds[0]:
        for key in ("to_send_ms", "whole_ms"):
            values = [r[name][key] for r in rounds]
            figures.setdefault(name, {})[key] = [round(min(values), 3), round(statistics.median(values), 3),
                                                 round(max(values), 3)]
        figures[name]["to_send_per_encode"] = round(statistics.median(r[name]["to_send_ms"] for r in rounds) / encode, 2)
    print(json.dumps({"machine": f"{os.cpu_count()} cores, {platform.python_version()}",
                      "load": [round(x, 1) for x in load], "bytes": len(body), "encode_ms": round(encode, 3),
                      "layers (min, median, max over rounds)": figures,
                      **({"cold: the first three requests of a process, medians over processes": {
                          layer: [round(statistics.median(run[i] for run in runs), 3) for i in range(3)]
                          for layer, runs in colds.items()}} if colds else {})}, indent=1))


if __name__ == "__main__":
    main()
