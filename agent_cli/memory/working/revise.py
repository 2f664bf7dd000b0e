"""Revising items in place: a stale file view becomes a stub; a pinned note is unpinned or demoted.

A mixin of WorkingMemory (working.py), whose state it shares. Pinned notes are never evicted
silently: past their share of the budget they stay, `pinned_over()` names the ones to let go
(oldest first), the run asks the model to `unpin` them and demotes the oldest itself only if
the model does not. Every demotion is queued for the run to report (`take_demoted()`).
"""

from __future__ import annotations

from typing import Any

from agent_cli.memory.working.meter import Meter, estimate
from agent_cli.memory.working.store import Item, Store, id_number


class Revisions:
    """supersede(), unpin(), demote() and pinned_over() of WorkingMemory."""

    store: Store
    _hot: Any  # hot.HotZone
    _meter: Meter
    _pinned_cap: int
    _step: int
    _search: Any  # recall.ColdSearch
    _restored: set[str]
    recall_cooldown_steps: int

    def supersede(self, item_id: str, text: str) -> bool:
        """Replace what item `item_id` says, hot and cold, by `text`; False if there is no such item."""
        found = False
        item = self._hot.get(item_id)
        if item is not None:
            self._hot.unlink(item)
            item.text, item.symbols = text, ()
            self._meter.estimated(item)
            self._rescore(item)
            self._hot.admit(item, self._step)
            found = True
        record = self.store.get(item_id)
        if record is not None:
            record.update(text=text, tokens=estimate(text), exact=False, symbols=[])
            self.store.put(record)
            found = True
        if found:
            self._fit()
        return found

    def pinned_over(self) -> list[str]:
        """The oldest pinned notes whose unpinning would bring pinned notes within their share."""
        excess = self._hot.pinned_cost - self._pinned_cap
        out: list[str] = []
        for item in sorted((i for i in self._hot if i.pinned), key=lambda i: id_number(i.id)):
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
            pinned = ", ".join(i.id for i in self._hot if i.pinned) or "none"
            raise ValueError(f"{item_id} is not a pinned note (pinned now: {pinned})")
        self._hot.unlink(item)
        item.pinned = False
        self._meter.header_changed(item)
        self._rescore(item)
        self._hot.admit(item, self._step)
        self._fit()

    def cooling(self, query: str, k: int = 3) -> list[tuple[str, int]]:
        """Cold items matching `query` that only their cooldown holds back: (id, steps left)."""
        self._search.cooldown_steps = self.recall_cooldown_steps
        out = []
        for item_id in self._search.find(query, k, self._restored, self._step, cooling=True):
            record = self.store.get(item_id)
            if record is not None:
                out.append(
                    (item_id, self._search.cooldown_left(record["step_evicted"], self._step))
                )
        return out

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
    def _rescore(self, item: Item) -> None: ...
    def _fit(self, need: int = 0) -> None: ...
