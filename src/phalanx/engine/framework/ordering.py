"""A priority queue whose keys may grow while items wait (shares rise as work is placed)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LazyQueue(Generic[T]):
    """Pops the item with the smallest current key.

    Keys are re-read on pop; an item whose key grew since it was pushed goes back in.
    Correct as long as keys never shrink while items wait. Ties break on ``tiebreak``
    (a stable key such as (creation time, name)), never on insertion luck. A lone item
    is never keyed: with nothing to compare it to, its key cannot matter.
    """

    def __init__(
        self, items: Iterable[T], key: Callable[[T], Any], tiebreak: Callable[[T], Any]
    ) -> None:
        self._key = key
        self._tiebreak = tiebreak
        self._heap: list[tuple[Any, Any, int, T]] = []
        self._lone: list[T] = []  # the only item, while it is alone (not keyed)
        self._seq = 0
        for item in items:
            self.push(item)

    def push(self, item: T) -> None:
        """Add ``item`` (keyed now, unless it is alone)."""
        if not self._heap and not self._lone:
            self._lone.append(item)
            return
        if self._lone:
            self._push_keyed(self._lone.pop())
        self._push_keyed(item)

    def _push_keyed(self, item: T) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (self._key(item), self._tiebreak(item), self._seq, item))

    def pop(self) -> T:
        """Remove and return the item with the smallest current key."""
        if self._lone:
            return self._lone.pop()
        while True:
            stored, tie, seq, item = heapq.heappop(self._heap)
            if not self._heap:
                return item
            current = self._key(item)
            if current == stored or (current, tie) <= self._heap[0][:2]:
                return item
            heapq.heappush(self._heap, (current, tie, seq, item))

    def peek(self) -> T:
        """The item ``pop`` would return, left in place (at the top, its key re-read: one
        key call when it has not grown)."""
        if self._lone:
            return self._lone[0]
        heap = self._heap
        while True:
            stored, tie, seq, item = heap[0]
            if len(heap) == 1:
                return item
            current = self._key(item)
            if current == stored:
                return item
            heapq.heapreplace(heap, (current, tie, seq, item))

    def __bool__(self) -> bool:
        return bool(self._heap) or bool(self._lone)

    def __len__(self) -> int:
        return len(self._heap) + len(self._lone)
