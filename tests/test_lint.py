"""``ruff check`` with the rule set stated in pyproject.toml (E4, E7, E9, F) finds nothing in the
package, the tests, the bench and the scripts (issue 27 item 7). ruff comes with the test extras."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_finds_nothing():
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
                          cwd=ROOT, capture_output=True, text=True)
    assert "No module named ruff" not in done.stderr, "ruff is missing: pip install -e '.[test]' (scripts/setup.sh)"
    assert done.returncode == 0, done.stdout + done.stderr
