"""Revising working-memory items in place: stale views become stubs, pinned notes are unpinned."""

from __future__ import annotations

import pytest

from agent_cli.memory import InMemStore, WorkingMemory


def test_supersede_replaces_a_hot_item_and_its_cold_record():
    mem = WorkingMemory(max_tokens=400, store=InMemStore())
    read = mem.add("file", "def old():\n    return 1\n" * 30, summary="read a.py")
    for i in range(8):
        mem.add("tool_output", f"output {i} " + "x " * 60)
        mem.tick()
    assert read not in {i.id for i in mem.hot_items()}  # evicted: only the cold record has it
    assert mem.supersede(read, "(a.py has changed since this read)")
    assert mem.store.get(read)["text"] == "(a.py has changed since this read)"
    hot = mem.add("file", "def new():\n    return 2\n" * 5, summary="read a.py again")
    before = mem.stats()["tokens"]
    assert mem.supersede(hot, "(a.py has changed since this read)")
    item = next(i for i in mem.hot_items() if i.id == hot)
    assert item.text == "(a.py has changed since this read)" and item.symbols == ()
    assert mem.stats()["tokens"] < before
    assert "def new" not in mem.assemble().render()
    assert not mem.supersede("m999", "x")


def test_unpin_makes_an_ordinary_note_and_refuses_anything_else():
    mem = WorkingMemory(max_tokens=1000)
    note = mem.note("keep the public API stable")
    other = mem.add("tool_output", "ls output")
    mem.unpin(note)
    item = next(i for i in mem.hot_items() if i.id == note)
    assert not item.pinned and item.kind == "note" and "pinned" not in item.header()
    with pytest.raises(ValueError, match="not a pinned note"):
        mem.unpin(other)
    with pytest.raises(ValueError, match="not a pinned note"):
        mem.unpin(note)


def test_demotions_are_reported_once():
    mem = WorkingMemory(max_tokens=1000, pinned_share=0.1)
    ids = [mem.note(f"note {i}: " + "detail " * 40) for i in range(3)]
    assert mem.pinned_over()[0] == ids[0]
    mem.demote(ids[0])
    assert mem.take_demoted() == [ids[0]] and mem.take_demoted() == []


def test_pinned_notes_that_alone_overflow_the_budget_stay_pinned_and_are_shown_shortened():
    mem = WorkingMemory(max_tokens=300, pinned_share=1.0)
    ids = [mem.note(f"note {i}: " + "detail " * 60) for i in range(4)]
    assert mem.take_demoted() == []
    assert {i.id for i in mem.hot_items() if i.pinned} == set(ids)
    ctx = mem.assemble()
    assert ctx.tokens <= mem.max_tokens
    assert "2 more pinned notes: m1, m2 (`recall` brings one back)" in ctx.pinned
    assert "note 0: detail" not in ctx.render() and "note 3: detail" in ctx.render()
    assert mem.recall(ids[0]) == [ids[0]]
    assert "note 0: detail" in mem.assemble().render()
