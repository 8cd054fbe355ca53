"""Where the test suite's vendored data lives: ``tests/fixtures/`` inside this repository.

Role: the one place that names fixture folders, so no test reaches outside the clone
(``tests/fixtures/README.md`` says where each file came from and under which licence).
"""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SSE_DIR = FIXTURES / "sse"          # recorded provider streams + expected.json
FILES_DIR = FIXTURES / "files"      # real files with hard text (CRLF, BOM, minified, AGENTS.md)
ACP_SCHEMA = FIXTURES / "acp" / "schema.json"                    # ACP schema-v1.21.0, stable
ACP_SCHEMA_UNSTABLE = FIXTURES / "acp" / "schema.unstable.json"  # same release, unstable methods
