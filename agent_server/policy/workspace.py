"""The workspace boundary for writes.

Role: ``workspace_write_guard(roots)`` is a pipeline guard that refuses an edit-kind call
(``write``, ``edit``) whose target, with every symlink resolved, is outside the roots; it logs
each decision as ``policy/decision``.

Must never: allow a write because the path *looks* inside (``..``, symlinked parents and
``/proc/self/root`` tricks are resolved first).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

from agent_server.policy.decision import CallView, Denial, Guard
from agent_server.session import EventLog


def _resolve(path: Path) -> Path:
    """Resolve symlinks of every existing component; the missing tail is joined lexically."""
    return Path(os.path.realpath(path))


def inside_roots(path: Path, roots: Sequence[Path]) -> bool:
    """Whether ``path`` (absolute), symlinks resolved, is a root or lies under one."""
    target = _resolve(path)
    for root in roots:
        real_root = _resolve(root)
        if target == real_root or real_root in target.parents:
            return True
    return False


def workspace_write_guard(log: EventLog, roots: Sequence[Path]) -> Guard:
    """A guard refusing edit-kind calls outside ``roots`` (absolute); decisions are logged."""

    async def guard(call: CallView) -> Denial | None:
        if call.tool is None or call.args is None or call.tool.kind != "edit":
            return None
        raw = getattr(call.args, "path", None)
        if not isinstance(raw, str):
            return None
        target = Path(os.path.normpath(os.path.join(roots[0], os.path.expanduser(raw))))
        allowed = inside_roots(target, roots)
        log.append("policy/decision", {
            "call_id": call.call_id, "tool": call.name,
            "arguments_sha256": hashlib.sha256(call.raw_arguments.encode()).hexdigest(),
            "rule": "workspace-boundary", "path": str(_resolve(target)),
            "outcome": "allow" if allowed else "deny", "decided_by": "policy",
        })
        if allowed:
            return None
        return Denial(
            f"Refused: {raw} resolves to {_resolve(target)}, which is outside the workspace "
            f"({', '.join(str(r) for r in roots)}). Writes are only allowed inside the workspace roots."
        )

    return guard
