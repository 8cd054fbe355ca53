"""Regressions: the API key never leaks through an LLMError message."""

from agent_server.llm import ChatClient, LLMError
from agent_server.offline import OfflineEndpoint

KEY = "sk-REALKEY-abcdef123"


async def test_provider_error_body_echoing_the_key_is_redacted():
    script = [{"kind": "error", "status": 401, "json": {"error": {"message": f"Incorrect API key provided: {KEY}"}}}]
    async with OfflineEndpoint(script) as ep:
        client = ChatClient(ep.base_url, KEY)
        try:
            async for _ in client.stream(b"{}"):
                pass
        except LLMError as exc:
            error = exc
        finally:
            await client.aclose()
    assert error.code == "AUTH"
    assert KEY not in error.message and KEY not in str(error) and "<redacted>" in error.message


async def test_a_short_dummy_key_does_not_mangle_error_text():
    script = [{"kind": "error", "status": 400, "json": {"error": {"message": "maximum context length exceeded"}}}]
    async with OfflineEndpoint(script) as ep:
        client = ChatClient(ep.base_url, "x")
        try:
            async for _ in client.stream(b"{}"):
                pass
        except LLMError as exc:
            error = exc
        finally:
            await client.aclose()
    assert "maximum context length exceeded" in error.message
