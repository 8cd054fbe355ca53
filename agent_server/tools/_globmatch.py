"""Glob patterns for ``glob`` and ``grep``'s ``glob`` filter, matched against relative paths.

Role: compile a pattern into a matcher with the semantics the tool descriptions promise
(gitignore-style, as in ripgrep): ``*`` and ``?`` stay within one path segment, ``**`` spans
folders, ``[abc]`` / ``[!abc]`` are classes, ``{a,b}`` are alternatives (nested too); a pattern
without ``/`` matches the file name at any depth, one with ``/`` is anchored at the searched folder
(a leading ``/`` anchors too); a pattern that matches a folder matches every file below it.
The pattern becomes a Thompson NFA (states linear in the pattern's length, braces included) run as
a set of states over the path's characters, so one match costs at most O(len(pattern) × len(path))
whatever the pattern (issue 32 §3: a backtracking ``re`` froze the server); the sets met are cached
as DFA states, bounded in number.

Must never: backtrack; decide about ``.gitignore`` — ignore rules are applied before, by ripgrep
or the walk. (ripgrep's own ``--glob`` is not used for filtering because it overrides ignore rules.)
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

#: DFA states cached per pattern before the cache is emptied (bounds memory, not time).
MAX_DFA_STATES = 4096

# NFA state kinds. A consuming state tests one character; ``SPLIT`` is an epsilon fork.
_CHAR, _ANY, _NOSLASH, _CLASS, _SPLIT, _MATCH = range(6)


class _State:
    __slots__ = ("arg", "kind", "out", "out2")

    def __init__(self, kind: int, arg: object = None) -> None:
        self.kind = kind
        self.arg = arg
        self.out: _State | None = None
        self.out2: _State | None = None

    def accepts(self, ch: str) -> bool:
        kind = self.kind
        if kind == _CHAR:
            return ch == self.arg
        if kind == _ANY:
            return True
        if kind == _NOSLASH:
            return ch != "/"
        if kind == _CLASS:
            negated, singles, ranges = self.arg  # type: ignore[misc]
            if ch == "/":
                return False
            inside = ch in singles or any(lo <= ch <= hi for lo, hi in ranges)
            return inside != negated
        return False


class _Frag:
    """A piece of NFA: its ``start`` and the dangling exits to patch to what follows."""

    __slots__ = ("exits", "start")

    def __init__(self, start: _State, exits: list[tuple[_State, str]]) -> None:
        self.start = start
        self.exits = exits


def _patch(exits: list[tuple[_State, str]], target: _State) -> None:
    for state, field in exits:
        setattr(state, field, target)


class _Compiler:
    """Recursive descent over the pattern text building the NFA; every construct adds O(1)
    states per pattern character, so the NFA is linear in the pattern's length."""

    def __init__(self, p: str) -> None:
        self.p = p
        self.count = 0

    def new(self, kind: int, arg: object = None) -> _State:
        self.count += 1
        return _State(kind, arg)

    def sequence(self, i: int, stop: str, seg_start: bool, at_end: bool) -> tuple[_Frag | None, int]:
        """Parse from ``i`` until one of ``stop`` at the top level (or the end); ``seg_start``: a
        segment starts at ``i``; ``at_end``: nothing follows this sequence in the pattern. Returns
        the fragment (``None`` for an empty sequence) and where parsing stopped."""
        p, n = self.p, len(self.p)
        frags: list[_Frag] = []
        start_seg = seg_start
        while i < n and p[i] not in stop:
            c = p[i]
            if frags:
                start_seg = p[i - 1] == "/"
            if c == "*" and p.startswith("**", i) and start_seg:
                end = i + 2
                if end < n and p[end] == "/":  # `**/`: zero or more whole folders
                    frags.append(self.folders())
                    i = end + 1
                    continue
                if end == n or (p[end] in stop and at_end):  # a trailing `**`: everything below
                    frags.append(self.loop(_ANY))
                    i = end
                    continue
            if c == "*":
                while i + 1 < n and p[i + 1] == "*":  # `a**b` is `a*b`
                    i += 1
                frags.append(self.loop(_NOSLASH))
            elif c == "?":
                frags.append(self.single(self.new(_NOSLASH)))
            elif c == "[" and (cls := _class(p, i)) is not None:
                arg, i = cls
                frags.append(self.single(self.new(_CLASS, arg)))
            elif c == "{" and (j := _closing_brace(p, i)) >= 0:
                frags.append(self.alternatives(i, j, start_seg, at_end and (j == n - 1 or p[j + 1] in stop)))
                i = j
            elif c == "\\" and i + 1 < n:
                i += 1
                frags.append(self.single(self.new(_CHAR, p[i])))
            else:
                frags.append(self.single(self.new(_CHAR, c)))
            i += 1
        if not frags:
            return None, i
        for left, right in pairwise(frags):
            _patch(left.exits, right.start)
        return _Frag(frags[0].start, frags[-1].exits), i

    def single(self, state: _State) -> _Frag:
        return _Frag(state, [(state, "out")])

    def loop(self, kind: int) -> _Frag:
        """``X*`` for one consuming state ``X``: a split that consumes and comes back, or leaves."""
        split = self.new(_SPLIT)
        body = self.new(kind)
        split.out = body
        body.out = split
        return _Frag(split, [(split, "out2")])

    def folders(self) -> _Frag:
        """``(.*/)?``: leave at once, or consume anything and leave after any ``/``."""
        split = self.new(_SPLIT)
        any_char = self.new(_ANY)
        slash = self.new(_CHAR, "/")
        inner = self.new(_SPLIT)
        split.out = inner
        inner.out = any_char
        inner.out2 = slash
        any_char.out = inner
        return _Frag(split, [(split, "out2"), (slash, "out")])

    def alternatives(self, i: int, j: int, seg_start: bool, at_end: bool) -> _Frag:
        join = self.new(_SPLIT)  # an epsilon to what follows the braces
        starts: list[_State] = []
        k = i + 1
        while True:
            frag, k = self.sequence(k, ",}", seg_start, at_end)
            if frag is None:
                starts.append(join)
            else:
                _patch(frag.exits, join)
                starts.append(frag.start)
            if k >= j:
                break
            k += 1  # past the `,`
        fork = starts[0]
        for other in starts[1:]:  # a chain of splits: linear in the number of alternatives
            split = self.new(_SPLIT)
            split.out = fork
            split.out2 = other
            fork = split
        return _Frag(fork, [(join, "out")])


