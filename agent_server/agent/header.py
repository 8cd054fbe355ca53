"""A stable head: the system text and tools a session keeps, and the notes that update them.

Role: ``kept_header(events, roots, latest=…)`` returns the latest logged ``request/header`` whose
system text the next request keeps (DESIGN.md §1b, "a stable head"), or ``None`` when it is
rendered anew, a planned break: the first request, after a compaction, other workspace roots, or
a client system prompt (``client/system_prompt``) changed with ``override`` involved.
``header_note(header, context, model, records, latest=…)`` says what changed since the model was
last told (mode, sandbox, ``AGENTS.md``, model, the client's ``append`` prompt): logged as
``header/note`` right before the request's ``request/header``, projected as a user message. What
a header's system text and notes told is its ``context`` (``context_data``; none in old logs).

Must never: read anything but the events and its arguments (no clock, no environment), or ask for
a system text to be rewritten while a kept one holds.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

from agent_server.prompt import render_note
from agent_server.session import SessionEvent

RENDER_INPUTS = frozenset({"mode/changed", "project/instructions", "sandbox/status"})
"""Event types whose data a system text is rendered from (and a note tells of)."""

Latest = Callable[[str], "SessionEvent | None"]


def context_data(mode: str | None, sandboxed: bool | None, records: Sequence[dict[str, Any]],
                 client: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a system text (with its notes) tells the model of the session: ``request/header``'s
    ``context``. Instructions by path and sha256 (their text is in the system text or the note);
    ``client`` (only when the session has one): the client's system prompt by mode and sha256
    (``client_told``), from its ``client/system_prompt`` data."""
    data: dict[str, Any] = {"mode": mode, "sandboxed": sandboxed,
                            "instructions": [[r.get("path"), r.get("sha256")] for r in records]}
    if client is not None:
        data["client"] = client_told(client)
    return data


def client_told(prompt: dict[str, Any]) -> list[Any]:
    """``[mode, sha256 of the text]`` of a ``client/system_prompt``'s data: what a context records of it."""
    return [prompt.get("mode"), hashlib.sha256(str(prompt.get("text")).encode("utf-8")).hexdigest()]


def _walking(events: Sequence[SessionEvent]) -> Latest:
    def latest(kind: str) -> SessionEvent | None:
        return next((e for e in reversed(events) if e.type == kind), None)
    return latest


def kept_header(events: Sequence[SessionEvent], roots: Sequence[str], *, latest: Latest | None = None
                ) -> SessionEvent | None:
    """The ``request/header`` event whose system text the next request keeps, or ``None`` (render
    again). ``roots``: the session's roots now; ``latest``: the newest event of a type
    (``EventLog.latest``: no walk of a long log), else the events are walked."""
    latest = latest or _walking(events)
    header = events[0].data if events and events[0].type == "session/header" else {}
    if list(roots) != [header.get("cwd"), *(header.get("additional_directories") or [])]:
        return None
    found = latest("request/header")
    if found is None:
        return None
    compacted = latest("compaction/end")
    if compacted is not None and compacted.seq > found.seq:
        if isinstance(compacted.data.get("message"), str):
            return None  # a checkpoint since
        # an aborted compaction's end replaces nothing: look further back, newest first
        for index in range(len(events) - 1, -1, -1):
            event = events[index]
            if event.seq <= found.seq:
                break
            if event.type == "compaction/end" and isinstance(event.data.get("message"), str):
                return None
    client = latest("client/system_prompt")
    if client is not None and client.seq > found.seq:
        told = (found.data.get("context") or {}).get("client")
        if told != client_told(client.data) and "override" in (client.data.get("mode"), (told or [None])[0]):
            return None  # the client's text replaces (or replaced) the agent's own: rendered anew
    return found


def header_note(header: SessionEvent, context: dict[str, Any], model: str, records: Sequence[dict[str, Any]], *,
                latest: Latest) -> dict[str, Any] | None:
    """The ``header/note`` data (``{"changes", "text"}``) that tells the model what changed since
    ``header`` (a kept ``request/header``) and its notes told it, for ``context`` and ``model`` now
    (``records``: the ``project/instructions`` records now); ``None`` when nothing did."""
    told = header.data.get("context")
    if told is None:  # logged before headers said what they told: as now, unless an input came since
        stale = any((e := latest(kind)) is not None and e.seq > header.seq for kind in RENDER_INPUTS)
        told = {} if stale else context  # unknown: everything is told again
    changes = [key for key in ("mode", "sandboxed", "instructions")
               if told.get(key, ...) != context[key] and (key == "instructions" or context[key] is not None)]
    client = latest("client/system_prompt")
    told_client = (header.data.get("context") or {}).get("client")  # none before clients could send one
    if context.get("client") is not None and told_client != context["client"] and client is not None:
        changes.append("client")  # an append-mode change (one involving override is rendered anew)
    before = header.data.get("model")
    if before != model:
        changes.append("model")
    if not changes:
        return None
    text = render_note(
        mode=context["mode"] if "mode" in changes else None,
        sandboxed=context["sandboxed"] if "sandboxed" in changes else None,
        model=(str(before), model) if "model" in changes else None,
        instructions=tuple(records) if "instructions" in changes else None,
        client=str(client.data.get("text")) if "client" in changes and client is not None else None)
    return {"changes": changes, "text": text}
