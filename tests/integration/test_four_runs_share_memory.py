"""Four scripted `agent run`s in four clones at once, sharing one `chroma run` server's memory:
each learns the same note, procedure and fact and one fact of its own; the server ends with
every one of them once, no duplicate, and no run saw a lock error."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path

import pytest
from runkit import GOAL, PYTEST, add_median, facts, finish, plan, task

from agent_cli.llm.fake.server import FakeOpenAIServer
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.place import ChromaServer
from conftest import git
from embedkit import HashEmbedder

pytestmark = pytest.mark.slow  # four `agent` processes and a `chroma run` server
RUNS = 4
NOTE = "median in calc/stats.py sorts a copy of its input"
FACT = "calc/stats.py holds the statistics functions that tests/test_stats.py checks"


def own_fact(n: int) -> str:
    return f"clone {'abcd'[n]} was the one that ran the {['first', 'second', 'third', 'fourth'][n]} check"


def _clone(origin: Path, path: Path) -> Path:
    git(origin.parent, "clone", "-q", str(origin), str(path))
    git(path, "config", "user.email", "dev@example.com")
    git(path, "config", "user.name", "Dev")
    return path


def test_four_runs_at_once_share_one_server_memory(
    demo_repo, tmp_path, agent_env, chroma_server, chroma_database
):
    servers = [
        FakeOpenAIServer(
            [
                plan(task()),
                {"tool": "note", "args": {"text": NOTE}},
                add_median(),
                finish(),
                facts((FACT, ["calc/stats.py"]), (own_fact(n), [])),
            ]
        ).start()
        for n in range(RUNS)
    ]
    procs = []
    try:
        for n, srv in enumerate(servers):
            clone = _clone(demo_repo, tmp_path / f"clone{n}")
            env = {
                **agent_env,
                "AGENT_MEMORY_URL": chroma_server.url,
                "AGENT_MEMORY_DATABASE": chroma_database,
                "AGENT_EMBEDDING_MODEL": "fake-embed",
                "OPENAI_BASE_URL": srv.url,
                "OPENAI_API_KEY": "sk-test",
            }
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "agent_cli", "run", GOAL, "--yes", "--json"],
                    cwd=clone,
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, (out[-2000:], err[-2000:])
            assert "locked" not in out + err and "unavailable" not in out + err, err[-2000:]
    finally:
        for srv in servers:
            srv.stop()
    with LongTermMemory(
        ChromaServer(chroma_server.url, database=chroma_database), _Named("openai:fake-embed")
    ) as mem:
        got = mem.collection("facts").get(include=["documents", "metadatas"])
        docs = collections.Counter(got["documents"])
        assert mem.counts()["episodes"] == RUNS
    assert max(docs.values()) == 1, docs  # nothing duplicated
    texts = set(docs)
    assert NOTE in texts and FACT in texts  # merged: one each
    assert {own_fact(n) for n in range(RUNS)} <= texts  # nothing lost
    procedures = [m for m in got["metadatas"] if m["kind"] == "procedure"]
    assert [m["command"] for m in procedures] == [PYTEST]
    assert 1 <= procedures[0]["confirmations"] <= RUNS
    assert len(got["ids"]) == 2 + RUNS + 1


class _Named(HashEmbedder):
    """Reads the store the runs wrote (their embedder's name), without embedding anything."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
