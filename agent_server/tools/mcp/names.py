"""Model-facing names of MCP tools: ``mcp__<server>__<tool>``, valid for every provider.

Role: ``expose_names`` maps every MCP tool to a name providers accept (``^[a-zA-Z0-9_-]{1,64}$``).
Other characters become ``_``; a name over 64 characters keeps its head and gets a short hash of
the full name; a collision gets ``_2``, ``_3`` … in the order servers and tools are given; names
given earlier in the session are kept (``assigned``).

Must never: depend on anything but the servers and tools given, in their order, and the names
given before (the map is logged and replayed), give two tools one name, or move a name to another tool.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

MAX_NAME = 64
_BAD = re.compile(r"[^a-zA-Z0-9_-]")


def _sanitise(raw: str) -> str:
    name = _BAD.sub("_", raw)
    if len(name) > MAX_NAME:
        digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
        name = name[:MAX_NAME - 9] + "_" + digest
    return name


def expose_names(tools: Mapping[str, Sequence[str]],
                 assigned: Mapping[str, tuple[str, str]] | None = None) -> dict[str, tuple[str, str]]:
    """``{server: [tool, …]}`` → ``{exposed name: (server, tool)}``, in the given order.

    ``assigned``: names given earlier in the session (``{exposed: (server, tool)}``): a tool keeps
    its name, and no other tool ever takes one of them — a server that starts late, or a tool list
    that changes, never moves a name the model already uses to another tool. A tool listed twice by
    its server is exposed once. Every exposed name matches ``^[a-zA-Z0-9_-]{1,64}$`` and is unique.
    """
    used = set(assigned or {})
    name_of = {key: name for name, key in (assigned or {}).items()}
    exposed: dict[str, tuple[str, str]] = {}
    for server, names in tools.items():
        for tool in names:
            key = (server, tool)
            if key in name_of:
                if name_of[key] not in exposed:
                    exposed[name_of[key]] = key
                continue
            base = _sanitise(f"mcp__{server}__{tool}")
            name, n = base, 1
            while name in used:
                n += 1
                suffix = f"_{n}"
                name = base[:MAX_NAME - len(suffix)] + suffix
            used.add(name)
            name_of[key] = name
            exposed[name] = key
    return exposed
