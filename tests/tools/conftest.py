"""Fixtures for the builtin-tool tests: private copies of the shared real files and a
disk-backed tool context rooted in a temporary folder."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:  # so tests can `import tooltest_helpers`
    sys.path.insert(0, _HERE)

import pytest  # noqa: E402
from tooltest_helpers import FIXTURE_NAMES, FIXTURES  # noqa: E402

from agent_server.tools import ToolContext  # noqa: E402


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace folder holding writable copies of the four real fixture files."""
    root = tmp_path / "ws"
    root.mkdir()
    for name in FIXTURE_NAMES:
        shutil.copyfile(FIXTURES / name, root / name)
    return root


@pytest.fixture
def ctx(ws: Path, tmp_path: Path) -> ToolContext:
    """A disk-backed context whose only root is ``ws``."""
    return ToolContext.on_disk(ws, session_dir=tmp_path / "session")
