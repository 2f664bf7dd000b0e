"""Recall thresholds follow the embedder: the offline one's measured values, an endpoint's the seed's."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_cli.agent.learn.learning import recall_for_run
from agent_cli.cli.config.settings import load_settings
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.reads import MIN_SCORE
from agent_cli.memory.thresholds import OFFLINE, SEED, Thresholds
from embedkit import HashEmbedder
from episodekit import episode

TOPIC = "rootcommit123 github.com/acme/shop"


def _settings(tmp_path: Path, **env: str):
    return load_settings(tmp_path, None, env, tmp_path / "missing-user-rc")


def test_the_offline_embedder_and_an_endpoint_model_get_different_defaults(tmp_path):
    offline = _settings(tmp_path).recall_thresholds()
    endpoint = _settings(tmp_path, AGENT_EMBEDDING_MODEL="text-embedding-3-small")
    assert offline == OFFLINE
    assert endpoint.recall_thresholds() == SEED
    assert Thresholds(associate_k=3, associate_min_score=0.78, episode_max_distance=0.5) == SEED
    assert offline.associate_min_score < SEED.associate_min_score
    assert offline.episode_max_distance > SEED.episode_max_distance


def test_a_threshold_set_is_kept_whichever_the_embedder(tmp_path):
    for model in ({}, {"AGENT_EMBEDDING_MODEL": "text-embedding-3-small"}):
        got = _settings(
            tmp_path, AGENT_MEMORY_ASSOCIATE_MIN_SCORE="0.4", AGENT_MEMORY_ASSOCIATE_K="7", **model
        ).recall_thresholds()
        base = SEED if model else OFFLINE
        assert (got.associate_k, got.associate_min_score) == (7, 0.4)
        assert got.episode_max_distance == base.episode_max_distance


def test_an_episode_distance_outside_zero_to_two_is_refused(tmp_path):
    from agent_cli.core.errors import ConfigError

    with pytest.raises(ConfigError, match="memory_episode_max_distance"):
        _settings(tmp_path, AGENT_MEMORY_EPISODE_MAX_DISTANCE="3")


@pytest.fixture
def store(tmp_path):
    with LongTermMemory(tmp_path / "chroma", HashEmbedder()) as mem:
        yield mem


def test_the_digest_takes_episodes_as_far_as_the_thresholds_allow(store):
    store.add_episode(
        episode("r1", "speed up the checkout page of the shop", topic=TOPIC, files_touched=[])
    )
    goal = "checkout totals are rounded wrongly for invoices in euros and pounds"
    score = store.recall(goal, kind="episode", min_score=-1.0, topics=[TOPIC])[0].score
    assert 0 < score < MIN_SCORE  # below the store's own floor: only the thresholds bring it

    def episodes(distance: float) -> list[str]:
        found = recall_for_run(
            store,
            goal,
            [TOPIC],
            lambda _: None,
            count=False,
            thresholds=Thresholds(10, 0.2, episode_max_distance=distance),
        )
        return [r.id for r in found.items if r.kind == "episode"]

    assert episodes(1 - score + 0.02) == ["r1"]
    assert episodes(1 - score - 0.02) == []


def test_the_digest_takes_as_many_associated_items_as_the_thresholds_say(store):
    for i in range(120):  # more than the share holds: the digest chooses; no two alike
        filler = " ".join(f"word{i}x{j}" for j in range(40))
        store.add_fact(f"fact {i} about module{i}: {filler}", "test", trust=1.0, topic=TOPIC)
    # used before: they come right after associate's matches, so a match past k has no room
    store.count_hits(store.listing([TOPIC], limit=1000))
    # close to the goal by embedding, sharing no name with it (only words BM25 leaves out)
    close = [f"the and of to in on at {tag}" for tag in ("xa", "xb", "xc", "xd", "xe")]
    for text in close:
        store.add_fact(text, "test", trust=1.0, topic=TOPIC)
    goal = "the and of to in on at"

    def associated(k: int) -> int:
        found = recall_for_run(
            store,
            goal,
            [TOPIC],
            lambda _: None,
            count=False,
            thresholds=Thresholds(k, 0.2, episode_max_distance=0.75),
        )
        return sum(r.text in close for r in found.items)

    assert associated(1) == 1
    assert associated(10) == 5


def test_doctor_shows_the_thresholds_in_effect_and_whose_defaults_they_are(tmp_path):
    values, sources = _settings(tmp_path).shown()
    assert values["memory_associate_min_score"] == OFFLINE.associate_min_score
    assert sources["memory_associate_min_score"] == "default for the offline embedder"
    model = "text-embedding-3-small"
    values, sources = _settings(tmp_path, AGENT_EMBEDDING_MODEL=model).shown()
    assert (values["memory_associate_k"], values["memory_episode_max_distance"]) == (3, 0.5)
    assert sources["memory_associate_k"] == f"default for {model}"
    values, sources = _settings(tmp_path, AGENT_MEMORY_ASSOCIATE_K="4").shown()
    assert values["memory_associate_k"] == 4
    assert sources["memory_associate_k"] == "env AGENT_MEMORY_ASSOCIATE_K"
