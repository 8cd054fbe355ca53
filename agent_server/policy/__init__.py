"""Policy: the checks at the pre-execute point of every tool call (DESIGN.md §7).

Role: decide, before a call runs, whether it may. Today: writes must stay inside the workspace
roots (symlinks resolved). Modes, approvals and the shell sandbox come with the policy issue.

Must never: be bypassed — the tool pipeline runs these guards for every call — or rewrite a
call's arguments (a guard only allows or denies).
"""

from agent_server.policy.decision import CallView, Denial, Guard
from agent_server.policy.workspace import inside_roots, workspace_write_guard

__all__ = ["CallView", "Denial", "Guard", "inside_roots", "workspace_write_guard"]
