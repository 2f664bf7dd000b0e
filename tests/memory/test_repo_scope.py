"""Long-term memory keyed by the repository's identity: a match on either key recalls, other
repositories' items and episodes stay out, folder-name items are upgraded once."""

from __future__ import annotations

import pytest

from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.curation import IDENTITY_UPGRADE
from embedkit import HashEmbedder
from episodekit import episode

MINE = "git:1111 url:github.com/team/calc"
CLONE_ELSEWHERE = "git:1111"  # the same history, no remote
FORK_REWRITTEN = "git:9999 url:github.com/team/calc"  # another root, the same remote
OTHER = "git:2222 url:github.com/someone/calc"


@pytest.fixture
def mem(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as memory:
        yield memory


def _ids(found) -> set[str]:
    return {r.id for r in found}


def test_items_are_recalled_on_either_key_and_never_by_another_repository(mem):
    note = mem.curate("median sorts a copy of the list", topic=MINE, origin_event_id="e1")
    mem.add_procedure("pytest -q tests/test_stats.py", "median", topic=MINE)
    for topic in (MINE, CLONE_ELSEWHERE, FORK_REWRITTEN):
        found = mem.associate(
            "median sorts a copy", threshold=0.1, kinds=("note",), topics=[topic, ""]
        )
        assert _ids(found) == {note}, topic
        assert len(mem.procedures(topic)) == 1, topic
    assert mem.associate("median sorts a copy", threshold=0.1, topics=[OTHER, ""]) == []
    assert mem.procedures(OTHER) == []
    assert mem.recall("median sorts a copy", kind="note", min_score=0.1, topics=[OTHER]) == []


def test_the_same_note_in_two_repositories_is_two_items(mem):
    mine = mem.curate("tests run with pytest -q", topic=MINE, origin_event_id="e1")
    other = mem.curate("tests run with pytest -q", topic=OTHER, origin_event_id="e2")
    assert mine != other
    assert (
        mem.curate("tests run with pytest -q", topic=CLONE_ELSEWHERE, origin_event_id="e3") == mine
    )


def test_episodes_are_scoped_to_their_repository_and_carry_the_tools_used(mem):
    ep = episode("run-mine", "Add median to calc stats", topic=MINE, tools_used=["note", "run"])
    mem.add_episode(ep)
    mem.add_episode(episode("run-other", "Add median to calc stats", topic=OTHER))
    found = mem.recall("median calc stats", kind="episode", topics=[CLONE_ELSEWHERE])
    assert [r.id for r in found] == ["run-mine"]
    assert found[0].metadata["tools_used"] == ["note", "run"]
    assert "failed before" not in found[0].gist  # no signature matched
    everywhere = mem.recall("median calc stats", kind="episode")
    assert {r.id for r in everywhere} == {"run-mine", "run-other"}  # asked for: every repository


def test_items_under_the_folder_name_are_upgraded_once(mem):
    old = mem.curate("median sorts a copy", topic="calc", origin_event_id="e1")
    proc = mem.add_procedure("pytest -q", "median", topic="calc")
    assert mem.adopt("calc", MINE) == 2
    assert mem.adopt("calc", MINE) == 0  # nothing is left under the folder name
    got = mem.collection("facts").get(ids=[old, proc])
    for meta in got["metadatas"]:
        assert meta["topic"] == "git:1111" and meta["topic_alt"] == "url:github.com/team/calc"
        assert meta["upgraded"] == IDENTITY_UPGRADE and meta["legacy_topic"] == "calc"
    assert mem.procedures("calc") == []
    assert [r.id for r in mem.procedures(CLONE_ELSEWHERE)] == [proc]
    # the upgraded items merge with the same text or command kept afterwards
    assert mem.curate("median sorts a copy", topic=MINE, origin_event_id="e2") == old
    assert mem.add_procedure("pytest -q", "median again", topic=MINE) == proc


def test_associate_can_read_without_counting(mem):
    note = mem.curate("median sorts a copy", topic=MINE, origin_event_id="e1")
    mem.associate("median sorts a copy", threshold=0.1, topics=[MINE], count=False)
    assert mem.collection("facts").get(ids=[note])["metadatas"][0]["hit_count"] == 0
    mem.associate("median sorts a copy", threshold=0.1, topics=[MINE])
    assert mem.collection("facts").get(ids=[note])["metadatas"][0]["hit_count"] == 1


def test_repositories_whose_local_remotes_share_a_folder_with_a_space_share_nothing(mem, tmp_path):
    from agent_cli.agent.learn.topic import repo_topic, repo_topics
    from conftest import git, make_repo

    folder = tmp_path / "My Projects"
    clones = {}
    for name in ("billing", "calc"):
        origin = make_repo(folder / name)
        (origin / f"{name}.txt").write_text(f"{name}\n")  # another root commit each
        git(origin, "add", "-A")
        git(origin, "commit", "-q", "--amend", "-m", name)
        clones[name] = tmp_path / "clones" / name
        git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clones[name]))
    note = mem.curate(
        "billing rounds to cents", topic=repo_topic(clones["billing"]), origin_event_id="e1"
    )
    shared = False  # a shared `home`, where each repository keeps to its own items
    theirs = mem.recall("billing rounds", min_score=0.0, topics=repo_topics(clones["calc"], shared))
    mine = mem.recall(
        "billing rounds", min_score=0.0, topics=repo_topics(clones["billing"], shared)
    )
    assert [r.id for r in mine] == [note] and theirs == []


def test_items_under_a_folder_name_with_a_blank_are_recalled_before_their_upgrade(mem, tmp_path):
    from agent_cli.agent.learn.topic import repo_topic, repo_topics
    from conftest import make_repo

    repo = make_repo(tmp_path / "my calc")
    old = mem.curate("median sorts a copy", topic="", origin_event_id="e1")
    facts = mem.collection("facts")
    facts.update(ids=[old], metadatas=[{"topic": "my calc", "topic_alt": ""}])  # as filed before
    own = True  # the repository's own `.agent`, where folder-name items are its own
    found = mem.recall("median sorts", min_score=0.0, topics=repo_topics(repo, own))
    assert [r.id for r in found] == [old]
    assert mem.adopt("my calc", repo_topic(repo)) == 1
    assert facts.get(ids=[old])["metadatas"][0]["topic"] == repo_topic(repo)


def test_a_worktree_runs_recall_finds_the_items_filed_under_the_checkouts_folder(mem, tmp_path):
    from agent_cli.agent.learn.topic import repo_topics
    from conftest import git, make_repo

    repo = make_repo(tmp_path / "calc")
    tree = tmp_path / "calc" / ".agent" / "worktrees" / "20250314-090000-bbbb"
    git(repo, "worktree", "add", "-q", "-b", "agent/20250314-090000-bbbb", str(tree))
    old = mem.curate("median sorts a copy", topic="", origin_event_id="e1")
    mem.collection("facts").update(ids=[old], metadatas=[{"topic": "calc", "topic_alt": ""}])
    own = True  # the checkout's own `.agent`, which its worktree runs share
    assert "calc" in repo_topics(tree, own)
    found = mem.recall("median sorts", min_score=0.0, topics=repo_topics(tree, own))
    assert [r.id for r in found] == [old]
