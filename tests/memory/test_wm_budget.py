"""Never over budget, never an exception: a seeded random mix of every operation."""

from __future__ import annotations

import json
import random

import pytest

from agent_cli.core import tokens
from agent_cli.memory import InMemStore, SqliteStore, WorkingMemory
from agent_cli.memory.working.memory import FOOTER_TOKENS
from agent_cli.memory.working.scoring import KIND_WEIGHTS
from embedkit import HashEmbedder

WORDS = [
    "retry",
    "worker",
    "queue",
    "parse",
    "header",
    "timeout",
    "cache",
    "index",
    "token",
    "budget",
    "error",
    "value",
    "Ünïcödé",
    "日本語",
    "émoji🙂",
    "<tool_output>",
    "]",
    "[",
    "\n\t",
]


def random_text(rng: random.Random, names: list[str]) -> str:
    """Code, prose, an oversized blob, an empty string or odd characters, at random."""
    roll = rng.random()
    if roll < 0.25:
        name = f"func_{rng.randrange(10_000)}"
        names.append(name)
        body = "\n".join(
            f"    v{j} = {rng.choice(names)}({j})" for j in range(rng.randrange(1, 30))
        )
        return f"def {name}(x):\n{body}\n    return x\n"
    if roll < 0.30:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(2000, 6000)))
    if roll < 0.33:
        return ""
    length = rng.randrange(1, 400)
    return " ".join(rng.choice(WORDS + names[-5:]) for _ in range(length))


def check(mem: WorkingMemory) -> None:
    """The budget holds for the hot zone and for what assemble() renders."""
    assert mem.stats()["tokens"] <= mem.max_tokens - FOOTER_TOKENS
    ctx = mem.assemble()
    parts = tokens.count(ctx.pinned) + tokens.count(ctx.memory)
    assert parts <= ctx.tokens <= parts + 1 and ctx.tokens <= mem.max_tokens
    assert tokens.count(ctx.render()) <= ctx.tokens
    hot_ids = [i.id for i in mem.hot_items()]
    assert len(hot_ids) == len(set(hot_ids))


def step(mem: WorkingMemory, rng: random.Random, names: list[str]) -> None:
    """One random operation."""
    roll = rng.random()
    if roll < 0.60:
        kind = rng.choice(list(KIND_WEIGHTS))
        mem.add(kind, random_text(rng, names), summary=rng.choice(["", "s" * 300, "retry.py"]))
    elif roll < 0.70:
        mem.note(random_text(rng, names))
    elif roll < 0.82:
        mem.tick()
    elif roll < 0.92:
        query = " ".join(rng.choice(names + WORDS) for _ in range(3)) if names else "x"
        mem.recall(query, k=rng.randrange(0, 6))
    elif roll < 0.96:
        mem.set_goal(random_text(rng, names)[:200])
    else:
        state = json.loads(json.dumps(mem.export_state()))
        mem.import_state(state)


@pytest.mark.parametrize("seed", range(12))
def test_a_random_mix_never_exceeds_the_budget(seed):
    rng = random.Random(seed)
    mem = WorkingMemory(
        store=InMemStore(),
        embedder=HashEmbedder(128) if seed % 2 else None,
        max_tokens=rng.choice([256, 300, 700, 1500, 4000]),
        recall_cooldown_steps=rng.randrange(0, 4),
        pinned_share=rng.choice([0.1, 1 / 3, 0.5, 1.0]),
    )
    names: list[str] = []
    for _ in range(150):
        step(mem, rng, names)
        check(mem)


def test_a_random_mix_on_sqlite_never_exceeds_the_budget(tmp_path):
    rng = random.Random(99)
    store = SqliteStore(tmp_path / "cold.sqlite")
    mem = WorkingMemory(
        store=store, embedder=HashEmbedder(128), max_tokens=700, recall_cooldown_steps=1
    )
    names: list[str] = []
    for _ in range(150):
        step(mem, rng, names)
        check(mem)
    assert mem.stats()["cold"] == len(mem.cold_manifest())
    store.close()


def test_a_smaller_budget_set_mid_run_is_held_at_once_and_from_then_on():
    # the model's window turned out smaller than the one the budget was made for
    rng = random.Random(7)
    mem = WorkingMemory(store=InMemStore(), embedder=HashEmbedder(128), max_tokens=4000)
    names: list[str] = []
    while mem.stats()["tokens"] < 2000:
        step(mem, rng, names)
    evictions = mem.stats()["evictions"]
    mem.set_budget(700)
    assert mem.max_tokens == 700 and mem.stats()["evictions"] > evictions
    check(mem)
    for _ in range(100):
        step(mem, rng, names)
        check(mem)
    with pytest.raises(ValueError, match="at least 256"):
        mem.set_budget(255)
