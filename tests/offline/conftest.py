"""Fixtures for the offline endpoint tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def sse_dir() -> Path:
    env = os.environ.get("AGENT_SERVER_SHARED")
    shared = Path(env) if env else Path(__file__).resolve().parents[3] / "shared"
    path = shared / "fixtures" / "sse"
    assert path.is_dir(), f"{path} not found; set AGENT_SERVER_SHARED to the shared folder"
    return path
