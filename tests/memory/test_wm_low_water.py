"""Eviction batches between a high and a low water mark: a batch that the budget starts takes the
hot zone down to half its room, the adds after it evict nothing until the budget is reached
again, and each context between two batches is the one before it plus the new item."""

from __future__ import annotations

from agent_cli.memory import WorkingMemory
from agent_cli.memory.working.memory import FOOTER_TOKENS, LOW_WATER

BUDGET = 2000
ROOM = BUDGET - FOOTER_TOKENS


def filler(i: int, words: int = 120) -> str:
    """A distinct text of about `words` tokens that mentions nothing defined."""
    return f"entry {i}\n" + " ".join(f"w{i}x{j}" for j in range(words // 3))


def test_the_low_water_mark_is_half_the_room():
    assert LOW_WATER == 0.5
    assert WorkingMemory(max_tokens=BUDGET).low_water == 0.5


def test_after_a_batch_the_adds_evict_nothing_until_the_budget_is_reached_again():
    mem = WorkingMemory(max_tokens=BUDGET)
    kinds = ["log", "file", "tool_output", "test_result"]
    batches = 0
    for i in range(300):
        evictions, load = mem.stats()["evictions"], mem.stats()["tokens"]
        item = mem.add(kinds[i % 4], filler(i, 60 + 7 * (i % 11)))
        mem.tick()
        cost = mem.hot_item(item).cost
        if mem.stats()["evictions"] > evictions:
            batches += 1
            assert load + cost > ROOM  # only the budget starts a batch
            assert mem.stats()["tokens"] <= ROOM * LOW_WATER  # and it ends at the low mark
        else:
            assert load + cost <= ROOM
            assert mem.stats()["tokens"] == load + cost
    # Each batch frees half the room: with items of 20-110 tokens in 1,936, one in many adds.
    assert 20 < batches < 300 // 8


def test_between_two_batches_each_context_is_the_previous_one_plus_the_new_item():
    mem = WorkingMemory(max_tokens=BUDGET)
    before = mem.assemble().memory
    grown = 0
    for i in range(200):
        evictions = mem.stats()["evictions"]
        item = mem.add(["log", "file", "edit", "tool_output"][i % 4], filler(i, 50 + i % 60))
        mem.tick()
        ctx = mem.assemble()
        if mem.stats()["evictions"] == evictions and before:
            rendered = mem.hot_item(item).render()
            assert ctx.memory == before + "\n" + rendered  # the old text is its prefix
            grown += 1
        before = ctx.memory
    assert grown > 150


def test_the_item_just_added_is_not_evicted_on_the_way_down_to_the_mark():
    # each output is more than the room below the mark leaves beside the note, less than the
    # budget: the batch that its arrival starts takes the older output, never the new one
    mem = WorkingMemory(max_tokens=300)
    mem.note("remember to update the README", "readme note")
    for i in range(6):
        mem.tick()
        new = mem.add("tool_output", f"output number {i} " + "lorem ipsum " * 30, f"output {i}")
        assert new in {item.id for item in mem.assemble().items}
    edit = mem.add("edit", "def verbose(): pass", "edit cli.py")
    assert {new, edit} <= {item.id for item in mem.assemble().items}
