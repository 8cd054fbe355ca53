"""ACP prompt content blocks → the text of the model's user message.

Role: ``prompt_text(blocks)`` renders a ``session/prompt``'s ``ContentBlock`` list as one string:
text as is, resource links as links, embedded resources (files, editor selections) as delimited
context with their path and, for a selection URI ``file:///abs/a.py#L10-L20``, the line range
(PROTOCOL.md "Selections in prompts").

Must never: drop a block silently — what cannot be shown to the model is replaced by a note (a
stored image, ``{"type": "image", "sha256"}``, goes to the message as an image part instead).
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote, urlsplit

_LINES = re.compile(r"^L(\d+)(?:-L?(\d+))?$")


def prompt_text(blocks: list[dict[str, Any]]) -> str:
    """Render ``blocks`` (ACP ``ContentBlock`` dicts, in order) as the user message text."""
    parts: list[str] = []
    for block in blocks:
        kind = block.get("type")
        if kind == "text":
            parts.append(block.get("text", ""))
        elif kind == "resource_link":
            parts.append(f"[{block.get('name') or block.get('uri')}]({block.get('uri')})")
        elif kind == "resource":
            parts.append(_embedded(block.get("resource") or {}))
        elif kind == "image" and "sha256" in block:
            continue  # a stored image: the user message carries it as an image part (session.images)
        else:
            parts.append(f"[{kind} content omitted: this agent accepts text and embedded text only]")
    return "\n\n".join(parts)


def _embedded(resource: dict[str, Any]) -> str:
    uri = str(resource.get("uri", ""))
    where = _describe_uri(uri)
    if "text" not in resource:
        mime = resource.get("mimeType") or "binary"
        return f"[{mime} resource {where} omitted: only text is shown]"
    text = resource["text"]
    return f'<context source="{where}">\n{text}\n</context>'


def _describe_uri(uri: str) -> str:
    """``file:///a/b.py#L3-L9`` → ``/a/b.py lines 3-9``; other URIs unchanged."""
    parts = urlsplit(uri)
    if parts.scheme != "file":
        return uri
    path = unquote(parts.path)
    match = _LINES.match(parts.fragment or "")
    if not match:
        return path
    first, last = match.group(1), match.group(2) or match.group(1)
    return f"{path} lines {first}-{last}" if first != last else f"{path} line {first}"
