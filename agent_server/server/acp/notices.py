"""The server's notices as each client takes them: ACP ``notice`` and ``compaction_update`` (ACP
1.25), or the chat text.

Role: ``shown_as(update, notices=…, compaction=…)`` is the update to send for one the host made.
The host makes every notice of the server (an MCP problem, the sandbox's state, a retry, dropped
tool calls, a hook that ran, a stopped turn …) as an ``agent_message_chunk`` with its
``[agent-server] …`` text, marked ``_meta.agentServer.notice`` (``{severity}``) — a retry by
``_meta.agentServer.retry`` (a warning), the compaction note by ``_meta.agentServer.compaction``
(info) — and a compaction's progress as ``compaction_update``. To a client that sets
``clientCapabilities.session.notices`` a marked chunk goes as a ``notice`` (the text without its
marker and blank lines as the ``title``, the ``_meta.agentServer`` kept); to one that sets
``session.compaction`` the ``compaction_update``s go and the compaction's chat note does not. Any
other client gets the chat text, and no ``compaction_update``.

Must never: turn text the model streamed into a notice (only the host's marked chunks), or send
a ``notice`` or ``compaction_update`` to a client that did not advertise it.
"""

from __future__ import annotations

from typing import Any

PREFIX = "[agent-server] "


def _marks(update: dict[str, Any]) -> dict[str, Any] | None:
    meta = update.get("_meta")
    ours = meta.get("agentServer") if isinstance(meta, dict) else None
    return ours if isinstance(ours, dict) else None


def shown_as(update: dict[str, Any], *, notices: bool, compaction: bool) -> dict[str, Any] | None:
    """The update a client with those capabilities gets for ``update`` (``None``: nothing)."""
    kind = update.get("sessionUpdate")
    if kind == "compaction_update":
        return update if compaction else None
    if kind != "agent_message_chunk":
        return update
    ours = _marks(update)
    if ours is None:
        return update
    if "compaction" in ours and compaction:
        return None  # its compaction_update says it
    if not notices:
        return update
    marked = ours.get("notice")
    if isinstance(marked, dict):
        severity = marked.get("severity") or "info"
    elif "retry" in ours:
        severity = "warning"
    elif "compaction" in ours:
        severity = "info"
    else:
        return update
    content = update.get("content")
    text = content.get("text") if isinstance(content, dict) else None
    if not isinstance(text, str):
        return update
    title = text.strip()
    title = title[len(PREFIX):].strip() if title.startswith(PREFIX) else title
    if not title:
        return None
    rest = {k: v for k, v in ours.items() if k != "notice"}
    shown: dict[str, Any] = {"sessionUpdate": "notice", "severity": severity, "title": title}
    if rest:
        shown["_meta"] = {"agentServer": rest}
    return shown
