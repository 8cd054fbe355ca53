"""ChatClient over real HTTP: error mapping, idle timeout, network failure, non-SSE answers,
and the exact request it sends."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket

import pytest

from agent_server.llm import ChatClient, LLMError, TextDelta, encode_body
from agent_server.offline import text_stream
from support.timeouts import HANG


def error(status: int, payload, headers=None) -> dict:
    key = "text" if isinstance(payload, str) else "json"
    return {"kind": "error", "status": status, "headers": headers or {}, key: payload}


async def raises(run_stream, response, **kwargs) -> LLMError:
    with pytest.raises(LLMError) as info:
        await run_stream(response, **kwargs)
    return info.value


async def test_401_is_auth_and_not_retryable(run_stream):
    exc = await raises(run_stream, error(401, {"error": {
        "message": "Incorrect API key provided: sk-test.", "type": "invalid_request_error",
        "code": "invalid_api_key"}}))
    assert (exc.code, exc.retryable, exc.status) == ("AUTH", False, 401)
    assert "Incorrect API key provided" in exc.message
    assert exc.to_dict() == {"code": "AUTH", "message": exc.message, "retryable": False}


async def test_403_is_auth(run_stream):
    exc = await raises(run_stream, error(403, {"error": {"message": "forbidden"}}))
    assert exc.code == "AUTH"


async def test_429_with_retry_after_is_rate_limit(run_stream):
    exc = await raises(run_stream, error(429, {"error": {
        "message": "Rate limit reached for gpt-4o", "type": "requests",
        "code": "rate_limit_exceeded"}}, {"Retry-After": "2"}))
    assert (exc.code, exc.retryable, exc.status, exc.retry_after) == ("RATE_LIMIT", True, 429, 2.0)
    assert "Rate limit reached for gpt-4o" in exc.message


async def test_429_insufficient_quota_is_not_a_retryable_rate_limit(run_stream):
    exc = await raises(run_stream, error(429, {"error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota", "code": "insufficient_quota"}}))
    assert exc.code == "AUTH" and not exc.retryable


async def test_500_is_server_and_retryable(run_stream):
    exc = await raises(run_stream, error(500, {"error": {"message": "upstream exploded"}}))
    assert (exc.code, exc.retryable, exc.status) == ("SERVER", True, 500)
    assert "upstream exploded" in exc.message


async def test_503_plain_text_body_is_server_with_the_text(run_stream):
    exc = await raises(run_stream, error(503, "Service Unavailable: model loading"))
    assert exc.code == "SERVER" and "model loading" in exc.message


@pytest.mark.parametrize("status, message", [
    (400, "This model's maximum context length is 128000 tokens. However, your messages "
          "resulted in 130000 tokens. Please reduce the length of the messages."),
    (400, "the request exceeds the available context size, try increasing it"),   # llama.cpp
    (422, "Input is too long for requested model"),
    (413, "Request Entity Too Large"),
])
async def test_context_overflow_is_context_window_exceeded(status, message, run_stream):
    exc = await raises(run_stream, error(status, {"error": {"message": message}}))
    assert (exc.code, exc.retryable, exc.status) == ("CONTEXT_WINDOW_EXCEEDED", False, status)
    assert message in exc.message


@pytest.mark.parametrize("status", [400, 404, 422])
async def test_other_client_errors_are_bad_request(status, run_stream):
    exc = await raises(run_stream, error(status, {"error": {
        "message": "Unrecognized request argument supplied: foo"}}))
    assert (exc.code, exc.retryable) == ("BAD_REQUEST", False)
    assert "Unrecognized request argument" in exc.message


async def test_fastapi_detail_body_message_is_kept(run_stream):
    exc = await raises(run_stream, error(404, {"detail": "Model 'nope' not found"}))
    assert exc.code == "BAD_REQUEST" and "Model 'nope' not found" in exc.message


async def test_endpoint_down_is_network():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = ChatClient(f"http://127.0.0.1:{port}/v1", "sk-test", connect_timeout=2)
    try:
        with pytest.raises(LLMError) as info:
            async for _ in client.stream(b"{}"):
                pass
    finally:
        await client.aclose()
    assert (info.value.code, info.value.retryable, info.value.status) == ("NETWORK", True, None)
    assert f"127.0.0.1:{port}" in info.value.message


async def test_silent_stream_is_stream_idle(run_stream):
    exc = await raises(run_stream, {"kind": "hang"}, idle=0.3)
    assert (exc.code, exc.retryable) == ("STREAM_IDLE", True)


async def test_no_response_headers_at_all_is_stream_idle(run_stream):
    exc = await raises(run_stream, {"kind": "hang", "headers": False}, idle=0.3)
    assert exc.code == "STREAM_IDLE"


async def test_silence_after_some_frames_is_stream_idle(run_stream):
    frame = 'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
    exc = await raises(run_stream, {"kind": "raw", "writes": [{"text": frame}], "close": False},
                       idle=0.3)
    assert exc.code == "STREAM_IDLE"
    assert [e.text for e in exc.events] == ["Hi"]


async def test_keepalive_comments_reset_the_idle_timer(run_stream, assembled):
    # 0.6 s of nothing but ": keep-alive" every 0.1 s, with a 0.3 s idle timeout
    writes = [{"text": ": keep-alive\n\n", "delay": 0.1} for _ in range(6)]
    answer = text_stream("still here", chunk_size=4)
    writes += [{"text": "data: " + json.dumps(f) + "\n\n"} for f in answer["frames"]]
    writes.append({"text": "data: [DONE]\n\n"})
    message = assembled(await run_stream({"kind": "raw", "writes": writes}, idle=0.3))
    assert message.content == "still here"


async def test_200_json_error_body_is_mapped(run_stream):
    exc = await raises(run_stream, error(200, {"error": {
        "message": "Rate limit exceeded: free-models-per-day", "code": 429}}))
    assert exc.code == "RATE_LIMIT" and "free-models-per-day" in exc.message


async def test_200_html_is_bad_request_with_a_clear_message(run_stream):
    exc = await raises(run_stream, {"kind": "error", "status": 200, "text": "<html>hi</html>",
                                    "headers": {"Content-Type": "text/html"}})
    assert exc.code == "BAD_REQUEST"
    assert "text/event-stream" in exc.message and "text/html" in exc.message


async def test_200_non_streamed_completion_is_assembled(run_stream, assembled):
    completion = {"id": "x", "object": "chat.completion", "choices": [{
        "index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.", "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "read", "arguments": "{\"path\": \"a.py\"}"}}]}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}}
    events = await run_stream(error(200, completion))
    message = assembled(events)
    assert message.content == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("call_1", "read", '{"path": "a.py"}')]
    assert [type(e).__name__ for e in events][-2:] == ["Usage", "Finish"]


async def test_malformed_frame_is_server_error(run_stream):
    exc = await raises(run_stream, {"kind": "sse", "frames": ["{not json"]})
    assert exc.code == "SERVER" and "{not json" in exc.message


async def test_request_bytes_and_headers_are_exactly_what_was_given(endpoint, body, run_stream):
    await run_stream(text_stream("ok"))
    (request,) = endpoint.requests
    assert request.method == "POST"
    assert request.path == "/v1/chat/completions"
    assert request.body == body
    assert request.json()["messages"][0]["content"] == "héllo — ✓ 日本"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["content-length"] == str(len(body))


async def test_no_authorization_without_key_and_extra_headers_are_sent(endpoint, body):
    endpoint.push(text_stream("ok"))
    client = ChatClient(endpoint.base_url + "/", None, headers={"HTTP-Referer": "https://x.test"})
    try:
        events = [e async for e in client.stream(body)]
    finally:
        await client.aclose()
    assert events[-1].message.content == "ok"
    (request,) = endpoint.requests
    assert "authorization" not in request.headers
    assert request.headers["http-referer"] == "https://x.test"
    assert request.path == "/v1/chat/completions"  # trailing slash of base_url stripped


async def test_one_client_serves_several_requests(endpoint, body):
    client = ChatClient(endpoint.base_url, "k")
    try:
        for text in ("one", "two", "three"):
            endpoint.push(text_stream(text))
            events = [e async for e in client.stream(body)]
            assert events[-1].message.content == text
    finally:
        await client.aclose()
    assert [r.body for r in endpoint.requests] == [body] * 3


async def test_stream_rejects_a_dict_body(endpoint):
    client = ChatClient(endpoint.base_url, "k")
    try:
        with pytest.raises(TypeError):
            async for _ in client.stream({"model": "x"}):  # type: ignore[arg-type]
                pass
    finally:
        await client.aclose()


def test_encode_body_is_compact_utf8_in_key_order():
    body = {"model": "m", "messages": [{"role": "user", "content": "ü ✓"}], "stream": True}
    assert encode_body(body) == '{"model":"m","messages":[{"role":"user","content":"ü ✓"}],' \
                                '"stream":true}'.encode("utf-8")
    assert encode_body(body) == json.dumps(
        body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


async def _until(predicate, timeout: float = HANG) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


async def test_cancelling_a_stream_raises_cancelled_error_not_llm_error(endpoint, body):
    endpoint.push({"kind": "hang"})
    client = ChatClient(endpoint.base_url, "k", stream_idle_timeout=30)

    async def consume() -> None:
        async for _ in client.stream(body):
            pass

    task = asyncio.create_task(consume())
    try:
        await _until(lambda: endpoint.requests)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await _until(lambda: endpoint.open_connections == 0)  # the connection was released
    finally:
        await client.aclose()


async def test_leaving_a_stream_early_releases_the_connection(endpoint, body):
    frame = 'data: {"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}\n\n'
    endpoint.push({"kind": "raw", "writes": [{"text": frame}], "close": False})
    client = ChatClient(endpoint.base_url, "k", stream_idle_timeout=30)
    try:
        async with contextlib.aclosing(client.stream(body)) as events:
            async for event in events:
                assert event == TextDelta("Hi")
                break
        await _until(lambda: endpoint.open_connections == 0)
    finally:
        await client.aclose()


async def test_429_about_tokens_per_minute_stays_a_rate_limit(run_stream):
    exc = await raises(run_stream, error(429, {"error": {
        "message": "Request too large for gpt-4o on tokens per min (TPM): Limit 30000, Requested "
                   "45000. Too many tokens requested.", "code": "rate_limit_exceeded"}}))
    assert exc.code == "RATE_LIMIT"


async def test_500_mentioning_context_is_still_server(run_stream):
    exc = await raises(run_stream, error(500, {"error": {
        "message": "worker crashed while computing the context length"}}))
    assert exc.code == "SERVER"


async def _error_at(endpoint, base_url: str, response) -> LLMError:
    endpoint.push(response)
    client = ChatClient(base_url, "sk-test")
    try:
        with pytest.raises(LLMError) as info:
            async for _ in client.stream(b"{}"):
                pass
    finally:
        await client.aclose()
    return info.value


async def test_a_base_url_without_v1_was_told_only_bad_request_http_404_not_found(endpoint):
    """Newcomer 6 finding 5: ``AGENT_SERVER_BASE_URL=http://127.0.0.1:PORT`` against a server that serves
    ``/v1/chat/completions`` only — the commonest set-up mistake — said ``BAD_REQUEST: HTTP 404: Not Found``
    and nothing else. The error names the URL that answered 404 and the likely fix."""
    root = endpoint.base_url.removesuffix("/v1")
    exc = await _error_at(endpoint, root, error(404, "Not Found"))
    assert exc.code == "BAD_REQUEST" and "HTTP 404: Not Found" in exc.message
    assert f"POST {root}/chat/completions" in exc.message and f"try {root}/v1" in exc.message, exc.message


async def test_a_404_for_an_unknown_model_names_the_model_not_the_base_url(endpoint):
    exc = await _error_at(endpoint, endpoint.base_url, error(404, {"error": {
        "message": "The model `gpt-9` does not exist or you do not have access to it.", "code": "model_not_found"}}))
    assert "check the model name" in exc.message and "/v1" not in exc.message.split("(from POST")[1].split(";")[1]
