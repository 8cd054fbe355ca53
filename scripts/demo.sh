#!/usr/bin/env bash
# The main job: an ACP client (official Python SDK) drives agent-server on one prompt.
# Without a configured model it uses the bundled offline endpoint (clearly announced).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/demo_client.py "$@"
