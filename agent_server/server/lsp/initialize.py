"""``agent-server lsp``'s ``initialize``, answered before pygls and lsprotocol load.

Role: the editor waits for the ``initialize`` answer before it sends anything else (Neovim shows
"no code actions available" until then), and pygls with lsprotocol takes most of the start-up to
import. ``read_message`` reads the first framed message from stdin; ``answer_initialize`` answers
it at once **when it is the plain case** — an ``initialize`` request whose capabilities hold the
types LSP gives the fields the answer depends on — with exactly what pygls would answer for
``server.LspFrontend``'s features (``initialize_result``; ``tests/lsp/test_lsp_fast_initialize.py``
compares the two). pygls then reads that message too, as the first of its input, and sets up its
workspace from it (the position encoding answered here); its own answer is dropped
(``server._Protocol``). Anything else is left, bytes unchanged, to pygls.

Must never: import anything but the standard library's lightest modules, or answer a message it
has not fully checked.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from agent_server import __version__

ASK, NEW_SESSION, CANCEL = "agentServer.ask", "agentServer.newSession", "agentServer.cancel"
ANSWER, SLASH_COMMANDS = "agentServer.answer", "agentServer.commands"
COMMANDS = [ASK, NEW_SESSION, CANCEL, ANSWER, SLASH_COMMANDS]
CODE_ACTION_KINDS = ["quickfix", ""]
"""``CodeActionKind.QuickFix`` (fix this diagnostic) and ``CodeActionKind.Empty`` (explain, add tests)."""
ENCODINGS = ("utf-8", "utf-16", "utf-32")
"""The position encodings pygls' workspace supports."""

MAX_HEADER = 1 << 16
MAX_BODY = 1 << 20
"""Longest header block / body the fast path reads for itself (an ``initialize`` is a few kB);
a longer message is left whole to pygls."""
_CONTENT_LENGTH = re.compile(rb"Content-Length: (\d+)")
"""The header line pygls reads the length from (``pygls.io_.run_async``), without its ``\\r\\n``."""


def read_message(fd: int) -> tuple[bytes | None, bytes]:
    """Read the first message from ``fd``: ``(body, data)``, ``data`` being every byte read (the
    message and whatever followed it), for pygls to read as if it came straight from ``fd``.

    ``body`` is ``None`` when the message is not framed as pygls reads it (one
    ``Content-Length: N`` line among the headers), is longer than ``MAX_HEADER``/``MAX_BODY``, or
    input ended first."""
    pieces = [b""]
    while b"\r\n\r\n" not in pieces[0]:
        if len(pieces[0]) > MAX_HEADER:
            return None, pieces[0]
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None, pieces[0]
        pieces[0] += chunk
    head, _, after = pieces[0].partition(b"\r\n\r\n")
    lengths = [m.group(1) for line in head.split(b"\r\n") if (m := _CONTENT_LENGTH.fullmatch(line))]
    if len(lengths) != 1 or not 0 < int(lengths[0]) <= MAX_BODY:
        return None, pieces[0]
    length, size = int(lengths[0]), len(after)
    while size < length:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None, b"".join(pieces)
        pieces.append(chunk)
        size += len(chunk)
    data = b"".join(pieces)
    start = len(head) + 4
    return data[start:start + length], data


def answer_initialize(body: bytes, out_fd: int) -> tuple[int | str, dict[str, Any], dict[str, Any]] | None:
    """Answer ``body`` on ``out_fd`` if it is a plain-case ``initialize`` request (module
    docstring); returns ``(its id, the result sent, its params)``, else ``None`` with nothing written."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(message, dict) and message.get("jsonrpc") == "2.0" and message.get("method") == "initialize"
            and type(message.get("id")) in (int, str)):
        return None
    params = message.get("params")
    if not (isinstance(params, dict) and _plain(params)):
        return None
    result = initialize_result(params)
    data = json.dumps({"id": message["id"], "jsonrpc": "2.0", "result": result}).encode("ascii")  # as pygls does
    out = memoryview(b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n%s"
                     % (len(data), data))
    while out:  # os.write may take part of it
        out = out[os.write(out_fd, out):]
    return message["id"], result, params


def initialize_result(params: dict[str, Any]) -> dict[str, Any]:
    """The ``InitializeResult`` pygls builds (``ServerCapabilitiesBuilder``) for the front end's
    features — incremental sync, code actions (resolved lazily), the ``agentServer.*`` commands,
    workspace folders — given the client's capabilities in ``params``."""
    caps = params["capabilities"]
    sync = (caps.get("textDocument") or {}).get("synchronization") or {}
    text_document_sync: dict[str, Any] = {"openClose": True, "change": 2}
    for field in ("willSave", "willSaveWaitUntil"):  # pygls: `client's flag and handler registered`
        if sync.get(field) is not None:
            text_document_sync[field] = False
    text_document_sync["save"] = False
    return {
        "capabilities": {
            "positionEncoding": negotiate_encoding(caps),
            "textDocumentSync": text_document_sync,
            "codeActionProvider": {"codeActionKinds": list(CODE_ACTION_KINDS), "resolveProvider": True},
            "executeCommandProvider": {"commands": list(COMMANDS)},
            "workspace": {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}},
        },
        "serverInfo": {"name": "agent-server", "version": __version__},
    }


def negotiate_encoding(capabilities: dict[str, Any]) -> str:
    """The client's first offered position encoding that pygls supports, else ``utf-16`` (LSP's default)."""
    offered = (capabilities.get("general") or {}).get("positionEncodings") or []
    return next((name for name in offered if name in ENCODINGS), "utf-16")


def _plain(params: dict[str, Any]) -> bool:
    """Whether the fields ``initialize_result`` reads have the types LSP gives them."""
    caps = params.get("capabilities")
    if not isinstance(caps, dict):
        return False
    general, text_document = caps.get("general"), caps.get("textDocument")
    if not (general is None or isinstance(general, dict)) or not (text_document is None or isinstance(text_document, dict)):
        return False
    offered = (general or {}).get("positionEncodings")
    if not (offered is None or (isinstance(offered, list) and all(isinstance(x, str) for x in offered))):
        return False
    sync = (text_document or {}).get("synchronization")
    if not (sync is None or isinstance(sync, dict)):
        return False
    return all(type((sync or {}).get(field)) in (bool, type(None)) for field in ("willSave", "willSaveWaitUntil"))
