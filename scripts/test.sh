#!/usr/bin/env bash
# Installs everything the test suite needs, then runs it. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-node
exec .venv/bin/python -m pytest "$@"
