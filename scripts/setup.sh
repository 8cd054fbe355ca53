#!/usr/bin/env bash
# Installs what the demo and the tests need, idempotently: a Python venv in .venv with the package
# (editable) and its test/demo extras, and the Node packages of the TypeScript test harness.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install --quiet -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import agent_server, acp, httpx_sse' 
if [ "${1:-}" = "--with-node" ] && [ -f clients/ts-harness/package-lock.json ]; then
  if ! command -v npm >/dev/null; then echo "setup: npm is required for the TypeScript harness" >&2; exit 1; fi
  npm ci --prefix clients/ts-harness --no-audit --no-fund --loglevel=error
fi
