"""The repository's memory digest: all of a small store, the closest and most used of a large one."""

from __future__ import annotations

import hashlib
import uuid

import pytest

from agent_cli.agent.learn import digest
from agent_cli.agent.learn.learning import PLAN_MIN_SCORE, recall_for_run
from agent_cli.core import tokens
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
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


def _commits(i: int) -> str:
    ids = ", ".join(hashlib.sha1(f"{i}-{j}".encode()).hexdigest()[:12] for j in range(20))
    return f"flaky test {i} bisected to commits {ids}"


DENSE = {  # text that tokenizes far finer than the estimate's 3.1 characters a token
    "commit ids": _commits,
    "addresses": lambda i: "hosts " + ", ".join(f"10.{i}.{j}.{i * j % 251}" for j in range(25)),
    "uuids": lambda i: "runs " + " ".join(str(uuid.UUID(int=i * 7919 + j)) for j in range(8)),
    "digits": lambda i: "seeds " + " ".join(str(int(hashlib.sha1(b"%d" % i).hexdigest(), 16))),
    "chinese": lambda i: (
        f"模块{i}保存发票舍入规则以及检查这些规则的测试，金额必须四舍五入到分，不能截断" * 3
    ),
    "english": lambda i: (
        f"module{i} keeps the invoice rounding rules and the tests that check them" * 3
    ),
}


@pytest.mark.parametrize("kind", DENSE)
def test_the_block_a_run_sends_keeps_to_its_token_share_whatever_the_text(store, kind):
    for i in range(60):
        store.add_fact(DENSE[kind](i), "test", trust=1.0, topic=TOPIC)
    found = recall_for_run(store, "fix the invoice rounding", [TOPIC], lambda _: None)
    block = digest.render(found, 1500)  # as a run renders it (session.py)
    assert tokens.count(block) <= 1500  # exactly, header and the line counting the rest in
    assert found.items and found.left_out == 60 - len(found.items)
    assert block.count("\n- fact ") == len(found.items) and found.more_line() in block
    hits = {r.id: r.hit_count for r in store.listing([TOPIC])}  # on what was sent, only
    assert sorted(hits.values()) == [0] * found.left_out + [1] * len(found.items)


def test_a_store_that_fits_by_the_estimate_but_not_by_count_is_trimmed_and_says_so(store):
    for i in range(14):  # a small store, all of it by the estimate: 1.7 characters a token
        store.add_fact(_commits(i), "test", trust=1.0, topic=TOPIC)
    assert digest.build(store, "find the flaky commit", [TOPIC], 1500, min_score=0.1).left_out == 0
    found = recall_for_run(store, "find the flaky commit", [TOPIC], lambda _: None)
    block = digest.render(found, 1500)
    assert tokens.count(block) <= 1500 and 0 < found.left_out == 14 - len(found.items)
    assert block.splitlines()[-2] == found.more_line()  # the last line inside the fence


def test_a_small_share_holds_what_it_can_and_never_more(store):
    for i in range(30):
        store.add_fact(_commits(i), "test", trust=1.0, topic=TOPIC)
    for share in (0, 20, 57, 58, 120, 400):
        found = recall_for_run(
            store, "find the flaky commit", [TOPIC], lambda _: None, digest_tokens=share
        )
        block = digest.render(found, share)
        assert tokens.count(block) <= share, share
        assert (block == "") == (share < 58)  # the line counting the rest alone takes 58
        assert found.left_out == 30 - len(found.items)


def test_the_count_of_the_rest_is_the_repositorys_beyond_what_is_read_to_choose(store, monkeypatch):
    monkeypatch.setattr(digest, "SCAN", 20)  # as a store past 2,000 items is read: a part
    _fill(store, 150)
    _fill(store, 5, topic=OTHER)  # another repository's
    store.add_fact("a doubtful claim", "model", trust=0.3, topic=TOPIC)  # never listed
    got = digest.build(store, "what about module7", [TOPIC], 600, min_score=0.1)
    assert got.items and got.left_out == 150 - len(got.items)
    assert store.listed_count([TOPIC]) == 150 and store.listed_count([OTHER]) == 5


def test_a_run_reading_the_snapshot_counts_the_repositorys_items_too(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as mem:
        _fill(mem, 30)
        _fill(mem, 4, topic=OTHER)
    with LazyLongTermMemory(tmp_path / "chroma", HashEmbedder(), read_only=True) as lazy:
        lazy.prepare()  # the snapshot answers: the store is not opened
        assert lazy.listed_count([TOPIC]) == 30 and lazy.listed_count([OTHER]) == 4
    with LazyLongTermMemory(tmp_path / "nothing", HashEmbedder(), read_only=True) as none:
        assert none.listed_count([TOPIC]) == 0
