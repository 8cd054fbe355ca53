"""Checkpoints: what the agent changed in the workspace, kept so a turn can be taken back.

Role: a content-addressed ``BlobStore`` shared by every session of a state folder (file bytes
before and after each agent change), a ``ShadowRepo`` that snapshots a git workspace around each
shell call without touching the user's ``.git``, and the pure planning of ``/undo`` and ``/redo``
from the log's ``checkpoint/*`` events (``plan.py``).

Must never: write into the workspace (restoring goes through the session's guarded file seam), or
keep a secret file's bytes (secret patterns are left out of every snapshot).
"""

from agent_server.checkpoints.blobs import BlobStore, FileState
from agent_server.checkpoints.plan import FileChange, Restore, TurnChanges, changed_turns, plan_redo, plan_undo
from agent_server.checkpoints.shadow import ShadowRepo, ShadowError

__all__ = ["BlobStore", "FileChange", "FileState", "Restore", "ShadowError", "ShadowRepo", "TurnChanges",
           "changed_turns", "plan_redo", "plan_undo"]
