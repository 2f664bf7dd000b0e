"""Pinned notes take at most their share of the context and are never evicted silently."""

from __future__ import annotations

import random

import pytest

from agent_cli.core import tokens
from agent_cli.memory import WorkingMemory

WORDS = [
    "the",
    "job",
    "queue",
    "retry",
    "worker",
    "report",
    "header",
    "cache",
    "token",
    "limit",
    "value",
    "result",
    "parse",
]
KINDS = ["log"] * 9 + ["tool_output"] * 5 + ["file", "file", "test_result", "test_result"]


def _text(rng: random.Random, kind: str, i: int, chars: int = 1200) -> str:
    """A distinct item of about `chars` characters."""
    words, length = [], 0
    while length < chars:
        words.append(rng.choice(WORDS) if rng.random() < 0.9 else f"{kind}_{i}")
        length += len(words[-1]) + 1
    lines = [" ".join(words[j : j + 12]) for j in range(0, len(words), 12)]
    return f"{kind} {i}\n" + "\n".join(lines)


def _session(mem: WorkingMemory, n: int) -> list[str]:
    """Feed `n` items of a coding session's mix, one edit and one note in twenty; edit ids."""
    rng = random.Random(n)
    edits = []
    for i in range(n):
        if i % 20 == 7:
            edits.append(mem.add("edit", _text(rng, "edit", i), summary=f"edit mod{i}.py"))
        elif i % 20 == 13:
            mem.note(_text(rng, "note", i))
        else:
            kind = KINDS[(i * 7) % len(KINDS)]
            mem.add(kind, _text(rng, kind, i))
        mem.tick()
    return edits


@pytest.mark.parametrize("n", [2000, pytest.param(10_000, marks=pytest.mark.slow)])
def test_the_latest_edits_stay_in_context_whatever_the_notes(n):
    mem = WorkingMemory(max_tokens=4000)
    edits = _session(mem, n)
    ctx = mem.assemble()
    shown = {item.id for item in ctx.items}
    assert set(edits[-10:]) <= shown
    assert ctx.tokens <= mem.max_tokens
    assert tokens.count(ctx.render()) <= mem.max_tokens
    notes = [item for item in mem.hot_items() if item.pinned]
    assert len(notes) == n // 20  # every note is still pinned and hot
    assert "more pinned notes:" in ctx.pinned and "(`recall` brings one back)" in ctx.pinned
    assert "pinned, shortened] note" in ctx.pinned


def test_pinned_notes_take_at_most_their_share():
    mem = WorkingMemory(max_tokens=2000, pinned_share=0.25)
    rng = random.Random(1)
    notes = [mem.note(_text(rng, "note", i, chars=600)) for i in range(12)]
    for i in range(30):
        mem.add("log", _text(rng, "log", i))
        mem.tick()
    ctx = mem.assemble()
    assert tokens.count(ctx.pinned) <= int((2000 - 64) * 0.25)
    assert mem.take_demoted() == [] and all(mem.hot_item(i) for i in notes)
    full = [i for i in notes if f"[note {i} pinned]" in ctx.render()]
    assert full and full[-1] == notes[-1]  # the latest in full
    oldest = mem.hot_item(notes[0])
    assert oldest is not None and oldest.text not in ctx.render() and notes[0] in ctx.pinned
    assert sum(1 for item in ctx.items if not item.pinned) > 0  # the rest keep the budget


def test_recall_of_a_shortened_note_shows_it_in_full():
    mem = WorkingMemory(max_tokens=1000, pinned_share=0.25)
    rng = random.Random(2)
    notes = [mem.note(_text(rng, "note", i, chars=300)) for i in range(8)]
    first = mem.hot_item(notes[0])
    assert first is not None and first.text not in mem.assemble().render()
    assert mem.recall(notes[0]) == [notes[0]]
    assert first.text in mem.assemble().render()


def test_a_note_is_rendered_once():
    mem = WorkingMemory()
    note = mem.note("keep the public signature of parse_header")
    mem.lay_out()
    assert mem.assemble().render().count("keep the public signature") == 1
    assert (
        f"[note {note} pinned] keep the public signature of parse_header" in mem.assemble().pinned
    )


def test_a_note_taken_since_leaves_the_pinned_section_as_it_was():
    # The section comes before the memory block: were it to change, a prompt cache would read
    # the whole block again. The newest note waits at the end of the block instead.
    mem = WorkingMemory(max_tokens=1000, pinned_share=0.25)
    rng = random.Random(3)
    notes = [mem.note(_text(rng, "note", i, chars=250)) for i in range(4)]
    mem.lay_out()
    before = mem.assemble()
    assert "pinned, shortened]" in before.pinned or "more pinned notes" in before.pinned
    for i in range(3):
        mem.add("log", _text(rng, "log", i, chars=300))
        mem.tick()
        assert mem.assemble().pinned == before.pinned
    newest = mem.note(_text(rng, "note", 9, chars=250))
    after = mem.assemble()
    assert after.pinned == before.pinned
    assert f"[note {newest} pinned" in after.memory and newest not in after.pinned
    share = int((1000 - 64) * 0.25)
    newest_line = next(line for line in after.memory.split("\n") if f"note {newest} " in line)
    assert tokens.count(after.pinned) + tokens.count(newest_line) <= share
    assert all(mem.hot_item(i) for i in [*notes, newest])
    mem.lay_out()  # the choice is made anew: the newest note in full first
    settled = mem.assemble()
    note = mem.hot_item(newest)
    assert note is not None and note.text in settled.pinned and newest not in settled.memory
