#!/usr/bin/env bash
# Try the VS Code extension: builds it, starts code-server (VS Code in the browser) on 127.0.0.1 with
# the extension installed, on a fresh copy of the demo project, and prints the URL to open.
# Without a configured model (no AGENT_SERVER_BASE_URL / API key in the environment) the model's side
# is the bundled OFFLINE endpoint replaying the demo's script — not a model — and it says so.
#   bash scripts/try-vscode.sh          serve until Ctrl-C
#   bash scripts/try-vscode.sh --check  start it, check in headless Chromium that the extension
#                                       activates and, offline, that its panel runs the whole demo
#                                       task (allow, accept the fix, final answer, fix on disk) and
#                                       that the screen showed the question, the diff and the answer
#                                       (the sandbox is off: each shell command asks);
#                                       with a real model only that it answers; stop, exit 0/1
#   bash scripts/try-vscode.sh --clean  remove the earlier runs' folders (not one still in use), exit
#   bash scripts/try-vscode.sh --help   this text, exit
# Each run keeps its folder to look at later; a new run removes those older than the last
# $TRY_VSCODE_KEEP (3), never one still in use (scripts/prune_try_runs.py).
set -euo pipefail
cd "$(dirname "$0")/.."
check=false
clean=false
case "${1:-}" in
  "") ;;
  --check) check=true ;;
  --clean) clean=true ;;
  -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' scripts/try-vscode.sh; exit 0 ;;
  *) echo "try-vscode.sh: unknown option $1 (--check, --clean, --help)" >&2; exit 2 ;;
esac
# Each run's folder (the workspace copy, the server's state, code-server's data) is made fresh outside
# the clone: a workspace inside it made VS Code's Git pop up "A git repository was found in the parent
# folders" (the clone's). Under $XDG_CACHE_HOME (kept to look at later), or the temp folder when that
# place is itself inside a Git work tree (a home folder kept in Git).
runs=${XDG_CACHE_HOME:-$HOME/.cache}/agent-server/try-vscode
mkdir -p "$runs" 2>/dev/null || true
if [ ! -w "$runs" ] || git -C "$runs" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  runs=${TMPDIR:-/tmp}
fi
if $clean; then
  exec python3 scripts/prune_try_runs.py "$runs" --keep 0
fi
bash scripts/setup.sh
bash scripts/setup-vscode.sh
TOOLS=${AGENT_SERVER_TOOLS:-$HOME/.cache/agent-server-vscode}
# shellcheck disable=SC1091
. "$TOOLS/env.sh"
VSIX="$PWD/clients/vscode/dist/agent-server-vscode.vsix"   # this checkout's, whoever ran the set-up last
run=$(mktemp -d "$runs/vscode-XXXXXX")
run=$(cd "$run" && pwd -P)
.venv/bin/python scripts/prune_try_runs.py "$runs" --keep "${TRY_VSCODE_KEEP:-3}" --except "$run" || true
workspace="$run/workspace"
echo "This run's folder (workspace copy, state, logs): $run"
# Every process this run starts inherits TRY_VSCODE_RUN=$run: code-server's group, but also what it
# starts in a session of its own (setsid) — the extension's agent-server and its tools, the login
# shell VS Code probes for its environment, terminals' shells, Chromium (--check) — and whatever was
# reparented to init. On exit, SIGHUP, SIGINT or SIGTERM the sweep stops every process carrying it.
export TRY_VSCODE_RUN="$run"
cleanup() {  # scripts/stop_marked.py: SIGTERM, then SIGKILL, until none is left
  set +e   # a step that fails (a process already gone) must not end the cleanup before the sweep
  trap '' HUP INT TERM
  .venv/bin/python scripts/stop_marked.py TRY_VSCODE_RUN "$run" "$run/code-server.pgid"
  true
}
trap cleanup EXIT
# Closing the terminal (SIGHUP) or Ctrl-C reaches the driver too, which stops code-server itself; a
# signal to this script alone (kill PID) must stop everything as well: the driver runs in the
# background and the script waits for it, so that a trap runs at once (bash runs a trap only after a
# foreground command returns, and the driver would not have returned) and the sweep stops it too.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
.venv/bin/python - "$workspace" "$run/demo-script.json" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "scripts")
from agent_server.offline.demo_task import write_project
from try_neovim import write_demo_script  # by step: an ask after a cancel starts the task anew
write_project(Path(sys.argv[1]))
write_demo_script(Path(sys.argv[2]))
PY
base_url=${AGENT_SERVER_BASE_URL:-}
env_json='{}'
offline=false
# a model is configured by the environment, a config file or `agent-server login` (as try-neovim decides)
model_configured() {
  .venv/bin/python -c 'import sys; sys.path.insert(0, "scripts")
from try_neovim import has_model_configured
sys.exit(0 if has_model_configured() else 1)'
}
if [ -z "$base_url" ] && ! model_configured; then
  exec 3< <(.venv/bin/python -m agent_server.offline --script "$run/demo-script.json" 2>"$run/offline.log")
  offline=true
  read -r base_url <&3
  env_json='{"AGENT_SERVER_API_KEY": "offline", "AGENT_SERVER_MODEL": "offline-demo"}'
  echo "========================================================================================"
  echo " OFFLINE: no model is configured, so the model's side is the bundled offline endpoint"
  echo " ($base_url) replaying the demo's script. It is NOT a model: whatever you ask, it plays"
  echo " the demo task (read calc.py, run the tests, propose a fix as a diff, …). The tool calls"
  echo " really run in the workspace copy $workspace."
  echo " Set AGENT_SERVER_BASE_URL / an API key (or use 'Agent: Set API Key') for a real model."
  echo "========================================================================================"
fi
mkdir -p clients/vscode/test-artifacts
.venv/bin/python - "$run/config.json" <<PY
import json, os, sys
config = {
    "node": "$NODE24", "codeServerEntry": "$CODE_SERVER_ENTRY", "chromium": "$CHROMIUM", "vsix": "$VSIX",
    "workspace": "$workspace", "tmp": "$run", "artifacts": os.path.abspath("clients/vscode/test-artifacts"),
    "check": $( $check && echo True || echo False ),
    "prompt": "The tests in this project fail. Find the bug, fix it, and run the tests.",
    "answerContains": "read the code",
    **({"finalContains": "Fixed:", "fixedFile": "calc.py", "fixedContains": "return a + b"} if $( $offline && echo True || echo False ) else {}),
    "settings": {"agentServer.path": os.path.abspath(".venv/bin/agent-server"), "agentServer.baseUrl": "$base_url"},
    # --check must see a permission question on every machine: with the sandbox off each of the demo's
    # shell commands is asked about (a machine with a working sandbox runs them confined, unasked)
    "env": {**json.loads('$env_json'), "AGENT_SERVER_STATE_DIR": "$run/state",
            **({"AGENT_SERVER_SANDBOX": "off"} if $( $check && echo True || echo False ) else {})},
}
open(sys.argv[1], "w").write(json.dumps(config))
PY
"$NODE24" clients/vscode/test/e2e/serve.mjs "$run/config.json" &
wait $!
