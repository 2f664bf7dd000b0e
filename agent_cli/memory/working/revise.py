"""Revising items in place: a stale file view becomes a stub; a pinned note is unpinned or demoted.

WorkingMemory holds one `Revisions` and hands it the hot zone and the step of each call. Pinned
notes are never evicted silently: past their share of the budget they stay, `pinned_over()`
names the ones to let go (oldest first), the run asks the model to `unpin` them and demotes the
oldest itself only if the model does not. Every demotion is queued for the run to report
(`take_demoted()`).
"""

from __future__ import annotations

from collections.abc import Callable

from agent_cli.memory.working.hot import HotZone
from agent_cli.memory.working.meter import Meter, estimate
from agent_cli.memory.working.store import Item, Store, id_number


class Revisions:
    """Rewrites and unpins hot items; `rescore(item)` and `fit()` are the memory's own steps."""

    def __init__(
        self,
        store: Store,
        meter: Meter,
        rescore: Callable[[Item], None],
        fit: Callable[[], None],
    ) -> None:
        self.store = store
        self.meter = meter
        self.rescore = rescore
        self.fit = fit
        self.demoted: list[str] = []  # demotions not yet taken, oldest first

    def supersede(
        self, hot: HotZone, step: int, item_id: str, text: str, summary: str | None = None
    ) -> bool:
        """Replace what item `item_id` says, hot and cold, by `text` (and its summary by
        `summary` when given); False if there is no such item."""
        found = False
        item = hot.get(item_id)
        if item is not None:
            hot.unlink(item)
            item.text, item.symbols = text, ()
            if summary is not None:
                item.summary = summary
            self.meter.estimated(item)
            self.rescore(item)
            hot.admit(item, step)
            found = True
        record = self.store.get(item_id)
        if record is not None:
            record.update(text=text, tokens=estimate(text), exact=False, symbols=[])
            if summary is not None:
                record["summary"] = summary
            self.store.put(record)
            found = True
        if found:
            self.fit()
        return found

    def pinned_over(self, hot: HotZone, pinned_cap: int) -> list[str]:
        """The oldest pinned notes whose unpinning would bring pinned notes within `pinned_cap`."""
        excess = hot.pinned_cost - pinned_cap
        out: list[str] = []
        for item in sorted((i for i in hot if i.pinned), key=lambda i: id_number(i.id)):
            if excess <= 0:
                break
            out.append(item.id)
            excess -= item.cost
        return out

    def unpin(self, hot: HotZone, step: int, item_id: str) -> None:
        """Make pinned note `item_id` an ordinary note, scored like any item; ValueError if it is not one."""
        item = hot.get(item_id)
        if item is None or not item.pinned:
            pinned = ", ".join(i.id for i in hot if i.pinned) or "none"
            raise ValueError(f"{item_id} is not a pinned note (pinned now: {pinned})")
        hot.unlink(item)
        item.pinned = False
        self.meter.header_changed(item)
        self.rescore(item)
        hot.admit(item, step)
        self.fit()

    def demote(self, hot: HotZone, step: int, item_id: str) -> None:
        """Unpin `item_id` for the model, and queue the demotion to be reported."""
        self.unpin(hot, step, item_id)
        self.demoted.append(item_id)

    def take_demoted(self) -> list[str]:
        """The demotions since the last call (oldest first), forgotten once taken."""
        out = list(self.demoted)
        self.demoted.clear()
        return out

    def evicting(self, item: Item) -> None:
        """Queue a pinned note being evicted as a demotion (pinned notes alone overflow the budget)."""
        if item.pinned:
            self.demoted.append(item.id)
