"""The agent: turns, steps, attempts (DESIGN.md §5).

Role: run a turn as a sequence of steps over the session log, end it by exactly one exit, and
rebuild every request body from the log.

Must never: call a tool except through the tools layer, or keep a second message list.
"""

from agent_server.agent.exits import TurnExit, TurnFailed
from agent_server.agent.request import RequestRebuildError, attempt_steps, request_body, step_starts
from agent_server.agent.session import AgentSession, TurnOutcome
from agent_server.agent.step import RequestHeader, RetryPolicy

__all__ = [
    "AgentSession",
    "RequestHeader",
    "RequestRebuildError",
    "RetryPolicy",
    "TurnExit",
    "TurnFailed",
    "TurnOutcome",
    "attempt_steps",
    "request_body",
    "step_starts",
]
