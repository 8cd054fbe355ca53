"""Policy: the checks at the pre-execute point of every tool call (DESIGN.md §7).

Role: decide, before a call runs, whether it may — from the session's mode (``modes``), the path
policy (``paths``: roots, symlinks, secrets), the shell analysis (``shell``: compound commands,
prefixes, destructive commands), the OS sandbox (``sandbox`` + ``sandbox_exec``: Linux Landlock)
and the user's answers (``approvals``). ``engine.SessionPolicy`` puts them together as one guard.

Must never: be bypassed — the tool pipeline runs the guard for every call — or rewrite a call's
arguments (a guard only allows or denies); and never count anything but an explicit allow as
consent (invariant 11).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "CallView": "decision",
    "Denial": "decision",
    "Guard": "decision",
    "inside_roots": "paths",
}
"""Each name this package offers → the module that defines it, imported on first use (PEP 562)."""

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
