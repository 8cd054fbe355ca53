"""Minimal HTTP/1.1 pieces for the offline endpoint: reading one request, writing a head.

Role: the byte-level request parser and response head writer, plus :class:`RecordedRequest`.
Must never: interpret a request beyond method, target, headers and body bytes.
"""

from __future__ import annotations

import asyncio
import base64
import http
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BadRequest", "RecordedRequest", "http_head", "merge_headers", "read_request"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as received: ``headers`` has lower-case names; ``body`` is the raw bytes."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    time: float = field(default_factory=time.time)
    connection: int = field(default=0, compare=False)  # which connection carried it (1, 2 …; 0: not known)

    def json(self) -> Any:
        """The body decoded as JSON. Raises ValueError if it is not JSON."""
        return json.loads(self.body.decode("utf-8"))

    def to_record(self, seq: int, answered_with: str) -> dict[str, Any]:
        """The JSONL record: body as text (plus ``body_b64`` when it is not UTF-8);
        the Authorization value is redacted — API keys are never written to disk."""
        headers = {k: ("<redacted>" if k in ("authorization", "api-key", "x-api-key") else v)
                   for k, v in self.headers.items()}
        record: dict[str, Any] = {"seq": seq, "time": self.time, "method": self.method,
                                  "path": self.path, "headers": headers,
                                  "answered_with": answered_with}
        try:
            record["body"] = self.body.decode("utf-8")
        except UnicodeDecodeError:
            record["body"] = self.body.decode("utf-8", errors="replace")
            record["body_b64"] = base64.b64encode(self.body).decode("ascii")
        return record


class BadRequest(Exception):
    """The request head cannot be parsed (answered with a 400)."""


def http_head(status: int, headers: Mapping[str, str]) -> bytes:
    """The status line and header block of a response, ending with the blank line."""
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = "Status"
    lines = [f"HTTP/1.1 {status} {phrase}"] + [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def merge_headers(defaults: Mapping[str, str], given: Mapping[str, str]) -> dict[str, str]:
    """``defaults`` overridden by ``given``, header names compared case-insensitively."""
    lowered = {k.lower() for k in given}
    out = {k: v for k, v in defaults.items() if k.lower() not in lowered}
    out.update(given)
    return out


async def read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    """Read one HTTP/1.1 request (Content-Length or chunked body); None if the client closed
    before sending one. Raises BadRequest for a malformed head, IncompleteReadError on a cut."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise BadRequest(f"bad request line {lines[0]!r}")
    method, target, _version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise BadRequest(f"bad header line {line!r}")
        key = name.strip().lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    try:
        return RecordedRequest(method, target.split("?")[0], headers,
                               await _read_body(reader, headers))
    except ValueError as exc:  # a bad chunk size or Content-Length
        raise BadRequest(f"bad request body framing: {exc}") from None


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = bytearray()
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0].strip(), 16)
            if size == 0:
                while (await reader.readuntil(b"\r\n")) != b"\r\n":
                    pass
                break
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        return bytes(body)
    return await reader.readexactly(int(headers.get("content-length", "0") or 0))
