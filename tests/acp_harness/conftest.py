"""Fixtures for the harness self-tests: the shared ACP fixtures, pointed at the stand-in echo agent."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS_DIR = str(Path(__file__).resolve().parents[1])
if _TESTS_DIR not in sys.path:  # make `support` importable however pytest was invoked
    sys.path.insert(0, _TESTS_DIR)

import pytest  # noqa: E402
from support.fixtures import *  # noqa: E402,F401,F403

ECHO_AGENT = Path(__file__).with_name("echo_agent.py")


@pytest.fixture
def echo_agent_command() -> list[str]:
    """argv of the stand-in ACP agent (official Python SDK, echoes prompts)."""
    return [sys.executable, str(ECHO_AGENT)]


@pytest.fixture
def agent_command(echo_agent_command: list[str]) -> list[str]:
    """Harness self-tests run against the echo agent, not the real server."""
    return echo_agent_command
