"""The latest edits stay in context: never evicted while anything else can go, never left out of
a render, unless they alone overflow the budget."""

from __future__ import annotations

import json

import pytest

from agent_cli.core import tokens
from agent_cli.memory import InMemStore, WorkingMemory
from agent_cli.memory.working.memory import FOOTER_TOKENS


def code(i: int) -> str:
    """A function of about 60 tokens, the kind of thing an edit adds."""
    body = "".join(f"    step_{j} = value * {j} + {i}\n" for j in range(5))
    return f"def helper_{i}(value):\n{body}    return step_4\n"


def result(i: int) -> str:
    """A test run's output of about 100 tokens that mentions nothing defined."""
    return f"run {i}\n" + " ".join(f"r{i}t{j}" for j in range(40))


def old_edits_then_fresh_results(mem: WorkingMemory, edits: int = 10) -> list[str]:
    """Edits made long ago, then a burst of fresh test results: by score alone the edits lose."""
    ids = []
    for i in range(edits):
        ids.append(mem.add("edit", code(i)))
        for _ in range(40):
            mem.tick()
    for i in range(16):
        mem.add("test_result", result(i))
    return ids


def hot_ids(mem: WorkingMemory) -> set[str]:
    return {item.id for item in mem.hot_items()}


def test_score_alone_would_evict_recent_edits():
    mem = WorkingMemory(max_tokens=1500, protect_recent_edits=0)
    edits = old_edits_then_fresh_results(mem)
    assert set(edits) - hot_ids(mem)  # the premise of the tests below


def test_the_latest_ten_edits_stay_when_score_alone_would_evict_them():
    mem = WorkingMemory(max_tokens=1500)
    edits = old_edits_then_fresh_results(mem)
    assert set(edits) <= hot_ids(mem)
    ctx = mem.assemble()
    assert set(edits) <= {item.id for item in ctx.items}
    assert ctx.tokens <= 1500 and mem.stats()["tokens"] <= 1500 - FOOTER_TOKENS
    cold = {e["id"]: e["kind"] for e in mem.cold_manifest()}
    assert cold and set(cold.values()) == {"test_result"}  # the results made way instead


def test_only_the_latest_edits_are_kept_whatever_their_score():
    mem = WorkingMemory(max_tokens=1500, protect_recent_edits=4)
    edits = old_edits_then_fresh_results(mem, edits=8)
    hot = hot_ids(mem)
    assert set(edits[-4:]) <= hot
    assert set(edits[:4]) - hot  # older edits go by score as before


def test_edits_that_alone_overflow_the_budget_fall_back_to_the_score_order():
    mem = WorkingMemory(max_tokens=300)  # room for three or four of these edits
    edits = []
    for i in range(10):
        edits.append(mem.add("edit", code(i)))
        mem.add("log", result(i))
        mem.tick()
        assert mem.stats()["tokens"] <= 300 - FOOTER_TOKENS
        assert mem.assemble().tokens <= 300
    hot = hot_ids(mem)
    assert edits[-1] in hot
    assert [e for e in edits if e in hot] == edits[-len(hot & set(edits)) :]  # the oldest went


def test_an_edit_larger_than_the_budget_leaves_a_stub_and_nothing_raises():
    mem = WorkingMemory(max_tokens=256)
    huge = "def huge():\n" + "".join(f"    x{i} = {i}\n" for i in range(300))
    for i in range(12):
        mem.add("edit", huge if i % 3 == 0 else code(i))
        assert mem.stats()["tokens"] <= 256 - FOOTER_TOKENS
    assert mem.assemble().tokens <= 256


def test_a_render_that_overflows_leaves_out_other_items_first():
    # A batch empties only a quarter of the room here, so that 600 tokens of other items
    # are left to leave out before the edits.
    mem = WorkingMemory(max_tokens=3000, low_water=0.75)
    edits = old_edits_then_fresh_results(mem)
    full = mem.assemble()
    assert set(edits) <= {item.id for item in full.items}
    # as if the joins had merged into many more tokens than the items were counted at
    mem.max_tokens = full.tokens - 600
    ctx = mem.assemble()
    kept = {item.id for item in ctx.items}
    assert ctx.tokens <= mem.max_tokens and len(kept) < len(full.items)
    assert set(edits) <= kept


def test_pinned_notes_past_their_share_once_demoted_keep_it_beside_the_latest_edits():
    mem = WorkingMemory(max_tokens=1500)
    notes = [mem.note(f"note {i}: " + result(i)) for i in range(12)]
    while mem.pinned_over():
        mem.demote(mem.pinned_over()[0])
    edits = old_edits_then_fresh_results(mem)
    pinned = [item for item in mem.hot_items() if item.pinned]
    assert sum(item.cost for item in pinned) <= (1500 - FOOTER_TOKENS) / 3
    assert 0 < len(pinned) < len(notes)
    assert set(edits) <= hot_ids(mem)


def test_the_latest_edits_survive_export_and_import():
    mem = WorkingMemory(max_tokens=1500, store=InMemStore())
    edits = old_edits_then_fresh_results(mem)
    state = json.loads(json.dumps(mem.export_state()))
    assert state["recent_edits"] == edits
    again = WorkingMemory(max_tokens=1500, store=mem.store)
    again.import_state(state)
    assert again.export_state() == state
    for i in range(16, 32):
        again.add("test_result", result(i))
    assert set(edits) <= hot_ids(again)


def test_a_state_saved_without_the_latest_edits_finds_them_among_the_hot_edits():
    mem = WorkingMemory(max_tokens=1500)
    edits = old_edits_then_fresh_results(mem)
    state = mem.export_state()
    del state["recent_edits"]
    again = WorkingMemory(max_tokens=1500, store=mem.store, protect_recent_edits=5)
    again.import_state(state)
    assert again.export_state()["recent_edits"] == edits[-5:]


def test_protect_recent_edits_cannot_be_negative():
    with pytest.raises(ValueError, match="protect_recent_edits"):
        WorkingMemory(protect_recent_edits=-1)


def test_counts_match_the_offline_tokenizer_special_tokens_included():
    mem = WorkingMemory()
    text = "<|endoftext|> ends here; <|fim_prefix|> too\n" + code(1)
    item_id = mem.add("edit", text)
    mem.assemble()
    item = next(i for i in mem.hot_items() if i.id == item_id)
    assert item.tokens == tokens.count(text)
    assert item.cost == tokens.count(item.header()) + item.tokens + 2
