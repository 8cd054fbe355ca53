"""Run inside a network namespace of its own (``unshare -rn``; tests/llm/test_llm_keepalive.py): the
model client's kept connection to a real endpoint on 127.0.0.1 loses its peer mid-request — the
loopback link goes down after the request was written, so nothing answers and nothing resets —
and ``TCP_USER_TIMEOUT`` (shortened here to ``sys.argv[1]`` ms) must give it up; the pool then
sends the request again on a new connection (the link is brought back just then). Prints one JSON
line: what happened. ``sys.argv[2]``: ``restore`` (the link comes back as the request is sent again),
``keep`` (it does not), or ``idle`` (the peer vanishes while the kept connection waits: TCP keep-alive
probes, shortened to 1 s, find it dead before the next request; the link comes back before it); ``sys.argv[3]``: the endpoint's host (``127.0.0.1``: the transport's own sockets;
``localhost``: anyio's)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: support.timeouts

from support.timeouts import HANG  # noqa: E402

from agent_server.llm import ChatClient, LLMError, encode_body  # noqa: E402
from agent_server.llm import _transport  # noqa: E402
from agent_server.offline import OfflineEndpoint, text_stream  # noqa: E402


def link(state: str) -> None:
    subprocess.run(["ip", "link", "set", "lo", state], check=True)


def body(text: str) -> bytes:
    return encode_body({"model": "m", "messages": [{"role": "user", "content": text}], "stream": True})


async def main(timeout_ms: int, mode: str, host: str) -> dict:
    _transport.TCP_USER_TIMEOUT_MS = timeout_ms
    if mode == "idle":
        _transport.TCP_KEEPALIVE = (1, 1, 1)  # probes after 1 s idle (15 s in the server)
    restore = mode == "restore"
    link("up")
    out: dict = {}
    async with OfflineEndpoint([text_stream("one"), text_stream("two")], keep_alive=True) as endpoint:
        client = ChatClient(endpoint.base_url.replace("127.0.0.1", host), "sk-test", stream_idle_timeout=HANG)
        pool = client._transport._pool
        close_idle = pool._close_idle

        async def resending(origin):  # the pool gave the dead connection up and sends again now
            out["gave_up_after_s"] = round(time.monotonic() - out["sent_at"], 2)
            if restore:
                link("up")
            await close_idle(origin)

        pool._close_idle = resending
        try:
            out["first"] = "".join([getattr(e, "text", "") async for e in client.stream(body("first"))])
            await asyncio.wait_for(asyncio.gather(*client._tails), HANG)
            while endpoint.idle_connections != 1:
                await asyncio.sleep(0.005)
            (connection,) = pool.connections
            sock = connection._connection._network_stream.get_extra_info("socket")
            import socket

            out["user_timeout_ms"] = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT)
            link("down")  # the peer vanishes: nothing the client writes is ever acknowledged
            if mode == "idle":  # it vanished while the connection waited: the probes find it dead
                from httpcore._utils import is_socket_readable

                async with asyncio.timeout(HANG):
                    while not is_socket_readable(sock):  # (an error makes it readable)
                        await asyncio.sleep(0.05)
                out["idle_dead"] = True  # (its error is left for the pool to meet)
                link("up")
            out["sent_at"] = time.monotonic()
            try:
                out["second"] = "".join([getattr(e, "text", "") async for e in client.stream(body("second"))])
            except LLMError as exc:
                out["error"] = exc.code
                out["message"] = exc.message
            out["resent"] = pool.resent
            out["took_s"] = round(time.monotonic() - out.pop("sent_at"), 2)
        finally:
            link("up")
            await client.aclose()
        out["requests"] = [(r.connection, r.body == body("second")) for r in endpoint.requests]
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))))
