#!/usr/bin/env bash
# Try the Neovim plugin: a real Neovim with clients/neovim loaded on a fresh copy of the demo project,
# against your configured model or — without one — the bundled OFFLINE endpoint playing the demo task
# (said so on screen). --check runs it headless to the end of the demo task and prints the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/try_neovim.py "$@"
