"""A batch re-orders the hot zone as the rule says, whether it moves only the items after the first
one it took out (the pinned section leads already) or rebuilds the whole order; the cost of the
latest edits is kept as their sum."""

from __future__ import annotations

import random

from agent_cli.memory.working.hot import HotZone
from agent_cli.memory.working.layout import Layout, durability
from agent_cli.memory.working.store import Item


def make_item(number: int, pinned: bool, rng: random.Random) -> Item:
    """A hot item with a random static score and last touch."""
    item = Item(
        id=f"m{number}",
        kind="note" if pinned else "log",
        text=f"text {number}",
        summary="",
        tokens=5,
        pinned=pinned,
        step=0,
        symbols=(),
        touched=rng.randrange(0, 40),
        cost=7,
    )
    item.static = rng.choice([0.5, 1.0, 1.5, rng.random() * 3])  # ties included
    return item


def by_rule(before: list[Item], gone: set[str], layout: Layout, step: int) -> list[str]:
    """The order after a batch: the pinned section, then the block items before the first one
    taken out, then the rest of the block: its pinned notes in their order, then the other items,
    the most durable first."""
    block = [item for item in before if not layout.in_section(item)]
    first = next(at for at, item in enumerate(block) if item.id in gone)
    head = [item for item in block[:first] if item.id not in gone]
    tail = [item for item in block[first:] if item.id not in gone]
    tail.sort(key=lambda item: (not item.pinned, 0.0 if item.pinned else -durability(item, step)))
    section = [item for item in before if layout.in_section(item) and item.id not in gone]
    return [item.id for item in section + head + tail]


def test_a_batch_gives_the_order_of_the_rule_on_any_layout():
    rng = random.Random(4)
    for case in range(400):
        hot, layout = HotZone(lambda item: item.static, 3), Layout()
        items = [make_item(n, rng.random() < 0.4, rng) for n in range(1, rng.randrange(3, 30))]
        if case % 2:  # the pinned section first, as after a batch
            items.sort(key=lambda item: not item.pinned)
        for item in items:
            hot.admit(item, 0)
        layout.settle([item for item in items if rng.random() < 0.8])
        for _ in range(rng.randrange(0, 3)):  # notes taken since, a stub re-admitted at the end
            moved = rng.choice(items)
            hot.unlink(moved)
            hot.admit(moved, 0)
        before = list(hot)
        block = [item for item in before if not layout.in_section(item)]
        if not block:
            continue
        gone = {item.id for item in rng.sample(block, rng.randrange(1, len(block) + 1))}
        step = rng.randrange(40, 60)
        first = min(hot.position(i) for i in gone)
        for item_id in gone:
            hot.unlink(hot.items[item_id])
        layout.after_batch(hot, first, step)
        assert [item.id for item in hot] == by_rule(before, gone, layout, step), case


def test_the_cost_of_the_latest_edits_is_their_sum_through_protects_resizes_and_unlinks():
    rng = random.Random(9)
    hot = HotZone(lambda item: item.static, 4)
    made: list[Item] = []
    for n in range(1, 600):
        action = rng.random()
        if action < 0.35:
            item = make_item(n, False, rng)
            made.append(item)
            if rng.random() < 0.5:
                hot.protect(item.id, 0)  # an edit is protected before it is admitted
            hot.admit(item, 0)
        elif action < 0.55 and made:
            hot.protect(rng.choice(made).id, 0)  # a merge, or an edit that went cold
        elif action < 0.75 and hot.items:
            item = rng.choice(list(hot))
            change = rng.randrange(-3, 9)
            item.cost += change
            hot.resized(item, change)
        elif hot.items:
            hot.unlink(rng.choice(list(hot)))
        latest = [hot.items[item_id].cost for item_id in hot.protected if item_id in hot.items]
        assert hot.protected_cost == sum(latest), n
