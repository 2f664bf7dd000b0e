"""Revising items in place: a stale file view becomes a stub; a pinned note is unpinned or demoted.

A mixin of WorkingMemory (working.py), whose state it shares. Pinned notes are never evicted
silently: past their share of the budget they stay, `pinned_over()` names the ones to let go
(oldest first), the run asks the model to `unpin` them and demotes the oldest itself only if
the model does not. Every demotion is queued for the run to report (`take_demoted()`).
"""

from __future__ import annotations

from typing import Any

from agent_cli.memory.store import Item, Store


class Revisions:
    """supersede(), unpin(), demote() and pinned_over() of WorkingMemory."""

    store: Store
    _hot: dict[str, Item]
    _pinned_cost: int
    _pinned_cap: int

    def supersede(self, item_id: str, text: str) -> bool:
        """Replace what item `item_id` says, hot and cold, by `text`; False if there is no such item."""
        found = False
        item = self._hot.get(item_id)
        if item is not None:
            self._unlink(item)
            item.text, item.tokens, item.symbols = text, self._count(text), ()
            self._measure(item)
            self._admit(item)
            found = True
        record = self.store.get(item_id)
        if record is not None:
            record.update(text=text, tokens=self._count(text), symbols=[])
            self.store.put(record)
            found = True
        if found:
            self._fit()
        return found

    def pinned_over(self) -> list[str]:
        """The oldest pinned notes whose unpinning would bring pinned notes within their share."""
        excess = self._pinned_cost - self._pinned_cap
        out: list[str] = []
        for item in self._hot.values():  # insertion order: the oldest first
            if excess <= 0:
                break
            if item.pinned:
                out.append(item.id)
                excess -= item.cost
        return out

    def unpin(self, item_id: str) -> None:
        """Make pinned note `item_id` an ordinary note, scored like any item; ValueError if it is not one."""
        item = self._hot.get(item_id)
        if item is None or not item.pinned:
            pinned = ", ".join(i.id for i in self._hot.values() if i.pinned) or "none"
            raise ValueError(f"{item_id} is not a pinned note (pinned now: {pinned})")
        self._unlink(item)
        item.pinned = False
        self._measure(item)
        self._admit(item)
        self._fit()

    def demote(self, item_id: str) -> None:
        """Unpin `item_id` for the model, and queue the demotion to be reported."""
        self.unpin(item_id)
        self._demoted().append(item_id)

    def take_demoted(self) -> list[str]:
        """The demotions since the last call (oldest first), forgotten once taken."""
        out = list(self._demoted())
        self._demoted().clear()
        return out

    def _evicting(self, item: Item) -> None:
        """A pinned note is evicted only when pinned notes alone overflow the whole budget:
        that is reported as a demotion too."""
        if item.pinned:
            self._demoted().append(item.id)

    def _demoted(self) -> list[str]:
        if not hasattr(self, "_demoted_ids"):
            self._demoted_ids: list[str] = []
        return self._demoted_ids

    # Provided by WorkingMemory.
    def _unlink(self, item: Item) -> None: ...
    def _admit(self, item: Item) -> None: ...
    def _measure(self, item: Item) -> None: ...
    def _count(self, text: str) -> int: ...
    def _fit(self) -> None: ...
    def _record(self, item: Item) -> dict[str, Any]: ...
