"""Four `agent run --worktree` runs at once in one repository, on its embedded long-term store:
each learns the same note and fact and one fact of its own; the store ends with every one of
them once, no duplicate, and no run saw a lock error or lost its memory writes."""

from __future__ import annotations

import collections
import subprocess

import pytest

from agent_cli.llm.fake.routes import ByGoal
from agent_cli.memory.longterm.chroma import LongTermMemory
from embedkit import HashEmbedder
from many.manykit import goal_of
from reliability.relkit import PY, call, cli_env, finish, plan, repo_with, task

pytestmark = pytest.mark.slow  # four `agent` processes at once
RUNS = 4
NOTE = "every check in this repository is a plain `test -f` of the file a task makes"
FACT = "the repository keeps one text file per task at its root"


def own_fact(n: int) -> str:
    return f"run {n} made file{n}.txt and nothing else"


def script(n: int) -> list[dict]:
    name = f"file{n}.txt"
    return [
        plan(task(goal_of(name), f"test -f {name}"), goal=goal_of(name)),
        call("note", text=NOTE),
        call("write_file", path=name, content=f"{name}\n"),
        finish(f"created {name}"),
        call(
            "submit_facts",
            facts=[{"text": FACT, "files": []}, {"text": own_fact(n), "files": [name]}],
        ),
    ]


class _Named(HashEmbedder):
    """Reads the store the runs wrote (their embedder's name), without embedding anything."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name


def test_four_worktree_runs_at_once_share_the_embedded_store_without_loss_or_duplicates(
    fake_server, tmp_path
):
    repo = repo_with(tmp_path / "repo")
    srv = fake_server(
        ByGoal({goal_of(f"file{n}.txt"): script(n) for n in range(RUNS)}, delay=0.3)
    )  # replies overlap
    env = cli_env(tmp_path / "home", AGENT_EMBEDDING_MODEL="fake-embed", OPENAI_API_KEY="sk-t")
    procs = [
        subprocess.Popen(
            [
                PY,
                "-m",
                "agent_cli",
                "run",
                "--worktree",
                "--yes",
                "--json",
                "--base-url",
                srv.url,
                goal_of(f"file{n}.txt"),
            ],
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for n in range(RUNS)
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, (out[-2000:], err[-2000:])
        said = (out + err).lower()
        assert "locked" not in said and "not updated" not in said and "unavailable" not in said
    assert srv.max_in_flight > 1  # the runs did overlap
    store = repo / ".agent" / "chroma"
    assert (
        not (repo / ".agent" / "memory-outbox.jsonl").exists()
        or not (repo / ".agent" / "memory-outbox.jsonl").read_text().strip()
    )  # every write reached the store, none waits for a later run
    with LongTermMemory(store, _Named("openai:fake-embed")) as mem:
        got = mem.collection("facts").get(include=["documents", "metadatas"])
        assert mem.counts()["episodes"] == RUNS
    docs = collections.Counter(got["documents"])
    assert max(docs.values()) == 1, docs  # nothing duplicated
    assert NOTE in docs and FACT in docs  # the shared ones merged: one each
    assert {own_fact(n) for n in range(RUNS)} <= set(docs)  # nothing lost
    shared = next(m for d, m in zip(got["documents"], got["metadatas"], strict=True) if d == NOTE)
    assert shared["confirmations"] == RUNS  # one writer at a time: no confirmation lost
    commands = sorted(m["command"] for m in got["metadatas"] if m["kind"] == "procedure")
    assert commands == [f"test -f file{n}.txt" for n in range(RUNS)]
