"""Fixtures for the offline endpoint tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.paths import SSE_DIR


@pytest.fixture(scope="session")
def sse_dir() -> Path:
    """``tests/fixtures/sse``: the recorded provider streams."""
    assert SSE_DIR.is_dir(), f"{SSE_DIR} not found"
    return SSE_DIR