def _class(p: str, i: int) -> tuple[tuple[bool, frozenset[str], tuple[tuple[str, str], ...]], int] | None:
    """The class starting at ``p[i] == "["``: ((negated, single characters, ranges), index of its
    ``]``), or ``None`` when it is not closed (then ``[`` is a literal)."""
    n = len(p)
    k = i + 1
    negated = k < n and p[k] in "!^"
    k += negated
    singles: set[str] = set()
    ranges: list[tuple[str, str]] = []
    first = True
    while k < n:
        c = p[k]
        if c == "]" and not first:
            return (negated, frozenset(singles), tuple(ranges)), k
        first = False
        if c == "\\" and k + 1 < n:
            k += 1
            c = p[k]
        if k + 2 < n and p[k + 1] == "-" and p[k + 2] != "]":
            hi = p[k + 2]
            if hi == "\\" and k + 3 < n:
                k += 1
                hi = p[k + 2]
            ranges.append((c, hi))
            k += 3
            continue
        singles.add(c)
        k += 1
    return None


def _closing_brace(p: str, i: int) -> int:
    depth = 0
    j = i
    while j < len(p):
        if p[j] == "\\":
            j += 2
            continue
        if p[j] == "{":
            depth += 1
        elif p[j] == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


class _DState:
    """A DFA state: the set of NFA states the path so far leads to, and its known transitions."""

    __slots__ = ("edges", "final", "nfa")

    def __init__(self, nfa: frozenset[_State]) -> None:
        self.nfa = nfa
        self.edges: dict[str, _DState] = {}
        self.final = any(s.kind == _MATCH for s in nfa)


class GlobMatcher:
    """A compiled pattern; ``matcher(path)`` tells whether ``path`` matches. ``steps`` counts the
    NFA states examined so far (the work done; a cached transition costs none): one call adds at
    most ``states × (len(path) + 1)``. The state after a path's folder is remembered for the next
    path (a listing gives the files of one folder together), so mostly only names are scanned."""

    def __init__(self, pattern: str) -> None:
        p = pattern
        anchored = p.startswith("/")
        p = p.strip("/")
        self.always = not p
        if not anchored and "/" not in p:
            p = "**/" + p
        compiler = _Compiler(p)
        frag, _ = compiler.sequence(0, "", True, True)
        # what follows a match: the end, or a `/` and anything (a matched folder's files)
        match = compiler.new(_MATCH)
        below = compiler.new(_SPLIT)
        slash = compiler.new(_CHAR, "/")
        rest = compiler.loop(_ANY)
        below.out = match
        below.out2 = slash
        slash.out = rest.start
        _patch(rest.exits, match)
        start = below
        if frag is not None:
            _patch(frag.exits, below)
            start = frag.start
        self.states = compiler.count
        self.steps = 0
        self._dstates: dict[frozenset[_State], _DState] = {}
        self._start = self._dstate(self._closure([start]))
        self._dead = self._dstate(frozenset())
        self._folder = ""
        self._after_folder = self._start

    def _dstate(self, nfa: frozenset[_State]) -> _DState:
        found = self._dstates.get(nfa)
        if found is None:
            if len(self._dstates) >= MAX_DFA_STATES:  # forget every transition, keep correctness
                for known in self._dstates.values():
                    known.edges.clear()
                self._dstates.clear()
            found = self._dstates[nfa] = _DState(nfa)
        return found

    def _closure(self, states: list[_State]) -> frozenset[_State]:
        """The consuming and matching states reachable from ``states`` through epsilons."""
        seen: set[_State] = set()
        found: set[_State] = set()
        stack = list(states)
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            self.steps += 1
            if s.kind == _SPLIT:
                if s.out is not None:
                    stack.append(s.out)
                if s.out2 is not None:
                    stack.append(s.out2)
            else:
                found.add(s)
        return frozenset(found)

    def _run(self, state: _DState, text: str) -> _DState:
        dead = self._dead
        for ch in text:
            following = state.edges.get(ch)
            if following is None:
                self.steps += len(state.nfa)
                moved = [s.out for s in state.nfa if s.kind != _MATCH and s.accepts(ch) and s.out is not None]
                following = state.edges[ch] = self._dstate(self._closure(moved))
            state = following
            if state is dead:
                break
        return state

    def __call__(self, path: str) -> bool:
        if self.always:
            return True
        cut = path.rfind("/") + 1
        if cut and path[:cut] == self._folder:
            state = self._after_folder
        else:
            state = self._run(self._start, path[:cut])
            self._folder, self._after_folder = path[:cut], state
        return self._run(state, path[cut:]).final


def compile_glob(pattern: str) -> Callable[[str], bool]:
    """A predicate telling whether a relative posix path matches ``pattern`` (a ``GlobMatcher``)."""
    return GlobMatcher(pattern)
