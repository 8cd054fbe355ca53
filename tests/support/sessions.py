"""Helpers for tests of cancel, resume and crash safety: scripted calls, config files, logs, and
the provider-style history check.

Role: small shared pieces for ``tests/e2e/test_cancel.py``, ``test_resume.py`` and
``test_crash_matrix.py``; nothing here talks to the agent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_server.offline._validate import history_problem
from agent_server.session import SessionEvent, read_events


def call(call_id: str, name: str, **args: Any) -> tuple[str, str, str]:
    """A ``(id, name, arguments_json)`` triple for ``tool_call_stream``."""
    return (call_id, name, json.dumps(args))


def config_env(tmp_path: Path, text: str, name: str = "config.toml") -> dict[str, str]:
    """Write a config file and return the env pointing the agent at it."""
    path = tmp_path / name
    path.write_text(text)
    return {"AGENT_SERVER_CONFIG": str(path)}


FULL_ACCESS = '[policy]\ndefault_mode = "danger-full-access"\n'
"""Config text: shell commands run without asking (tests of cancel/crash, not of approvals)."""


def log_path(state_dir: Path, session_id: str) -> Path:
    """``<state>/sessions/<id>/events.jsonl``."""
    return Path(state_dir) / "sessions" / session_id / "events.jsonl"


def events(state_dir: Path, session_id: str) -> list[SessionEvent]:
    """The session's events, read without changing the log."""
    return read_events(log_path(state_dir, session_id))


def assert_valid_history(body: bytes | dict[str, Any]) -> None:
    """The request body is one a provider accepts: no call without its result, no stray tool
    message, no empty assistant message."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    problem = history_problem(raw)
    assert problem is None, problem


def notices(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of the ``[agent-server notice]`` user messages among ``messages``."""
    return [m["content"] for m in messages if m["role"] == "user" and str(m["content"]).startswith("[agent-server notice]")]


def one_result_per_call(evts: list[SessionEvent]) -> None:
    """Every call of every assistant message got exactly one ``tool/result``."""
    wanted = [c["id"] for e in evts if e.type == "assistant" for c in e.data.get("tool_calls") or []]
    got = [e.data["call_id"] for e in evts if e.type == "tool/result"]
    assert sorted(wanted) == sorted(got), (wanted, got)
