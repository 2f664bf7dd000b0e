"""How a large store's items are ordered for the digest: rankings fused, repeats put off, names
matched inside compounds, and brief lines that fill the share."""

from __future__ import annotations

from agent_cli.agent.learn import digest, rank
from agent_cli.agent.learn.lexical import scores
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.records import Result, format_for_context
from embedkit import HashEmbedder

TOPIC = "rootcommit123 github.com/acme/shop"


def test_an_item_high_in_both_rankings_comes_before_one_first_in_only_one():
    got = rank.fuse([["a", "both", "c"], ["b", "both", "d"]])
    assert max(got, key=lambda k: got[k]) == "both"
    assert got["a"] == got["b"] > got["c"] == got["d"]


def test_an_item_that_repeats_an_earlier_one_in_other_words_waits_its_turn():
    items = [
        "bump_major is defined in src/semver/version.py",
        "src/semver/version.py holds bump_major",  # the first, said again
        "the changelog fragments go in changelog.d",
        "The code of bump_major lives in src/semver/version.py",  # and again
    ]
    got = rank.distinct_first(items, str)
    assert got == [items[0], items[2], items[1], items[3]]


def test_past_its_head_the_order_is_left_as_it_is():
    items = ["alpha beta gamma", "alpha beta gamma", "delta epsilon zeta", "alpha beta gamma"]
    assert rank.distinct_first(items, str, head=1) == items


def test_a_word_inside_a_compound_or_an_abbreviation_counts_for_half():
    items = [
        "naturalsize() picks the suffixes",  # `size` ends the name
        "translations live under locale/<lang>/LC_MESSAGES",  # `lang` begins `language`
        "the changelog is generated",
    ]
    size, lang, nothing = scores("file sizes in the language files", items)
    assert size > 0 and lang > 0 and nothing == 0.0
    whole, part = scores("the size", ["the size of it", "the naturalsize of it"])
    assert whole > part > 0


def test_equal_items_tie_exactly_whatever_the_query_words_order():
    texts = ["parse error message in cli.py", "cli.py parse error message"]
    for query in ("cli message parse error", "error parse message cli"):
        first, second = scores(query, texts)
        assert first == second


def test_a_brief_line_keeps_kind_id_marks_text_and_date_only():
    item = Result(0.42, "fact", "mem_1", "billing lives in shop/pay.py", "", "run r1", "2026-11-02")
    item.trust, item.stale = 0.5, True
    block = format_for_context([item], brief=True)
    assert (
        '- fact mem_1 trust="0.5" stale="true": billing lives in shop/pay.py (2026-11-02)' in block
    )
    assert "source:" not in block and "score" not in block
    assert "source: run r1" in format_for_context([item])  # the full line, as before


def test_the_digest_of_a_large_store_fills_its_share_and_every_line_is_rendered(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        for i in range(150):
            store.add_fact(f"fact {i} about module{i}: " + "word " * 30, "t", topic=TOPIC)
        got = digest.build(store, "fix module7 and module9", [TOPIC], 1500, min_score=0.3)
        block = digest.render(digest.fit(got, 1500), 1500)
    assert sum(digest.cost(r) for r in got.items) <= 1500
    assert block.count("\n- fact ") == len(got.items)  # the exact count keeps them all
    assert sum(digest.cost(r) for r in got.items) > 1500 - 2 * max(map(digest.cost, got.items))


def test_an_item_the_names_and_the_embedding_both_find_comes_first(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        for i in range(150):
            store.add_fact(
                f"fact {i}: " + " ".join(f"filler{j}" for j in range(30)), "t", topic=TOPIC
            )
        named = store.add_fact("the rounding of invoices happens in money.py", "t", topic=TOPIC)
        also = store.add_fact("invoices are numbered per shop", "t", topic=TOPIC)
        got = digest.build(store, "invoices rounding is off by a cent", [TOPIC], 800, min_score=0.1)
    ids = [r.id for r in got.items]
    assert ids[0] == named and also in ids
