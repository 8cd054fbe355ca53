"""Where the test suite's vendored data lives: ``tests/fixtures/`` inside this repository.

Role: the one place that names fixture folders, so no test reaches outside the clone
(``tests/fixtures/README.md`` says where each file came from and under which licence).
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SSE_DIR = FIXTURES / "sse"          # recorded provider streams + expected.json
FILES_DIR = FIXTURES / "files"      # real files with hard text (CRLF, BOM, minified, AGENTS.md)
ACP_SCHEMA = FIXTURES / "acp" / "schema-v1.29.x.json"             # ACP 1.29.x (TypeScript SDK 2.4.0), stable
ACP_SCHEMA_UNSTABLE = FIXTURES / "acp" / "schema-v1.29.x.unstable.json"  # same release, unstable methods
