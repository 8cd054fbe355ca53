#!/usr/bin/env python3
"""The first request to an https endpoint with and without the connection opened ahead.

Role: a TLS endpoint on 127.0.0.1 in a process of its own (a CA made for the run with ``trustme``,
trusted through ``SSL_CERT_FILE`` as httpx reads it; the parts of ``tests/support/tls.py``'s) stamps
the moment each request is whole.
``client``: a fresh ``ChatClient`` (a new pool), with ``preconnect`` done (and 0.1 s left for the
server's session tickets) or not, then one request, timed from ``stream()`` to the endpoint's stamp.
``session``: the real ``AcpServer`` in this process — ``session/new`` and what follows its answer
(the warm-up, which opens the spare), then one ``session/prompt``, timed from the prompt to the
endpoint's stamp; "without" turns ``ChatClient.preconnect`` off. Runs alternate with/without.
``--paused S``: the endpoint keeps its connections (``Content-Length`` answers); one ``ChatClient``
makes a request, waits ``S`` s (a person reading the answer and typing), then a second one, timed
as above — with the pool's keep-alive expiry of before (httpcore's 5 s: the connection is gone) and
of now (``KEEPALIVE_EXPIRY``: it is reused), alternated.
Local figures: a handshake on 127.0.0.1 costs CPU, not the round trips a remote provider adds.

Must never: report a figure without the machine it was taken on (``bench/README.md`` keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support.tls import KEPT_ANSWER, SSE_ANSWER, local_ca, whole_request  # noqa: E402 — the tests' TLS endpoint's parts


async def _relay(listen_port_out: list[int], target: int, delay: float) -> asyncio.base_events.Server:
    """A TCP relay to ``target`` that holds each chunk ``delay`` s before passing it on (either
    way, in order): a one-way latency, so the handshake's round trips cost what a remote one does."""
    async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def later() -> None:
            while True:
                due, chunk = await queue.get()
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if not chunk:
                    writer.close()
                    return
                writer.write(chunk)

        sender = asyncio.create_task(later())
        try:
            while True:
                chunk = await reader.read(1 << 16)
                queue.put_nowait((time.monotonic() + delay, chunk))
                if not chunk:
                    break
            await sender
        except (ConnectionError, asyncio.CancelledError):
            sender.cancel()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer), return_exceptions=True)

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    listen_port_out.append(server.sockets[0].getsockname()[1])
    return server


