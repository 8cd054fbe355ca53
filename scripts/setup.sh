#!/usr/bin/env bash
# Installs what the demo and the tests need, idempotently: a Python venv in .venv with the package
# (editable) and its test extras, and (with --with-node) the Node packages of the TypeScript test
# harness. A stamp of pyproject.toml's hash skips the pip step when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.agent-server-installed
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! .venv/bin/python -c 'import agent_server, acp, httpx_sse' 2>/dev/null; then
  echo "setup: installing agent-server and its test dependencies into .venv (a few minutes the first time; pip writes to .venv/pip-install.log) …" >&2
  .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
  if ! .venv/bin/python -m pip install --quiet -e '.[test]' > .venv/pip-install.log 2>&1; then
    cat .venv/pip-install.log >&2
    echo "setup: pip install failed (log above, also in .venv/pip-install.log)" >&2
    exit 1
  fi
  .venv/bin/python -c 'import agent_server, acp, httpx_sse'
  echo "$want" > "$stamp"
fi
if [ "${1:-}" = "--with-node" ]; then
  if ! command -v npm >/dev/null; then echo "setup: npm (Node >= 20) is required for the TypeScript SDK tests" >&2; exit 1; fi
  lock=clients/ts-harness/package-lock.json
  nstamp=clients/ts-harness/node_modules/.agent-server-installed
  nwant=$(sha256sum "$lock" | cut -d' ' -f1)
  if [ "$(cat "$nstamp" 2>/dev/null)" != "$nwant" ]; then
    npm ci --prefix clients/ts-harness --no-audit --no-fund --loglevel=error >&2
    echo "$nwant" > "$nstamp"
  fi
fi
