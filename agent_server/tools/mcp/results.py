"""A ``CallToolResult`` as the text the model sees.

Role: ``render_result``. Text blocks are kept in order; ``structuredContent`` is added as JSON when no text block carries it;
images and audio are described (type and size, never the base64); resources are named, with their
text when they embed text; ``isError`` makes the whole an error result. The tool pipeline trims and
spills the text like every other result.

Must never: put base64 media in front of the model, or lose a text block or ``isError``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Mapping


def _size(data: Any) -> str:
    try:
        return f"{len(base64.b64decode(str(data), validate=False)):,} bytes"
    except (binascii.Error, ValueError):
        return "unknown size"


def _block(block: Mapping[str, Any]) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType', '?')}, {_size(block.get('data', ''))} — not shown to the model]"
    if kind == "resource":
        resource = block.get("resource") or {}
        head = f"[resource: {resource.get('uri', '?')}" + (f" ({resource['mimeType']})" if resource.get("mimeType") else "") + "]"
        if isinstance(resource.get("text"), str):
            return f"{head}\n{resource['text']}"
        return f"{head} binary, {_size(resource.get('blob', ''))}"
    if kind == "resource_link":
        return f"[resource link: {block.get('uri', '?')}" + (f" — {block['name']}" if block.get("name") else "") + "]"
    return f"[{kind or 'unknown'} content]"


def _same_json(text: str, value: Any) -> bool:
    """Whether a text block already says ``value`` (MCP servers wrap a primitive return value as
    ``{"result": value}`` in ``structuredContent`` next to its text)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return False
    return parsed == value or (isinstance(value, dict) and list(value) == ["result"] and parsed == value["result"])


def render_result(result: Mapping[str, Any]) -> tuple[str, bool]:
    """``(text, is_error)`` for a ``CallToolResult`` given as a JSON-like mapping."""
    parts = [_block(b) for b in result.get("content") or [] if isinstance(b, Mapping)]
    structured = result.get("structuredContent")
    if structured is not None and not any(_same_json(p, structured) for p in parts):
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    text = "\n".join(p for p in parts if p) or "(the tool returned no content)"
    return text, bool(result.get("isError"))
