"""Fixtures for the LLM client tests: the shared recorded streams, a live offline endpoint on
127.0.0.1, and a helper that runs one request through ChatClient.stream (real HTTP, no mocks)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from agent_server.llm import ChatClient, Finish, LLMError, StreamEvent, encode_body
from agent_server.offline import OfflineEndpoint
from support.paths import SSE_DIR

REQUEST_BODY: dict[str, Any] = {
    "model": "test-model",
    "messages": [{"role": "user", "content": "héllo — ✓ 日本"}],
    "stream": True,
    "stream_options": {"include_usage": True},
}


@pytest.fixture(scope="session")
def sse_dir() -> Path:
    """``tests/fixtures/sse``: the recorded provider streams and their ``expected.json``."""
    assert (SSE_DIR / "expected.json").is_file(), f"recorded SSE fixtures missing in {SSE_DIR}"
    return SSE_DIR


@pytest.fixture(scope="session")
def expected(sse_dir: Path) -> dict[str, Any]:
    return json.loads((sse_dir / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture
def fixture_bytes(sse_dir: Path) -> Callable[[str], bytes]:
    return lambda name: (sse_dir / name).read_bytes()


@pytest.fixture
def fixture_frames(fixture_bytes: Callable[[str], bytes]) -> Callable[[str], list[dict]]:
    """The JSON frames of a recorded stream (every ``data:`` line but ``[DONE]``)."""
    def frames(name: str) -> list[dict]:
        out = []
        for line in fixture_bytes(name).decode("utf-8").splitlines():
            line = line.strip()
            if line.startswith("data:") and line[5:].strip() != "[DONE]":
                out.append(json.loads(line[5:]))
        return out
    return frames


@pytest.fixture
async def endpoint() -> AsyncIterator[OfflineEndpoint]:
    async with OfflineEndpoint() as ep:
        yield ep


@pytest.fixture
def body() -> bytes:
    return encode_body(REQUEST_BODY)


RunStream = Callable[..., Awaitable[list[StreamEvent]]]


@pytest.fixture
def run_stream(endpoint: OfflineEndpoint, body: bytes) -> RunStream:
    """``await run_stream(response, idle=5.0)``: queue ``response`` on the endpoint, stream one
    request through a fresh ChatClient and return every event (LLMError propagates; the events
    yielded before it are in ``exc.events``)."""
    async def run(response: Mapping[str, Any] | None, *, idle: float = 5.0,
                  api_key: str | None = "sk-test") -> list[StreamEvent]:
        if response is not None:
            endpoint.push(response)
        client = ChatClient(endpoint.base_url, api_key, stream_idle_timeout=idle)
        events: list[StreamEvent] = []
        try:
            async for event in client.stream(body):
                events.append(event)
        except LLMError as exc:
            exc.events = events  # type: ignore[attr-defined]
            raise
        finally:
            await client.aclose()
        return events
    return run


def finish_of(events: list[StreamEvent]) -> Finish:
    assert events and isinstance(events[-1], Finish), events[-1:] or "no events"
    return events[-1]


@pytest.fixture
def assembled() -> Callable[[list[StreamEvent]], Any]:
    """The AssembledMessage of an event list (asserts Finish is last and unique)."""
    def get(events: list[StreamEvent]) -> Any:
        assert sum(isinstance(e, Finish) for e in events) == 1
        return finish_of(events).message
    return get
