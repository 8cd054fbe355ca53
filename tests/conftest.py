"""Shared pytest set-up: ``tests/`` on ``sys.path`` so ``support`` imports, and its ACP fixtures;
``AGENT_SERVER_SPARE=off`` for every agent the suite starts (no warm spare)."""

import os
import sys
from pathlib import Path

# Every agent the suite starts runs cold and starts no warm spare (agent_server/spare/): the tests
# give each agent a fresh HOME and state folder, and a spare would outlive them. tests/spare turns
# it on for its own agents, each with a private AGENT_SERVER_SPARE_DIR.
os.environ["AGENT_SERVER_SPARE"] = "off"

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from support.fixtures import *  # noqa: E402,F401,F403

