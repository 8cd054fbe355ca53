"""Prompt images: stored content-addressed in the session folder, referenced from the log.

Role: ``check_image(mime, data, max_bytes)`` decodes and checks one ACP image block (a supported
type whose bytes say they are that type, strict base64, at most ``max_bytes``) or raises
``ImageError`` saying what is wrong; ``ImageStore(folder).put(raw)`` writes the bytes once as
``images/<sha256>`` (temporary file, ``fsync``, rename, the folder ``fsync``\\ed) before the log
names them. The projection puts a reference in the user message (``image_ref``: an OpenAI
``image_url`` part whose URL is ``agent-server-image:<mime>;sha256=<hex>``), so request bodies
built from the log stay small and pure; ``ImageStore.resolve(body)`` turns each reference into the
``data:`` URL of the stored bytes (checked against their hash) on the way out — the agent before it
sends, replay before it compares — so what the model saw is what the log and the folder hold.

Must never: import any other layer, write an image anywhere but its session's ``images`` folder,
or send bytes whose hash is not the one the log names.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
from pathlib import Path
from typing import Any

MIME_TYPES = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WebP"}
"""The image types a prompt may carry (what OpenAI-compatible vision endpoints take)."""

SCHEME = "agent-server-image:"
_REF = re.compile(rb'"image_url":\{"url":"agent-server-image:(image/(?:png|jpeg|gif|webp));sha256=([0-9a-f]{64})"\}')
"""A reference as the encoded body shows it: only the projection's structure (a JSON string cannot
hold these unescaped quotes), never text that merely reads like one."""


class ImageError(ValueError):
    """An image a prompt cannot carry (the message says why and what is allowed)."""


def _kind_of(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if raw.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if raw.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(raw) >= 12 and raw.startswith(b"RIFF") and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def check_image(mime: Any, data: Any, max_bytes: int) -> bytes:
    """The bytes of an ACP image block (``mimeType``, base64 ``data``), checked; ``ImageError``
    for another type, data that is not strict base64, bytes of another type than ``mime`` says,
    or more than ``max_bytes`` (refused, not resized: no image library is a dependency)."""
    if mime not in MIME_TYPES:
        raise ImageError(f"unsupported image type {mime!r}: send PNG, JPEG, GIF or WebP "
                         f"({', '.join(MIME_TYPES)})")
    if not isinstance(data, str) or not data:
        raise ImageError("the image has no data (base64 expected)")
    if len(data) > (max_bytes + 2) // 3 * 4 + 4:  # more than max_bytes once decoded: refused before decoding
        raise ImageError(_too_big(len(data) * 3 // 4, max_bytes))
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the image data is not valid base64") from None
    if len(raw) > max_bytes:
        raise ImageError(_too_big(len(raw), max_bytes))
    kind = _kind_of(raw)
    if kind != mime:
        found = f"{MIME_TYPES[kind]} data" if kind else "not a PNG, JPEG, GIF or WebP image"
        raise ImageError(f"the image says it is {mime} but its bytes are {found}")
    return raw


def _too_big(size: int, limit: int) -> str:
    return (f"the image is {size:,} bytes, more than the limit of {limit:,} bytes ([agent] max_image_bytes): "
            "it was not sent; send a smaller or more compressed image")


def image_ref(mime: str, sha256: str) -> dict[str, Any]:
    """The projected ``image_url`` part of a stored image (resolved by ``ImageStore.resolve``)."""
    return {"type": "image_url", "image_url": {"url": f"{SCHEME}{mime};sha256={sha256}"}}


def has_refs(body: bytes) -> bool:
    """Whether an encoded body holds an image reference (cheap: a substring search)."""
    return b'"url":"agent-server-image:' in body


class ImageMissing(Exception):
    """A referenced image is not in the session folder, or its bytes are not the ones the log names."""


class ImageStore:
    """The ``images`` folder of one session (``folder``: the session folder)."""

    def __init__(self, folder: Path) -> None:
        self.path = Path(folder) / "images"

    def put(self, raw: bytes) -> str:
        """Store ``raw`` (once: the name is its sha256) durably; its sha256 hex."""
        digest = hashlib.sha256(raw).hexdigest()
        target = self.path / digest
        if target.is_file() and target.stat().st_size == len(raw):
            return digest
        self.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        temporary = self.path / f".{digest}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(raw)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
        folder = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
        return digest

    def read(self, sha256: str) -> bytes:
        """The stored bytes of ``sha256``; ``ImageMissing`` when absent or changed."""
        try:
            raw = (self.path / sha256).read_bytes()
        except OSError as exc:
            raise ImageMissing(f"image {sha256} of this session is missing from {self.path}: {exc}") from None
        if hashlib.sha256(raw).hexdigest() != sha256:
            raise ImageMissing(f"image {sha256} in {self.path} was changed: its bytes no longer have that hash")
        return raw

    def base64(self, sha256: str) -> str:
        """``read(sha256)`` as base64 text."""
        return base64.b64encode(self.read(sha256)).decode("ascii")

    def resolve(self, body: bytes) -> bytes:
        """``body`` with each image reference replaced by the ``data:`` URL of its stored bytes.
        Raises ``ImageMissing``."""
        if not has_refs(body):
            return body
        cache: dict[bytes, bytes] = {}

        def data_url(match: re.Match[bytes]) -> bytes:
            mime, digest = match.group(1), match.group(2)
            if digest not in cache:
                cache[digest] = base64.b64encode(self.read(digest.decode("ascii")))
            return b'"image_url":{"url":"data:' + mime + b";base64," + cache[digest] + b'"}'
        return _REF.sub(data_url, body)
