"""Glob patterns for ``glob`` and ``grep``'s ``glob`` filter, matched against relative paths.

Role: compile a pattern into a matcher with the semantics the tool descriptions promise
(gitignore-style, as in ripgrep): ``*`` and ``?`` stay within one path segment, ``**`` spans
folders, ``[abc]`` / ``[!abc]`` are classes, ``{a,b}`` are alternatives; a pattern without ``/``
matches the file name at any depth, one with ``/`` is anchored at the searched folder (a leading
``/`` anchors too); a pattern that matches a folder matches every file below it.

Must never: decide about ``.gitignore`` — ignore rules are applied before, by ripgrep or the walk.
(ripgrep's own ``--glob`` is not used for filtering because it overrides ignore rules.)
"""

from __future__ import annotations

import re
from collections.abc import Callable


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A predicate telling whether a relative posix path matches ``pattern``."""
    p = pattern
    anchored = p.startswith("/")
    p = p.strip("/")
    if not p:
        return lambda _path: True
    if not anchored and "/" not in p:
        p = "**/" + p
    regex = re.compile(_translate(p) + "(?:/.*)?", re.DOTALL)
    return lambda path: regex.fullmatch(path) is not None


def _translate(p: str) -> str:
    out: list[str] = []
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "*":
            if p.startswith("**", i):
                start_seg = i == 0 or p[i - 1] == "/"
                end = i + 2
                if start_seg and end < n and p[end] == "/":
                    out.append("(?:.*/)?")
                    i = end + 1
                    continue
                if start_seg and end == n:
                    out.append(".*")
                    i = end
                    continue
                out.append("[^/]*")
                i = end
                continue
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = p.find("]", i + 2 if p[i + 1 : i + 2] in ("!", "^") else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = p[i + 1 : j]
                if body[:1] in ("!", "^"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j
        elif c == "{":
            j = _closing_brace(p, i)
            if j < 0:
                out.append(re.escape(c))
            else:
                alternatives = _split_top(p[i + 1 : j])
                out.append("(?:" + "|".join(_translate(a) for a in alternatives) + ")")
                i = j
        elif c == "\\" and i + 1 < n:
            i += 1
            out.append(re.escape(p[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def _closing_brace(p: str, i: int) -> int:
    depth = 0
    for j in range(i, len(p)):
        if p[j] == "{":
            depth += 1
        elif p[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _split_top(body: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for c in body:
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
            continue
        depth += c == "{"
        depth -= c == "}"
        cur.append(c)
    parts.append("".join(cur))
    return parts
