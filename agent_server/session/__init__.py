"""The session log: the only state of a conversation (DESIGN.md §3).

Role: ``SessionEvent``, the append-only JSONL ``EventLog`` with contiguous ``seq``, crash-tail
repair, and ``derive_messages()``, the projection of the log into model messages.

Must never: import any other layer of agent_server. Everything else depends on this package; it
depends on nothing of ours.
"""

from agent_server.session.events import (
    DURABLE_TYPES,
    FORMAT_VERSION,
    EventLog,
    LogBusyError,
    LogCorruptError,
    LogVersionError,
    LogWriteError,
    SessionEvent,
    read_events,
    read_head,
)
from agent_server.session.fork import ForkError, ForkPoint, fork_history
from agent_server.session.projection import ProjectionMemo, derive_messages, surface_messages

__all__ = [
    "DURABLE_TYPES",
    "FORMAT_VERSION",
    "EventLog",
    "ForkError",
    "ForkPoint",
    "fork_history",
    "LogBusyError",
    "LogCorruptError",
    "LogVersionError",
    "LogWriteError",
    "SessionEvent",
    "ProjectionMemo",
    "derive_messages",
    "surface_messages",
    "read_events",
    "read_head",
]

from agent_server.session.store import SessionStore, default_state_dir  # noqa: E402

__all__ += ["SessionStore", "default_state_dir"]