def serve(cert_file: str, delay: float = 0.0, keep_alive: bool = False) -> None:
    """The endpoint (``--serve``): prints its port (a relay's with ``delay``), then one JSON line
    per whole request; ``keep_alive``: the connection waits for the next request after an answer."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file)

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = b""
        try:
            while chunk := await reader.read(1 << 20):
                data += chunk
                whole = whole_request(data)
                if whole is not None:
                    length, rest = whole
                    print(json.dumps({"t": time.time(), "bytes": len(rest)}), flush=True)
                    writer.write(KEPT_ANSWER if keep_alive else SSE_ANSWER)
                    await writer.drain()
                    if not keep_alive:
                        return
                    data = rest[length:]
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(connection, "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        if delay:
            ports: list[int] = []
            relay = await _relay(ports, port, delay)  # noqa: F841 — kept open
            port = ports[0]
        print(port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())


class Endpoint:
    def __init__(self, directory: Path, latency_ms: float = 0.0, keep_alive: bool = False) -> None:
        ca, self.ca_file = local_ca(directory)
        cert_file = directory / "server.pem"
        ca.issue_cert("localhost", "127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(cert_file))
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", str(cert_file), "--latency-ms", str(latency_ms),
                                      *(["--keep-alive"] if keep_alive else [])], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def url(self) -> str:
        return f"https://localhost:{self.port}/v1"

    def stamp(self) -> float:
        assert self.proc.stdout is not None
        return json.loads(self.proc.stdout.readline())["t"]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


async def timed(client: Any, endpoint: Endpoint, body: bytes) -> float:
    """One request of ``client``'s: from ``stream()`` to the endpoint's stamp of it whole."""
    start = time.time()
    async for _ in client.stream(body):
        pass
    return endpoint.stamp() - start


async def client_run(endpoint: Endpoint, body: bytes, ahead: bool) -> float:
    from agent_server.llm import ChatClient

    client = ChatClient(endpoint.url(), "sk-bench")
    try:
        client.warm()
        if ahead:
            assert client.preconnect()
            assert await asyncio.gather(*client._tails) == [True]
        await asyncio.sleep(0.1)  # a person's pause (the server's session tickets arrive meanwhile)
        return await timed(client, endpoint, body)
    finally:
        await client.aclose()


async def paused_run(endpoint: Endpoint, body: bytes, pause: float, expiry: float) -> float:
    """A request, ``pause`` s, then the request timed, on a pool keeping an idle connection ``expiry`` s."""
    import httpx

    from agent_server.llm import ChatClient
    from agent_server.llm._transport import TLSTransport

    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=expiry)
    client = ChatClient(endpoint.url(), "sk-bench", transport=TLSTransport(limits))
    try:
        client.warm()
        async for _ in client.stream(body):
            pass
        await asyncio.gather(*client._tails)
        endpoint.stamp()
        await asyncio.sleep(pause)
        return await timed(client, endpoint, body)
    finally:
        await client.aclose()


async def session_run(endpoint: Endpoint, directory: Path, ahead: bool) -> float:
    from agent_server.config.load import load_config
    from agent_server.llm import ChatClient
    from agent_server.server.acp.server import AcpServer
    from agent_server.server.rpc.jsonrpc import RequestContext
    from agent_server.session import SessionStore

    real = ChatClient.preconnect
    if not ahead:
        ChatClient.preconnect = lambda self: False  # type: ignore[method-assign]
    config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": endpoint.url(), "AGENT_SERVER_MODEL": "m",
                                               "AGENT_SERVER_API_KEY": "k", "AGENT_SERVER_SANDBOX": "off"})
    server = AcpServer(config, SessionStore(directory / "state"))
    server.remember_initialize({"protocolVersion": 1, "clientCapabilities": {}})

    async def call(method: str, params: dict) -> dict:
        ctx = RequestContext(1, method)
        result = await server.request_handlers()[method](params, ctx)
        for callback in ctx._after:
            await callback()
        return result

    try:
        sid = (await call("session/new", {"cwd": str(directory), "mcpServers": []}))["sessionId"]
        client = server.host.pool.get(endpoint.url(), "k")
        await asyncio.gather(*client._tails)
        await asyncio.sleep(0.1)
        start = time.time()
        await call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]})
    finally:
        await server.aclose()
        ChatClient.preconnect = real  # type: ignore[method-assign]
    return endpoint.stamp() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each kind (alternated)")
    parser.add_argument("--latency-ms", type=float, default=0.0,
                        help="one-way latency a relay in front of the endpoint adds (a remote provider's)")
    parser.add_argument("--paused", type=float, metavar="S",
                        help="time a request sent S s after the previous answer (keep-alive expiry 5 s vs now)")
    parser.add_argument("--serve", metavar="CERT", help=argparse.SUPPRESS)
    parser.add_argument("--keep-alive", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms / 1000, args.keep_alive)
        return
    if args.paused is not None:
        paused(args)
        return
    from agent_server.llm import encode_body

    body = encode_body({"model": "m", "messages": [{"role": "user", "content": "x" * 20000}], "stream": True})
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        endpoint = Endpoint(directory, args.latency_ms)
        os.environ["SSL_CERT_FILE"] = str(endpoint.ca_file)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            os.environ.pop(name, None)
        load = [os.getloadavg()[0]]
        figures: dict[str, list[float]] = {k: [] for k in ("client_ahead", "client_cold", "session_ahead", "session_cold")}
        try:
            for i in range(args.runs):
                for ahead in ((True, False) if i % 2 == 0 else (False, True)):
                    kind = "ahead" if ahead else "cold"
                    figures[f"client_{kind}"].append(asyncio.run(client_run(endpoint, body, ahead)))
                    run_dir = directory / f"s{i}{kind}"
                    run_dir.mkdir()
                    figures[f"session_{kind}"].append(asyncio.run(session_run(endpoint, run_dir, ahead)))
        finally:
            endpoint.stop()
        load.append(os.getloadavg()[0])
    out = {"machine": f"{os.cpu_count()} cores, {platform.python_version()}",
           "load": [round(x, 1) for x in load], "runs": args.runs, "latency_ms": args.latency_ms}
    for level in ("client", "session"):
        ahead, cold = figures[f"{level}_ahead"], figures[f"{level}_cold"]
        out[level] = {"ahead_ms": round(statistics.median(ahead) * 1e3, 2),
                      "cold_ms": round(statistics.median(cold) * 1e3, 2),
                      "ahead_range_ms": [round(min(ahead) * 1e3, 2), round(max(ahead) * 1e3, 2)],
                      "cold_range_ms": [round(min(cold) * 1e3, 2), round(max(cold) * 1e3, 2)],
                      "cold_over_ahead": round(statistics.median(cold) / statistics.median(ahead), 2)}
    print(json.dumps(out, indent=1))


def paused(args: argparse.Namespace) -> None:
    from agent_server.llm import encode_body
    from agent_server.llm._transport import KEEPALIVE_EXPIRY

    body = encode_body({"model": "m", "messages": [{"role": "user", "content": "x" * 20000}], "stream": True})
    expiries = {"before_5s": 5.0, "now": KEEPALIVE_EXPIRY}
    figures: dict[str, list[float]] = {k: [] for k in expiries}
    with tempfile.TemporaryDirectory() as tmp:
        endpoint = Endpoint(Path(tmp), args.latency_ms, keep_alive=True)
        os.environ["SSL_CERT_FILE"] = str(endpoint.ca_file)
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
            os.environ.pop(name, None)
        load = [os.getloadavg()[0]]
        try:
            for i in range(args.runs):
                for kind in (list(expiries) if i % 2 == 0 else list(expiries)[::-1]):
                    figures[kind].append(asyncio.run(paused_run(endpoint, body, args.paused, expiries[kind])))
        finally:
            endpoint.stop()
        load.append(os.getloadavg()[0])
    out = {"machine": f"{os.cpu_count()} cores, {platform.python_version()}", "load": [round(x, 1) for x in load],
           "runs": args.runs, "latency_ms": args.latency_ms, "pause_s": args.paused}
    for kind, values in figures.items():
        out[kind] = {"median_ms": round(statistics.median(values) * 1e3, 2),
                     "range_ms": [round(min(values) * 1e3, 2), round(max(values) * 1e3, 2)]}
    out["before_over_now"] = round(out["before_5s"]["median_ms"] / out["now"]["median_ms"], 2)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
