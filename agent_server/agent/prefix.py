"""How much of each model request a provider's prefix cache can serve, and every break named.

Role: ``prefix_report(events)`` compares each step's request (rebuilt from the log by
``replay.iter_requests``, its first try) with the step request before it, as a provider's cache
reads it — tools, then messages. A request *extends* the previous one when the tools are equal and
the previous messages are its first; ``shared`` counts the bytes it repeats. Any other request is
a *break*, named by what the log says happened in between (DESIGN.md §1b): ``compaction``,
``model`` (another request shape), ``tools``, ``system`` (other roots), ``system_prompt`` (a
client's system prompt changed with ``override`` involved), ``config_option`` (a model option
changed the body's parameters: some providers' caches key on them), ``params`` (the configuration's
parameters edited since the last request: ``params/changed``), ``refusal`` — or ``unplanned``.
A compaction's summarising request is reported with its own share of the step request before it.

Must never: read anything but the events, or call a break planned that the log does not explain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Sequence

from agent_server.agent.header import RENDER_INPUTS
from agent_server.agent.replay import iter_requests
from agent_server.session import SessionEvent

PLANNED = ("compaction", "model", "tools", "system", "system_prompt", "config_option", "params", "refusal")
"""The names of the planned breaks."""


_NOT_PARAMS = frozenset({"model", "messages", "tools", "stream", "stream_options"})


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@dataclass
class PrefixReport:
    """``requests``: one dict per step request after the first — ``seq`` (its ``step/start``),
    ``bytes`` (its tools and messages), ``shared``, ``extends``, ``break`` (``None`` or a name);
    ``compactions``: one dict per summarising request — ``seq``, ``bytes``, ``shared``."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)

    @property
    def breaks(self) -> dict[str, int]:
        """How many breaks of each name."""
        counts: dict[str, int] = {}
        for request in self.requests:
            if request["break"] is not None:
                counts[request["break"]] = counts.get(request["break"], 0) + 1
        return counts

    @property
    def unplanned(self) -> int:
        """Breaks the log does not explain."""
        return self.breaks.get("unplanned", 0)

    @property
    def share(self) -> float:
        """The share of the requests' bytes (tools and messages) that repeat the previous request's start."""
        total = sum(r["bytes"] for r in self.requests)
        return sum(r["shared"] for r in self.requests) / total if total else 1.0


def _parts(body: bytes) -> tuple[list[str], str]:
    """The request as a provider's cache reads it — its tools, then each message, encoded — and
    its parameters (``temperature``, ``reasoning_effort`` …), encoded."""
    data = json.loads(body)
    params = _dumps({k: v for k, v in data.items() if k not in _NOT_PARAMS})
    return [_dumps(data.get("tools"))] + [_dumps(m) for m in data.get("messages") or []], params


def _shared(before: list[str], after: list[str]) -> tuple[int, bool]:
    """Bytes of ``after``'s parts equal to ``before``'s from the start, and whether all of ``before`` is."""
    shared = 0
    for a, b in zip(before, after):
        if a != b:
            return shared, False
        shared += len(a.encode("utf-8"))
    return shared, len(after) >= len(before)


def _header_shape(data: dict[str, Any]) -> tuple[Any, ...]:
    return (data.get("params"), data.get("reasoning_content"))


def prefix_report(events: Sequence[SessionEvent]) -> PrefixReport:
    """The report of ``events`` (see the module docstring)."""
    report = PrefixReport()
    by_seq = {e.seq: e for e in events}
    previous: tuple[int, list[str], str] | None = None  # (step/start seq, parts, parameters)
    seen: set[tuple[str, int]] = set()
    for request in iter_requests(events):
        if (request.kind, request.seq) in seen:
            continue  # a retry: the same bytes again
        seen.add((request.kind, request.seq))
        parts, params = _parts(request.body)
        size = sum(len(p.encode("utf-8")) for p in parts)
        if request.kind == "compaction":
            shared = _shared(previous[1], parts)[0] if previous is not None else 0
            report.compactions.append({"seq": request.seq, "bytes": size, "shared": shared})
            continue
        if previous is not None:
            shared, extends = _shared(previous[1], parts)
            extends = extends and params == previous[2]
            name = None if extends else _name(events, by_seq, previous[0], request.seq)
            report.requests.append({"seq": request.seq, "bytes": size, "shared": shared, "extends": extends,
                                    "break": name})
        previous = (request.seq, parts, params)
    return report


def _name(events: Sequence[SessionEvent], by_seq: dict[int, SessionEvent], before: int, after: int) -> str:
    """What the log says happened between the ``step/start`` events ``before`` and ``after``."""
    between = [by_seq[s] for s in range(before + 1, after) if s in by_seq]
    if any(e.type == "compaction/end" and isinstance(e.data.get("message"), str) for e in between):
        return "compaction"
    if any(e.type == "turn/end" and e.data.get("exit") == "refusal" for e in between):
        return "refusal"
    headers = [e for e in between if e.type == "request/header"]
    if not headers:
        return "unplanned"
    old = next((e for e in reversed(events) if e.type == "request/header" and e.seq < before), None)
    new = headers[-1].data
    if old is None:
        return "unplanned"
    if old.data.get("tools") != new.get("tools"):
        return "tools"
    if old.data.get("params") != new.get("params") and any(e.type == "config_option/changed" for e in between):
        return "config_option"
    if old.data.get("params") != new.get("params") and any(e.type == "params/changed" for e in between):
        return "params"  # the configuration's parameters were edited since (between runs)
    if old.data.get("model") != new.get("model") and _header_shape(old.data) != _header_shape(new):
        return "model"
    if old.data.get("system") != new.get("system") and any(e.type == "client/system_prompt" for e in between):
        return "system_prompt"
    if old.data.get("system") != new.get("system") and not any(e.type in RENDER_INPUTS for e in between):
        return "system"  # not a mode, AGENTS.md or sandbox change rewritten into it: that is what notes are for
    return "unplanned"
