"""The hot zone: the items in context, in the order they are rendered, and their bookkeeping.

Order is position in the memory block: new items go at the end, and an eviction takes items out
without moving the rest (see WorkingMemory._fit). Each item's position is a number that grows
along the order, so that a batch can name where it first took an item out and re-order only what
follows it (layout.py) without walking the whole zone. Beside the items it keeps their token cost,
the names they define, the latest edits, an index of their texts (to merge identical results)
and the eviction ranking, which holds only the items a batch may take first: neither pinned
nor one of the latest edits (an edit pushed out of those is ranked again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from agent_cli.memory.working.ranking import Ranking
from agent_cli.memory.working.store import Item, id_number


class HotZone:
    """Hot items by position; `score(item)` is an item's score at the current step."""

    def __init__(self, score: Callable[[Item], float], protect_recent_edits: int) -> None:
        self.items: dict[str, Item] = {}
        self.cost = 0
        self.pinned_cost = 0
        self.defs: dict[str, set[str]] = {}  # name -> hot items defining it
        self.protected: dict[str, None] = {}  # the latest edits, oldest first
        self.protected_cost = 0  # what those of them that are hot cost
        self.protect_limit = protect_recent_edits
        self._texts: dict[tuple[str, str], str] = {}  # (kind, text) -> hot item id
        self._position: dict[str, int] = {}  # item id -> a number growing along the order
        self._last = 0
        self._score = score
        self._ranking = Ranking(score)

    def __len__(self) -> int:
        return len(self.items)

    def __iter__(self) -> Iterator[Item]:
        return iter(self.items.values())

    def get(self, item_id: str) -> Item | None:
        """The hot item with this id, or None."""
        return self.items.get(item_id)

    def identical(self, kind: str, text: str) -> Item | None:
        """The hot item added with this very kind and text, if any."""
        item_id = self._texts.get((kind, text))
        return self.items.get(item_id) if item_id is not None else None

    def admit(self, item: Item, step: int) -> None:
        """Put an item at the end of the hot zone and index it."""
        self.items[item.id] = item
        self._last += 1
        self._position[item.id] = self._last
        self.cost += item.cost
        if item.id in self.protected:
            self.protected_cost += item.cost
        if item.pinned:
            self.pinned_cost += item.cost
        elif item.id not in self.protected:
            self._ranking.add(item, step)
        if item.origin_id is None:
            self._texts[(item.kind, item.text)] = item.id
        for name in item.symbols:
            self.defs.setdefault(name, set()).add(item.id)

    def unlink(self, item: Item) -> None:
        """Take an item out of the hot zone, its indexes and the latest edits."""
        del self.items[item.id]
        del self._position[item.id]
        if item.id in self.protected:
            del self.protected[item.id]
            self.protected_cost -= item.cost
        self._ranking.discard(item.id)
        self.cost -= item.cost
        if item.pinned:
            self.pinned_cost -= item.cost
        key = (item.kind, item.text)
        if self._texts.get(key) == item.id:
            del self._texts[key]
        for name in item.symbols:
            ids = self.defs.get(name)
            if ids is not None:
                ids.discard(item.id)
                if not ids:
                    del self.defs[name]

    def resized(self, item: Item, change: int) -> None:
        """Account for a change of `change` tokens in a hot item's cost."""
        self.cost += change
        if item.id in self.protected:
            self.protected_cost += change
        if item.pinned:
            self.pinned_cost += change

    def rescored(self, item: Item, step: int) -> None:
        """Re-rank a hot item whose score changed other than by the step."""
        if not item.pinned and item.id not in self.protected and self.items.get(item.id) is item:
            self._ranking.add(item, step)

    def arrange(self, items: list[Item]) -> None:
        """Put the hot items in this order (the same items, re-ordered)."""
        self.items = {item.id: item for item in items}
        self._position = {}
        for item in items:
            self._last += 1
            self._position[item.id] = self._last

    def position(self, item_id: str) -> int:
        """Where a hot item sits: a number larger than those of the items before it."""
        return self._position[item_id]

    def after(self, position: int) -> list[Item]:
        """The hot items placed after `position`, in order."""
        found: list[Item] = []
        where = self._position
        for item_id in reversed(self.items):
            if where[item_id] <= position:
                break
            found.append(self.items[item_id])
        found.reverse()
        return found

    def rearrange_end(self, items: list[Item]) -> None:
        """Put `items`, the hot items at the end of the zone, back at its end in this order."""
        hot, where = self.items, self._position
        for item in items:
            hot[item.id] = hot.pop(item.id)
            self._last += 1
            where[item.id] = self._last

    def protect(self, item_id: str, step: int) -> None:
        """Count an edit among the latest ones, which eviction passes over: they are not
        ranked, and the one this pushes out of them (at `step`) is ranked again."""
        if item_id in self.protected:
            del self.protected[item_id]
        elif item_id in self.items:
            self.protected_cost += self.items[item_id].cost
            self._ranking.discard(item_id)
        self.protected[item_id] = None
        if len(self.protected) > self.protect_limit:
            oldest = next(iter(self.protected))
            del self.protected[oldest]
            item = self.items.get(oldest)
            if item is not None:
                self.protected_cost -= item.cost
                if not item.pinned:
                    self._ranking.add(item, step)

    def oldest_pinned(self) -> Item:
        """The pinned item added first."""
        return min((i for i in self.items.values() if i.pinned), key=lambda i: id_number(i.id))

    def weakest(
        self, step: int, spare_latest: bool = True, spare: str | None = None
    ) -> Item | None:
        """The item to evict next, None when only pinned items (or, sparing them, the latest edits)
        are left.

        The lowest-scoring item that is neither pinned nor one of the latest edits (nor `spare`);
        unless `spare_latest`, failing that the lowest-scoring of the latest edits.
        """
        item = self._ranking.weakest(step, () if spare is None else (spare,))
        if item is not None or spare_latest:
            return item
        latest = [self.items[i] for i in self.protected if i in self.items]
        return min(latest, key=lambda i: (self._score(i), id_number(i.id)), default=None)
