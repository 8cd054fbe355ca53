#!/usr/bin/env bash
# Try the Neovim plugin: a real Neovim with clients/neovim loaded on a fresh copy of the demo project,
# against your configured model or — without one — the bundled OFFLINE endpoint playing the demo task
# (said so on screen). --check runs it headless to the end of the demo task and prints the result;
# --clean removes the earlier runs' folders. Each run's folder (the workspace copy, the server's state)
# is made fresh under $XDG_CACHE_HOME/agent-server/try-neovim/ (~/.cache), outside the clone; a run
# removes the earlier runs' folders but the last $TRY_NEOVIM_KEEP (3), never one still in use, and
# stops every process it started when it ends (scripts/try_neovim.py). It also removes what runs
# before e9cf9e6 left in the clone's .demo-state (nvim-workspace-* copies, their sessions), nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/try_neovim.py "$@"
