"""Where each hot item is rendered, kept stable so that prompt caches reuse each request's prefix.

A request is cached up to its first changed token, so the layout changes as late in the
context as it can:

- New items go at the end of the memory block, after the list of what is cold, which changes
  only with an eviction or a recall. A note taken since the last `settle()` is shown
  there too, marked pinned, rather than in the pinned section before the memory block: adding
  it there would change everything after that section. `settle()` (the run calls it when an
  attempt at a task starts, when recalled memory changes the prefix anyway) moves such notes
  into the pinned section.
- A batch eviction changes the block from the first item it took out; the items that stay
  after that point are then re-ordered: the pinned notes among them first, in their order (a
  batch never takes a pinned note, so they are the most durable of all), then the rest, the
  most durable first (the highest score a few steps ahead, when the fresh boost of the newest
  results has faded), so that the next batch, which takes the weakest, most likely changes only
  the end of the block. Notes so keep their place from one batch to the next: a batch re-orders
  only the unpinned items after the first one it took out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from agent_cli.memory.working import scoring
from agent_cli.memory.working.hot import HotZone
from agent_cli.memory.working.store import Item, id_number

HORIZON_STEPS = 8  # how far ahead durability looks: past the fresh boost (scoring.py)


class LayoutState(TypedDict):
    """The layout as Layout.dump() exports it."""

    pinned_section: list[str]  # ids of the notes in the pinned section
    cold_list: list[str]  # the cold list as last rendered, and the id of the item it followed


def durability(item: Item, step: int) -> float:
    """The item's score `HORIZON_STEPS` after `step`, when a new result's fresh boost has faded."""
    return item.static + scoring.recency(step + HORIZON_STEPS - item.touched)


def _by_durability(items: list[Item], step: int) -> list[Item]:
    """`items` sorted the most durable first (ties keep their order), as sorted() with
    durability() for key would give."""
    if len(items) < 2:
        return items  # most batches leave one item after the first they took out
    recent, ahead = scoring.RECENT, step + HORIZON_STEPS
    keys = [
        -(
            item.static
            + (
                recent[age]
                if 0 <= (age := ahead - item.touched) < len(recent)
                else scoring.recency(age)
            )
        )
        for item in items
    ]
    return [items[at] for at in sorted(range(len(items)), key=keys.__getitem__)]


def tail_order(items: list[Item], step: int) -> list[Item]:
    """The order of the block items after a batch's first gap: the pinned notes in their order,
    then the rest, the most durable first."""
    return [item for item in items if item.pinned] + _by_durability(
        [item for item in items if not item.pinned], step
    )


class Layout:
    """Which pinned notes sit in the pinned section; the order of the memory block."""

    def __init__(self) -> None:
        self.section: set[str] = set()  # pinned notes rendered in the pinned section
        self._footer = ("", "")  # the cold list as last rendered, and the item it followed

    def footer_after(self, block: list[Item], footer: str) -> str:
        """The id of the block item the cold list follows: the last one when the list changed
        (an eviction or a recall), else the one it followed before, so that the items added
        since go after it and the list stays in the cached prefix."""
        text, after = self._footer
        if footer != text or not any(item.id == after for item in block):
            after = block[-1].id if block else ""
            self._footer = (footer, after)
        return after

    def settle(self, items: Iterable[Item], section: Iterable[str] | None = None) -> None:
        """Put every pinned note (or those of `section`) in the pinned section from now on."""
        chosen = None if section is None else set(section)
        self.section = {
            item.id for item in items if item.pinned and (chosen is None or item.id in chosen)
        }

    def dump(self) -> LayoutState:
        """The layout as JSON-compatible data, for WorkingMemory.export_state()."""
        return {
            "pinned_section": sorted(self.section, key=id_number),
            "cold_list": list(self._footer),
        }

    def load(self, items: Iterable[Item], state: Mapping[str, Any]) -> None:
        """The layout of an exported state; one saved without it puts every note in the
        pinned section and the cold list at the end."""
        self.settle(items, state.get("pinned_section"))
        footer = state.get("cold_list")
        self._footer = (str(footer[0]), str(footer[1])) if footer else ("", "")

    def in_section(self, item: Item) -> bool:
        """Whether the item is rendered in the pinned section (else in the memory block)."""
        return item.pinned and item.id in self.section

    def split(self, items: Iterable[Item]) -> tuple[list[Item], list[Item]]:
        """The items of the pinned section and those of the memory block, each in hot order."""
        pinned: list[Item] = []
        block: list[Item] = []
        for item in items:
            (pinned if self.in_section(item) else block).append(item)
        return pinned, block

    def after_batch(self, hot: HotZone, first: int | None, step: int) -> None:
        """Re-order the hot zone after a batch at `step` whose first item taken out of the memory
        block sat at position `first` (HotZone.position()); None when it took nothing out of the
        block. The pinned section first, then the block items before `first`, then those after
        it in tail_order()."""
        if first is None:
            return
        tail = hot.after(first)
        if not self.section or (
            not any(self.in_section(item) for item in tail)
            and self._leading_notes(hot, first) == self._section_size(hot)
        ):
            # The pinned section leads already, and the notes after `first` stay where they
            # are: moving only the unpinned items to the end puts the notes before them.
            hot.rearrange_end(_by_durability([item for item in tail if not item.pinned], step))
            return
        pinned, block = self.split(hot)
        head = [item for item in block if hot.position(item.id) < first]
        tail = tail_order([item for item in block if hot.position(item.id) > first], step)
        hot.arrange(pinned + head + tail)

    def _section_size(self, hot: HotZone) -> int:
        """How many hot notes the pinned section holds."""
        count = 0
        for item_id in self.section:
            item = hot.get(item_id)
            count += item is not None and item.pinned
        return count

    def _leading_notes(self, hot: HotZone, before: int) -> int:
        """How many notes of the pinned section lead the hot zone, before any block item and
        before position `before`."""
        count = 0
        for item in hot:
            if not self.in_section(item) or hot.position(item.id) >= before:
                break
            count += 1
        return count
