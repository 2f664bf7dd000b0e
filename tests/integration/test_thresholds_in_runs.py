"""A run recalls its episodes by its embedder's thresholds: real plan-only runs in this process.

The past episode is about as close to the goal under either embedder (cosine similarity
between 0.25 and 0.5): within the offline embedder's distance (0.75), beyond the seed's (0.5)
that an endpoint's `embedding_model` gets, unless the setting says otherwise.
"""

from __future__ import annotations

from pathlib import Path

from learnkit import planned_request, planning_requests, request_text, run_env  # noqa: F401
from runkit import GOAL, plan, task

from agent_cli.agent.learn.topic import repo_topic
from agent_cli.core.protocols import Embedder
from agent_cli.llm.openai.embedder import OpenAIEmbedder
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory
from episodekit import episode

OFFLINE_PAST = "Sort the numbers before taking the middle one"  # WordLlama: about 0.38
ENDPOINT_PAST = "Speed up the test suite"  # the fake server's embedding: about 0.40


def _remember(repo: Path, embedder: Embedder, goal: str) -> None:
    with LongTermMemory(repo / ".agent" / "chroma", embedder) as mem:
        past = episode("past-run", goal, files_touched=["calc/stats.py"], topic=repo_topic(repo))
        mem.add_episode(past)
        score = mem.recall(GOAL, kind="episode", min_score=-1.0)[0].score
        assert 0.25 < score < 0.5, score


def _planning(capsys, srv, repo: Path) -> str:
    return planned_request(capsys, srv, repo, GOAL)


def test_the_offline_embedder_recalls_the_episode_its_measured_distance_allows(
    run_env, fake_server, capsys, demo_repo
):
    run_env.delenv("AGENT_EMBEDDING_MODEL")
    _remember(demo_repo, WordLlamaEmbedder(), OFFLINE_PAST)
    assert OFFLINE_PAST in _planning(capsys, fake_server([plan(task())]), demo_repo)
    run_env.setenv("AGENT_MEMORY_EPISODE_MAX_DISTANCE", "0.5")
    assert OFFLINE_PAST not in _planning(capsys, fake_server([plan(task())]), demo_repo)


def test_an_endpoint_embedder_keeps_the_seeds_distance_unless_set(
    run_env, fake_server, capsys, demo_repo
):
    srv = fake_server([plan(task())])
    _remember(
        demo_repo, OpenAIEmbedder(base_url=srv.url, api_key=None, model="fake-embed"), ENDPOINT_PAST
    )
    assert ENDPOINT_PAST not in _planning(capsys, srv, demo_repo)
    run_env.setenv("AGENT_MEMORY_EPISODE_MAX_DISTANCE", "0.75")
    assert ENDPOINT_PAST in _planning(capsys, fake_server([plan(task())]), demo_repo)
