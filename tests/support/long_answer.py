"""A long model answer of one-line markdown paragraphs (the newcomers' fake model's ``LONG``).

Role: ``markdown_lines(size)``, the text a session replay of a multi-megabyte answer is made of,
shared by the VS Code end-to-end test (tests/vscode) and the panel bench (bench/vscode_panel.py).
Must never: import pytest or anything of a test run (the bench imports it).
"""

from __future__ import annotations


def markdown_lines(size: int) -> str:
    """At least ``size`` characters of one-line markdown paragraphs, a heading every 50."""
    out, i, n = [], 0, 0
    while n < size:
        p = (f"\n## Section {i // 50}\n\n" if i % 50 == 0 else "") + f"Line {i}: some *markdown* text with `code` and more words.\n\n"
        out.append(p)
        n += len(p)
        i += 1
    return "".join(out)
