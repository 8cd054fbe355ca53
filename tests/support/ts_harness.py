"""The official TypeScript ACP SDK client (``clients/ts-harness/run.mjs``) for end-to-end tests.

Role: where the harness lives, the ``node`` that runs it, and its install (``npm ci``) when missing.
Must never: skip when ``node`` is missing — CI has it, and a skipped SDK test hides a wire break.
"""

import shutil
import subprocess
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parents[2] / "clients" / "ts-harness"
NODE = shutil.which("node")


def harness_script() -> Path:
    """``run.mjs``, its ``node_modules`` installed first when missing (scripts/setup.sh does it)."""
    if NODE is None:
        pytest.fail("node is required for the TypeScript SDK test (scripts/setup.sh expects Node >= 20)")
    if not (HARNESS / "node_modules" / "@agentclientprotocol" / "sdk").is_dir():
        done = subprocess.run(["npm", "ci", "--prefix", str(HARNESS), "--no-audit", "--no-fund"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    return HARNESS / "run.mjs"
