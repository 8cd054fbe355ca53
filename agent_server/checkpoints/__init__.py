"""Checkpoints: what the agent changed in the workspace, kept so a turn can be taken back.

Role: a content-addressed ``BlobStore`` shared by every session of a state folder (file bytes
before and after each agent change), a ``ShadowRepo`` that snapshots a git workspace around each
shell call without touching the user's ``.git``, and the pure planning of ``/undo`` and ``/redo``
from the log's ``checkpoint/*`` events (``plan.py``).

Must never: write into the workspace (restoring goes through the session's guarded file seam), or
keep a secret file's bytes (secret patterns are left out of every snapshot).

The names below are loaded when first used (PEP 562): a session opens with ``blobs`` and
``recorder`` only; the shadow repository loads with the first shell call in a git workspace, the
planning with the first ``/undo``, ``/redo`` or ``/checkpoints``
(``tests/server/test_lazy_imports.py``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BlobStore": "blobs", "FileState": "blobs",
    "FileChange": "plan", "Restore": "plan", "TurnChanges": "plan", "changed_turns": "plan",
    "History": "plan", "Run": "plan", "history": "plan", "plan_redo": "plan", "plan_undo": "plan",
    "ShadowError": "shadow", "ShadowRepo": "shadow",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
