"""Words a goal shares with a remembered item, by name: identifiers, their parts, their stems."""

from __future__ import annotations

from agent_cli.agent.learn import digest
from agent_cli.agent.learn.lexical import scores, words
from agent_cli.memory.longterm.chroma import LongTermMemory
from embedkit import HashEmbedder


def test_identifiers_count_whole_and_by_their_parts():
    assert {"bump_major", "bump", "major"} <= set(words("I touched bump_major"))
    assert {"create", "parser"} <= set(words("createParser builds it"))
    assert "bump" in words("the bumping tests")
    assert not {"the", "run", "tests", "how"} & set(words("how do I run the tests"))


def test_an_item_sharing_a_name_with_the_goal_scores_above_the_rest():
    items = [
        "procedure: python -m pytest -q tests/test_bump.py (Add a test that bump_minor resets)",
        "compare orders prereleases before releases",
        "the changelog is in CHANGELOG.rst",
    ]
    got = scores("Run the version bumping tests, I touched bump_major", items)
    assert got[0] > 0 and got[1] == got[2] == 0.0
    assert scores("", items) == [0.0, 0.0, 0.0]


def test_beyond_its_share_the_digest_takes_what_shares_a_name_with_the_goal(tmp_path):
    topic = "root1 github.com/acme/semver"
    filler = " ".join(f"alpha{j}" for j in range(40))
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as store:
        for i in range(150):
            store.add_fact(f"fact {i}: {filler}", "test", topic=topic)
        needle = store.add_fact(
            "createparser() in cli.py defines the subcommands", "t", topic=topic
        )
        got = digest.build(
            store, "where do I add a subcommand?", [topic], 800, min_score=0.99
        )  # no embedding match at all: only the names can find it
    assert needle in [r.id for r in got.items]
