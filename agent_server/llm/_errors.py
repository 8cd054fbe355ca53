"""Error normalisation for the LLM client layer.

Role: turn everything that can go wrong while talking to an OpenAI-compatible endpoint (HTTP
status + body, an ``{"error": ...}`` frame inside a 200 stream, a transport failure) into one
exception type, :class:`LLMError`, whose ``code`` belongs to a closed set and whose
``retryable`` flag follows from that code alone.

Must never: decide what to do about an error (retry, give up, tell the user). It only names it;
the caller owns the policy.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

__all__ = ["ERROR_CODES", "RETRYABLE_CODES", "LLMError", "error_from_payload",
           "error_from_response", "parse_retry_after"]

#: The closed set of error codes.
ERROR_CODES = frozenset({
    "RATE_LIMIT", "AUTH", "CONTEXT_WINDOW_EXCEEDED", "SERVER", "NETWORK",
    "STREAM_CLOSED", "STREAM_IDLE", "EMPTY_RESPONSE", "BAD_REQUEST",
})
#: Codes for which trying the same request again can succeed.
RETRYABLE_CODES = frozenset({
    "RATE_LIMIT", "SERVER", "NETWORK", "STREAM_CLOSED", "STREAM_IDLE", "EMPTY_RESPONSE",
})

# Texts providers use to say "the prompt does not fit" (OpenAI, vLLM, llama.cpp, Ollama,
# Anthropic-compatible routers, ...). Matched case-insensitively against message/code/type.
# Patterns, compiled (and cached by ``re``) on the first error: compiling these case-insensitive
# alternations costs milliseconds, which start-up should not pay for an error it may never see.
_CONTEXT_RE = (
    r"context[_ ]length[_ ]exceeded|maximum context|context (length|window|size)"
    r"|exceeds? (the )?(available )?context|prompt is too long|too many (input )?tokens"
    r"|tokens? exceeds?|input (is )?too long|reduce the length of the (messages|prompt)"
)
_RATE_RE = r"rate[_ ]?limit|too[_ ]many[_ ]requests|overloaded_rate"
_AUTH_RE = r"invalid[_ ]api[_ ]key|authentication|unauthori[sz]ed|permission[_ ]denied|incorrect api key"
_QUOTA_RE = r"insufficient[_ ]quota|exceeded your current quota"


def _says(pattern: str, text: str) -> bool:
    """Whether ``text`` matches ``pattern``, case-insensitively."""
    return re.search(pattern, text, re.IGNORECASE) is not None


_MAX_TEXT = 2000  # characters of a non-JSON error body kept in the message


class LLMError(Exception):
    """A normalised failure of one model request.

    Attributes:
        code: one of :data:`ERROR_CODES`.
        message: human text; includes the provider's own error message when there is one.
        retryable: True for RATE_LIMIT, SERVER, NETWORK, STREAM_CLOSED, STREAM_IDLE,
            EMPTY_RESPONSE; False for AUTH, BAD_REQUEST, CONTEXT_WINDOW_EXCEEDED.
        status: the HTTP status, or None (transport errors, frames inside a 200 stream
            that carried no numeric code).
        retry_after: seconds to wait as asked by the server (``Retry-After`` /
            ``retry-after-ms``), or None.

    Raises:
        ValueError: at construction if ``code`` is not in the closed set.
    """

    def __init__(self, code: str, message: str, *, status: int | None = None,
                 retry_after: float | None = None) -> None:
        if code not in ERROR_CODES:
            raise ValueError(f"unknown LLMError code {code!r}")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.retry_after = retry_after

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed if sent again (derived from ``code``)."""
        return self.code in RETRYABLE_CODES

    def to_dict(self) -> dict[str, Any]:
        """``{"code": str, "message": str, "retryable": bool}`` for logs and the protocol."""
        return {"code": self.code, "message": self.message, "retryable": self.retryable}

    def __repr__(self) -> str:
        return (f"LLMError(code={self.code!r}, message={self.message!r}, status={self.status!r}, "
                f"retry_after={self.retry_after!r})")


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait, from ``retry-after-ms`` or ``Retry-After`` (delta-seconds or HTTP-date).

    ``headers`` must be case-insensitive (``httpx.Headers``) or use lower-case keys. Returns
    None when absent or unparsable; never negative. ``now`` (unix seconds) is for tests.
    """
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _describe(payload: Any) -> tuple[str, str]:
    """``(message, hints)`` from an error payload: the provider's message, and message+code+type
    joined for pattern matching. Understands ``{"error": {...}}``, ``{"error": "..."}``,
    ``{"message": ...}``, ``{"detail": ...}`` (FastAPI/vLLM) and plain text."""
    if isinstance(payload, (bytes, bytearray)):
        payload = payload.decode("utf-8", errors="replace")
    if isinstance(payload, str):
        text = payload.strip()[:_MAX_TEXT]
        return text, text
    if not isinstance(payload, Mapping):
        text = json.dumps(payload, ensure_ascii=False)[:_MAX_TEXT]
        return text, text
    err: Any = payload.get("error", payload)
    if isinstance(err, str):
        return err, err
    if not isinstance(err, Mapping):
        text = json.dumps(payload, ensure_ascii=False)[:_MAX_TEXT]
        return text, text
    message = err.get("message") or err.get("detail") or err.get("msg") or payload.get("message")
    if isinstance(message, list):  # FastAPI validation errors
        message = json.dumps(message, ensure_ascii=False)
    if not isinstance(message, str) or not message:
        message = json.dumps(dict(err), ensure_ascii=False)[:_MAX_TEXT]
    hints = " ".join(str(err.get(k) or "") for k in ("code", "type", "status"))
    return message, f"{message} {hints}"


def _code_for(status: int | None, hints: str, *, default: str) -> str:
    if _says(_QUOTA_RE, hints):
        return "AUTH"  # billing/quota: waiting does not help, so not a retryable rate limit
    if status in (401, 403) or (status is None and _says(_AUTH_RE, hints)):
        return "AUTH"
    if status == 429 or (status is None and _says(_RATE_RE, hints)):
        return "RATE_LIMIT"  # before the context check: TPM limit texts talk about tokens
    if status == 413 or ((status is None or 400 <= status < 500) and _says(_CONTEXT_RE, hints)):
        return "CONTEXT_WINDOW_EXCEEDED"
    if status == 408:
        return "NETWORK"
    if status is not None and status >= 500:
        return "SERVER"
    if status is not None and 400 <= status < 500:
        return "BAD_REQUEST"
    return default


def error_from_payload(payload: Any, *, status: int | None = None,
                       headers: Mapping[str, str] | None = None,
                       default: str = "SERVER") -> LLMError:
    """Map a decoded error payload (and optional HTTP status/headers) to an :class:`LLMError`.

    Used for non-2xx responses and for ``{"error": ...}`` frames inside a 200 stream. A numeric
    ``error.code`` in 400..599 (OpenRouter style) is used as the status when ``status`` is None.
    ``default`` is the code when nothing more specific matches.
    """
    if status is None and isinstance(payload, Mapping):
        err = payload.get("error")
        code = err.get("code") if isinstance(err, Mapping) else None
        if isinstance(code, str) and code.isdigit():
            code = int(code)
        if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599:
            status = code
    message, hints = _describe(payload)
    code = _code_for(status, hints, default=default)
    prefix = f"HTTP {status}: " if status is not None else "provider error: "
    retry_after = parse_retry_after(headers) if headers is not None else None
    return LLMError(code, prefix + message, status=status, retry_after=retry_after)


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> LLMError:
    """Map a non-2xx HTTP response (status, case-insensitive headers, raw body) to an LLMError.

    401/403 AUTH; 429 RATE_LIMIT (with ``retry_after``); 413, or a 4xx whose text says the
    context/maximum context length/tokens were exceeded, CONTEXT_WINDOW_EXCEEDED; other 4xx
    BAD_REQUEST (408 NETWORK); 5xx SERVER.
    """
    payload: Any
    try:
        payload = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        payload = body.decode("utf-8", errors="replace") or "(empty body)"
    return error_from_payload(payload, status=status, headers=headers, default="SERVER")
