"""Shared pytest set-up: ``tests/`` on ``sys.path`` so ``support`` imports, and its ACP fixtures."""

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from support.fixtures import *  # noqa: E402,F401,F403
