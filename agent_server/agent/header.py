"""The system text and tool schemas a session keeps using while nothing they depend on changed.

Role: ``pinned_header(events, roots, tool_names)`` returns the latest logged ``request/header``'s
``system`` and ``tools`` when that header still holds: no event it was rendered from — the mode
(``mode/changed``), the project instructions (``project/instructions``), the sandbox status
(``sandbox/status``) — was logged after it, the session's roots are those of its log header, and
it offers the same tools. The host then reuses them instead of rendering again, so a session
resumed in a new process (or on another day), and a fork, send the very bytes the first process
did, and a provider's prompt cache keeps working.

Must never: read anything but the events and its arguments (no clock, no environment).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from agent_server.session import SessionEvent

RENDER_INPUTS = frozenset({"mode/changed", "project/instructions", "sandbox/status"})
"""Event types whose data the system text is rendered from."""


def pinned_header(events: Sequence[SessionEvent], roots: Sequence[str], tool_names: Sequence[str], *,
                  latest: Callable[[str], SessionEvent | None] | None = None) -> dict[str, Any] | None:
    """``{"system", "tools"}`` of the latest ``request/header`` if it still holds, else ``None``
    (render again). ``roots``: the session's roots now; ``tool_names``: the tools offered now;
    ``latest``: the newest event of a type (``EventLog.latest``), to find them without a walk."""
    header = events[0].data if events and events[0].type == "session/header" else {}
    logged_roots = [header.get("cwd"), *(header.get("additional_directories") or [])]
    if list(roots) != logged_roots:
        return None
    if latest is not None:
        found = latest("request/header")
        if found is None or any((e := latest(kind)) is not None and e.seq > found.seq for kind in RENDER_INPUTS):
            return None
        events = [found]
    for event in reversed(events):
        if event.type in RENDER_INPUTS:
            return None
        if event.type == "request/header":
            tools = event.data.get("tools") or []
            names = [t.get("function", {}).get("name") for t in tools]
            if names != list(tool_names):
                return None
            return {"system": event.data["system"], "tools": tools}
    return None
