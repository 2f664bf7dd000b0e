"""The repository's memory digest: all of a small store, the closest and most used of a large one."""

from __future__ import annotations

import pytest

from agent_cli.agent.learn import digest
from agent_cli.agent.learn.learning import PLAN_MIN_SCORE, recall_for_run
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.records import format_for_context
from embedkit import HashEmbedder

TOPIC = "rootcommit123 github.com/acme/shop"
OTHER = "rootcommit999 github.com/acme/other"


@pytest.fixture
def store(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as mem:
        yield mem


def _fill(store, n: int, topic: str = TOPIC, words: int = 40) -> list[str]:
    filler = " ".join(f"word{j}" for j in range(words))
    return [
        store.add_fact(f"fact {i} about module{i}: {filler}", "test", trust=1.0, topic=topic)
        for i in range(n)
    ]


def test_a_small_store_is_sent_whole_whatever_the_goal_says(store):
    store.add_fact("the tests need TZ=UTC or they fail on dates", "test", topic=TOPIC)
    store.curate("never edit generated/ by hand", topic=TOPIC, origin_event_id="e1")
    store.add_procedure("python -m pytest -q tests", "run tests", topic=TOPIC)
    store.add_fact("billing lives in another service", "test", topic=OTHER)
    got = digest.build(store, "make the shop page faster", [TOPIC], 1500, min_score=0.3)
    texts = {r.text for r in got.items}
    assert {"the tests need TZ=UTC or they fail on dates", "never edit generated/ by hand"} <= texts
    assert any(r.kind == "procedure" for r in got.items)
    assert "billing lives in another service" not in texts  # another repository's
    assert got.left_out == 0 and got.more_line() == ""


def test_a_large_store_sends_the_closest_and_most_used_within_the_share(store):
    _fill(store, 120)
    needle = store.add_fact("the invoice rounding lives in shop/money.py", "test", topic=TOPIC)
    got = digest.build(store, "fix the invoice rounding", [TOPIC], 1500, min_score=0.1)
    assert got.items[0].id == needle  # what the goal is about comes first
    assert sum(digest.cost(r) for r in got.items) <= 1500
    assert got.left_out == 121 - len(got.items) > 0
    assert f"{got.left_out} more facts, notes and procedures" in got.more_line()
    block = format_for_context(
        got.items, max_chars=4 * 1500, max_lines=len(got.items), more=got.more_line()
    )
    assert block.rstrip().endswith("</retrieved_memory>") and "recall tool" in block


def test_the_most_used_come_before_the_rest_beyond_the_share(store):
    ids = _fill(store, 120)
    used = store.listing([TOPIC])  # every item, to pick one to count
    favourite = next(r for r in used if r.id == ids[77])
    for _ in range(3):
        store.count_hits([favourite])
    # a goal sharing no name with any item ("words" would match their "word0", "word1", ...)
    got = digest.build(store, "unrelated terms entirely", [TOPIC], 600, min_score=0.99)
    assert got.items and got.items[0].id == ids[77]


def test_hits_move_for_what_the_digest_included_only(store):
    _fill(store, 120)
    found = recall_for_run(store, "what about module7", [TOPIC], lambda _: None, digest_tokens=400)
    included = {r.id for r in found.items}
    counts = {r.id: r.hit_count for r in store.listing([TOPIC])}
    assert included and all(counts[i] == 1 for i in included)
    assert all(n == 0 for i, n in counts.items() if i not in included)


def test_a_zero_share_sends_no_item(store):
    _fill(store, 3)
    got = digest.build(store, "anything", [TOPIC], 0, min_score=PLAN_MIN_SCORE)
    assert got.items == [] and got.left_out == 3


@pytest.mark.parametrize(
    "line",
    [
        "module{i} keeps the invoice rounding rules and the tests that check them",
        "模块{i}保存发票舍入规则以及检查这些规则的测试，金额必须四舍五入到分，不能截断",
    ],
)
def test_the_digest_keeps_to_its_token_share_in_a_dense_script_too(store, line):
    from agent_cli.core import tokens

    for i in range(150):
        store.add_fact(line.format(i=i) * 3, "test", trust=1.0, topic=TOPIC)
    got = digest.build(store, "fix the invoice rounding", [TOPIC], 1500, min_score=0.1)
    block = format_for_context(  # as a run renders it (session.py)
        got.items, max_chars=digest.chars(1500), max_lines=len(got.items), brief=True
    )
    assert got.items and got.left_out > 0
    assert tokens.count(block) <= 1500
