"""The session log: the only state of a conversation (DESIGN.md §3).

Role: ``SessionEvent``, the append-only JSONL ``EventLog`` with contiguous ``seq``, crash-tail
repair, and ``derive_messages()``, the projection of the log into model messages. The names below
are loaded when first used (PEP 562), so ``session.logline`` (the line format, standard library
only) can be imported by the CLI's fast path without pydantic.

Must never: import any other layer of agent_server. Everything else depends on this package; it
depends on nothing of ours.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DURABLE_TYPES": "events", "FORMAT_VERSION": "logline", "EventLog": "events", "LogBusyError": "events",
    "LogCorruptError": "events", "LogVersionError": "events", "LogWriteError": "events",
    "SessionEvent": "events", "read_events": "events", "read_head": "events",
    "ForkError": "fork", "ForkPoint": "fork", "fork_history": "fork",
    "ProjectionMemo": "projection", "derive_messages": "projection", "surface_messages": "projection",
    "SessionStore": "store", "default_state_dir": "store",
    "IndexEntry": "index", "SessionIndex": "index", "session_title": "index",
    "ImageError": "images", "ImageMissing": "images", "ImageStore": "images", "check_image": "images",
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
