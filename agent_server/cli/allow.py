"""The ``--allow`` grants of a headless run (``agent-server run``). Standard library only.

Role: which ACP tool kinds each ``--allow`` name grants (``ALLOW_KINDS``), and what a question no
terminal could answer says about them (``no_terminal``).

Must never: grant a kind its flag does not name.
"""

from __future__ import annotations

ALLOW_KINDS = {"shell": {"execute"}, "edit": {"edit", "delete", "move"}, "read": {"read", "search"}}
"""``--allow`` name → the ACP tool kinds it grants."""

KIND_TO_ALLOW = {kind: name for name, kinds in ALLOW_KINDS.items() for kind in kinds}


def no_terminal(kind: str) -> str:
    """Why a question of ``kind`` could not be asked in a run without a terminal, and what would
    allow it (the ``--allow`` flag of that kind, or that none applies)."""
    flag = KIND_TO_ALLOW.get(kind)
    if flag is None:
        return (f"a headless run with no terminal to ask; no --allow kind covers a call of kind {kind!r}: "
                "run it on a terminal to answer")
    return f"a headless run with no terminal to ask; rerun with `--allow {flag}` to allow it"
