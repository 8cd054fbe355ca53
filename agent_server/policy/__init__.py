"""Policy: the checks at the pre-execute point of every tool call (DESIGN.md §7).

Role: decide, before a call runs, whether it may — from the session's mode (``modes``), the path
policy (``paths``: roots, symlinks, secrets), the shell analysis (``shell``: compound commands,
prefixes, destructive commands), the OS sandbox (``sandbox`` + ``sandbox_exec``: Linux Landlock)
and the user's answers (``approvals``). ``engine.SessionPolicy`` puts them together as one guard.

Must never: be bypassed — the tool pipeline runs the guard for every call — or rewrite a call's
arguments (a guard only allows or denies); and never count anything but an explicit allow as
consent (invariant 11).
"""

from agent_server.policy.decision import CallView, Denial, Guard
from agent_server.policy.paths import inside_roots

__all__ = ["CallView", "Denial", "Guard", "inside_roots"]
