"""Which hot item to evict next: a heap keyed by score, invalidated lazily.

Scores change only when the step advances (recency), or when one item is rescored (a reference,
a new goal, an exact count). So keys stay valid for a whole step: a rescored item gets a new
entry and its old one is skipped when it surfaces; the first eviction in a new step rebuilds the
heap from the live items. Ties go to the older item (the smaller id number), as in a linear scan
over (score, id number).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container

from agent_cli.memory.working.store import Item, id_number


class Ranking:
    """Evictable items, weakest first; `score(item)` is the item's score at the current step."""

    def __init__(self, score: Callable[[Item], float]) -> None:
        self._score = score
        self._live: dict[str, Item] = {}
        self._version: dict[str, int] = {}
        self._number: dict[str, int] = {}  # id_number() of each live item
        self._heap: list[tuple[float, int, int, str]] = []
        self._step: int | None = None  # the step the keys were computed at
        self._entries = 0  # numbers each entry, so a stale one never matches a live item

    def __len__(self) -> int:
        return len(self._live)

    def add(self, item: Item, step: int) -> None:
        """Rank a new or rescored item."""
        self._live[item.id] = item
        self._entries += 1
        version = self._version[item.id] = self._entries
        number = self._number.get(item.id)
        if number is None:
            number = self._number[item.id] = id_number(item.id)
        if self._step == step:
            heapq.heappush(self._heap, (self._score(item), number, version, item.id))

    def discard(self, item_id: str) -> None:
        """Stop ranking an item; its heap entries go stale."""
        if self._live.pop(item_id, None) is not None:
            del self._version[item_id]
            del self._number[item_id]

    def weakest(self, step: int, avoid: Container[str] = ()) -> Item | None:
        """The lowest-scoring item not in `avoid`, or None; it stays ranked."""
        if self._step != step:
            self._rebuild(step)
        heap, skipped = self._heap, []
        found = None
        while heap:
            entry = heap[0]
            if self._version.get(entry[3]) != entry[2]:
                heapq.heappop(heap)
            elif entry[3] in avoid:
                skipped.append(heapq.heappop(heap))
            else:
                found = self._live[entry[3]]
                break
        for entry in skipped:
            heapq.heappush(heap, entry)
        return found

    def _rebuild(self, step: int) -> None:
        """Keys for every live item at `step`."""
        self._step = step
        score, number, version = self._score, self._number, self._version
        self._heap = [
            (score(item), number[item_id], version[item_id], item_id)
            for item_id, item in self._live.items()
        ]
        heapq.heapify(self._heap)
