"""Project instructions: the ``AGENTS.md`` files that tell an agent how a project works.

Role: find the ``AGENTS.md`` files that apply — one at each workspace root, and one in every folder
between a root and a file in focus (nearest last, so the most specific instructions come last) —
and read them, bounded, as ``{"path", "sha256", "text"}`` records. The agent logs those records as
a ``project/instructions`` event when they are first seen or change, and the system prompt is
rendered from that event, never from the disk directly.

Must never: read outside the workspace roots, or follow the folders above a root.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

FILE_NAME = "AGENTS.md"
MAX_CHARS = 32_000
"""Characters of one AGENTS.md put into the prompt; more is cut with a note."""


def instruction_paths(roots: Sequence[Path], focus: Iterable[Path] = ()) -> list[Path]:
    """The ``AGENTS.md`` files that exist for ``roots`` and the ``focus`` files, in prompt order:
    each root's own file first, then for each focus file the folders from its root down to the
    file's folder (nearest last). No path appears twice."""
    found: list[Path] = []

    def add(folder: Path) -> None:
        candidate = folder / FILE_NAME
        if candidate not in found and candidate.is_file():
            found.append(candidate)

    real_roots = [Path(os.path.realpath(r)) for r in roots]
    for root in real_roots:
        add(root)
    for file in focus:
        target = Path(os.path.realpath(file))
        for root in real_roots:
            if root not in target.parents:
                continue
            folder = target.parent
            chain = []
            while folder != root and root in folder.parents:
                chain.append(folder)
                folder = folder.parent
            for step in reversed(chain):
                add(step)
            break
    return found


def read_instructions(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """``[{"path", "sha256", "text"}]`` for each readable file (invalid UTF-8 replaced; a file
    over ``MAX_CHARS`` is cut with a note). Unreadable files are skipped."""
    records = []
    for path in paths:
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        text = raw.decode("utf-8", "replace").lstrip("\ufeff")
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS] + f"\n[… {len(text) - MAX_CHARS:,} more characters not shown; read the file for the rest]"
        records.append({"path": str(path), "sha256": hashlib.sha256(raw).hexdigest(), "text": text})
    return records


def render_instructions(records: Sequence[dict[str, Any]]) -> str:
    """The system-prompt section for ``records`` ("" when there are none)."""
    if not records:
        return ""
    parts = ["# Project instructions",
             "The project's AGENTS.md files follow (more specific ones last; they win on conflicts)."]
    for record in records:
        parts.append(f"\n## {record['path']}\n\n{record['text'].rstrip()}")
    return "\n".join(parts) + "\n"
