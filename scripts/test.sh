#!/usr/bin/env bash
# Installs everything the test suite needs, then runs it. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --with-node
bash scripts/setup-vscode.sh   # apt packages, Node 24, code-server, the extension (prints its time)
bash scripts/setup-emacs.sh    # Emacs 30 from bookworm-backports for the eglot test (prints its time)
exec .venv/bin/python -m pytest "$@"
