"""A snapshot of an append-only list without a copy: what ``EventLog.events`` returns.

Role: ``Prefix(items, n)`` is the read-only sequence of the first ``n`` items of ``items`` — a list
that only ever grows by ``append`` (``EventLog``'s events) — so it stays what it was when later
items are appended, as a tuple copy would, for O(1) instead of O(len). Indexing, ``len``,
iteration (forwards and reversed), slices (a tuple of the slice: O(its length)), ``in``,
``index``, ``count`` and ``==`` with another sequence of the same items are those of
``tuple(items[:n])``.

Must never: see an item appended after it was made, or be made over a list that is changed other
than by appending.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Iterator, TypeVar, overload

T = TypeVar("T")


class Prefix(Sequence[T]):
    """The first ``n`` items of the append-only list ``items`` (see the module docstring)."""

    __slots__ = ("_items", "_n")

    def __init__(self, items: list[T], n: int) -> None:
        self._items, self._n = items, n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._n)
            if step == 1:
                return tuple(self._items[start:stop])
            items = self._items
            return tuple(items[i] for i in range(start, stop, step))
        n = self._n
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError("event index out of range")
        return self._items[index]

    def __iter__(self) -> Iterator[T]:
        return itertools.islice(self._items, self._n)

    def __reversed__(self) -> Iterator[T]:
        # a list's reverse iterator starts at the list's last item when it is made: later appends
        # are not seen; the items after the first n are skipped
        items = self._items
        backwards = reversed(items)
        extra = len(items) - self._n
        return backwards if not extra else itertools.islice(backwards, extra, None)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Prefix):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        if isinstance(other, (tuple, list)):
            return len(other) == self._n and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Prefix({self._n} items)"


__all__ = ["Prefix"]
