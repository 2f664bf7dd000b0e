"""Where items sit: appended between eviction batches, re-ordered only by a batch and only after
the first item it took out; notes join the pinned section at lay_out(); the heap picks
what a linear scan would; exact counts keep every assembled context within budget; identical
results merge into one item."""

from __future__ import annotations

import random

from agent_cli.core import tokens
from agent_cli.memory import WorkingMemory
from agent_cli.memory.working.layout import durability
from agent_cli.memory.working.memory import FOOTER_TOKENS, LOW_WATER
from agent_cli.memory.working.store import id_number


def filler(i: int, words: int = 40) -> str:
    """A distinct text of about `words` tokens that mentions nothing defined."""
    return f"entry {i}\n" + " ".join(f"w{i}x{j}" for j in range(words // 3))


def order(mem: WorkingMemory) -> list[str]:
    """Ids of the memory block, in the order assemble() renders them."""
    return [item.id for item in mem.assemble().items if not item.pinned]


def in_place(mem: WorkingMemory) -> list[str]:
    """Ids of the hot zone in block order, without assembling (the state keeps the order)."""
    return [item["id"] for item in mem.export_state()["items"]]


def cold_in_order(mem: WorkingMemory) -> list[str]:
    return [e["id"] for e in reversed(mem.store.recent(100_000))]


def test_new_items_go_at_the_end_and_nothing_moves_between_batches():
    mem = WorkingMemory(max_tokens=1500)
    before = order(mem)
    for i in range(200):
        evictions = mem.stats()["evictions"]
        new = mem.add(["log", "file", "edit", "tool_output"][i % 4], filler(i, 30 + i % 50))
        mem.tick()
        now = order(mem)
        if mem.stats()["evictions"] == evictions:
            assert now == before + [new]  # the block only grew at its end
        before = now
    assert mem.stats()["evictions"] > 20


def test_a_batch_evicts_down_to_the_low_water_mark_and_reorders_only_after_the_first_gap():
    mem = WorkingMemory(max_tokens=1000)
    room = 1000 - FOOTER_TOKENS
    i, before = 0, []
    while mem.stats()["evictions"] == 0:
        before = in_place(mem)
        mem.add(["log", "edit", "file"][i % 3], filler(i, 60))
        mem.tick()
        i += 1
    assert mem.stats()["tokens"] <= room * LOW_WATER  # as booked by add()
    assert mem.stats()["evictions"] > 1  # one batch, several items
    kept, laid = in_place(mem), before + [f"m{i}"]
    first = next(at for at, item_id in enumerate(laid) if item_id not in kept)
    assert kept[:first] == laid[:first]  # what came before the first item taken out stays put
    assert sorted(kept[first:]) == sorted(set(laid[first:]) & set(kept))
    ahead = [durability(mem.hot_item(item_id), mem.step) for item_id in kept[first:]]
    assert ahead == sorted(ahead, reverse=True) and len(set(ahead)) > 1  # the most durable first
    gone = set(before) - set(kept)
    scores = {item_id: mem.explain(item_id)["total"] for item_id in before}
    assert max(scores[g] for g in gone) <= min(scores[k] for k in kept if k in scores)


def test_the_heap_evicts_in_the_order_a_linear_scan_would():
    rng = random.Random(3)
    mem = WorkingMemory(max_tokens=1200, protect_recent_edits=3)
    kinds = ["log", "tool_output", "file", "test_result", "edit", "recalled"]
    seen, batches = 0, 0
    for i in range(400):
        costs = {item.id: item.cost for item in mem.hot_items()}
        latest = mem.export_state()["recent_edits"]
        kind = rng.choice(kinds)
        new_id = mem.add(kind, filler(i, rng.randrange(10, 120)))
        cold = cold_in_order(mem)
        went, seen = cold[seen:], len(cold)
        if went:
            batches += 1
            protected = (latest + [new_id] if kind == "edit" else latest)[-3:]
            assert went == linear_scan(mem, costs, new_id, protected)
        if rng.random() < 0.5:
            mem.tick()
    assert batches > 10


def linear_scan(
    mem: WorkingMemory, costs: dict[str, int], new_id: str, protected: list[str]
) -> list[str]:
    """What a scan for the lowest (score, id number) evicts, one item at a time, from what was
    hot, leaving the latest edits and the new item be, down to the low-water mark (the new
    item alone never overflows this budget)."""
    new = mem.store.get(new_id)
    costs = {
        **costs,
        new_id: new["cost"] if new else next(i.cost for i in mem.hot_items() if i.id == new_id),
    }
    scores = {item_id: mem.explain(item_id)["total"] for item_id in costs}
    pool = set(costs) - set(protected) - {new_id}
    total, low = sum(costs.values()), int((mem.max_tokens - FOOTER_TOKENS) * LOW_WATER)
    out = []
    while total > low and pool:
        weakest = min(pool, key=lambda k: (scores[k], id_number(k)))
        pool.discard(weakest)
        out.append(weakest)
        total -= costs[weakest]
    return out


def test_estimates_too_low_are_caught_by_the_exact_count_at_assembly():
    mem = WorkingMemory(max_tokens=600)
    rng = random.Random(1)
    for _ in range(12):  # punctuation soup: more tokens a character than the estimate assumes
        mem.add("tool_output", "".join(rng.choice("aZ9!?;{}[]") for _ in range(150)))
        assert mem.stats()["tokens"] <= 600 - FOOTER_TOKENS  # as booked
    exact = sum(tokens.count(i.header()) + tokens.count(i.text) + 2 for i in mem.hot_items())
    assert exact > 600 - FOOTER_TOKENS  # the booking was too low
    ctx = mem.assemble()
    assert ctx.tokens == tokens.count(ctx.memory) <= 600
    assert all(item.exact and item.tokens == tokens.count(item.text) for item in ctx.items)
    assert mem.stats()["tokens"] <= 600 - FOOTER_TOKENS  # exact now


def test_identical_results_merge_into_one_item_with_a_count_in_place():
    mem = WorkingMemory(max_tokens=2000)
    failing = '<tool_output name="run">$ pytset -q\nsh: pytset: not found (exit 127)</tool_output>'
    first = mem.add("tool_output", failing, summary="run pytset -q")
    other = mem.add("log", filler(1))
    for _ in range(4):
        mem.tick()
        assert mem.add("tool_output", failing, summary="run pytset -q") == first
    assert mem.stats()["hot"] == 2
    item = next(i for i in mem.hot_items() if i.id == first)
    assert item.repeats == 5 and item.touched == mem.step
    # It keeps its place and its header, so the memory block keeps its cached prefix; the
    # tool message of a repeat says the count (tests/agent/test_prefix.py).
    assert item.header() == f"[tool_output {first}] run pytset -q"
    assert order(mem) == [first, other]
    ctx = mem.assemble()
    assert ctx.memory.count("pytset: not found") == 1 and "seen" not in ctx.memory
    assert ctx.tokens == tokens.count(ctx.memory)


def test_only_the_same_kind_and_text_merge():
    mem = WorkingMemory()
    a = mem.add("tool_output", "same text")
    b = mem.add("log", "same text")
    c = mem.add("tool_output", "same text ")
    assert len({a, b, c}) == 3
    note = mem.note("remember this")
    assert mem.note("remember this") == note
    state = mem.export_state()
    mem.import_state(state)
    assert mem.add("tool_output", "same text") == a  # the index survives a round trip
    assert next(i for i in mem.hot_items() if i.id == a).repeats == 2
