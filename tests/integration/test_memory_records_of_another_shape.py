"""A record of another shape in the repository's long-term memory (a field holding what is not
of its type, as another tool, an older version or a teammate writes it) stops neither
`agent recall` nor a run: it is left out, and stays as it was written. The embedded store,
written with chromadb's own client; the commands in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from learnkit import planning_requests, request_text
from runkit import GOAL, add_median, facts, finish, plan, task

from agent_cli.llm.openai.embedder import OpenAIEmbedder
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.curation import topic_fields
from agent_cli.workspace.git.identity import repo_identity
from rawfactskit import raw_metas, raw_upsert

FACT = "calc/stats.py holds the mean function that tests/test_stats.py checks"
CHECK = "grep -q 'def median' calc/stats.py"
WRONG: dict[str, Any] = {  # one record each, wrong in that field alone
    "hit_count": "many",
    "ttl_days": "ninety",
    "confirmed_at": 20250101,
    "trust": 5,
}


def _store_with_foreign_records(
    repo: Path, url: str, snapshot_holds_them: bool
) -> tuple[str, dict[str, dict[str, Any]]]:
    """The repository's store: one fact of ours, then one record per WRONG field written
    beside it by chromadb's client. The recall snapshot then holds them too (a write of ours
    after theirs read the store whole), or there is none (as for a server, or a store past
    the snapshot's size): either way the run reads them. Our fact's id; their ids and
    metadata."""
    store = repo / ".agent" / "chroma"
    embedder = OpenAIEmbedder(base_url=url, api_key=None, model="fake-embed")
    topic = " ".join(repo_identity(repo).keys())
    with LongTermMemory(store, embedder) as mem:
        good = mem.add_fact(FACT, "harness", topic=topic)
    records = {
        f"imported-{field}": {
            **topic_fields(topic),
            "kind": "fact",
            "source": "wiki import",
            "trust": 0.9,
            "gist": f"imported record {field}",
            field: value,
        }
        for field, value in WRONG.items()
    }
    docs = [f"{FACT} (imported record {field})" for field in WRONG]
    raw_upsert(store, embedder, records, docs)
    snapshot.invalidate(store)
    if snapshot_holds_them:
        with LongTermMemory(store, embedder) as mem:
            mem.add_fact("tests/test_stats.py runs with pytest", "harness", topic=topic)
        assert "imported-hit_count" in snapshot.load(store)["facts"].get()["ids"]
    return good, records


def _stored(repo: Path, ids: list[str]) -> dict:
    return raw_metas(repo / ".agent" / "chroma", ids)


@pytest.mark.parametrize("snapshot_holds_them", [False, True], ids=["store", "snapshot"])
def test_recall_and_runs_leave_a_record_of_another_shape_out(
    demo_repo, fake_server, agent_in_process, snapshot_holds_them
):
    embeddings = fake_server([])
    good, records = _store_with_foreign_records(demo_repo, embeddings.url, snapshot_holds_them)
    env = {"AGENT_EMBEDDING_MODEL": "fake-embed", "AGENT_BASE_URL": embeddings.url}

    proc = agent_in_process("recall", FACT, "--json", "--k", "20", cwd=demo_repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert FACT in proc.stdout and "imported" not in proc.stdout

    srv = fake_server([plan(task(cmd=CHECK))])
    proc = agent_in_process(
        "run", GOAL, "--plan-only", "--json", cwd=demo_repo, env=env | {"AGENT_BASE_URL": srv.url}
    )
    assert proc.returncode == 0, proc.stderr
    planned = request_text(planning_requests(srv)[0])
    assert FACT in planned and "imported" not in planned

    if not snapshot_holds_them:  # a run counts hits on what it recalled, then learns
        srv = fake_server([plan(task(cmd=CHECK)), add_median(), finish(), facts()])
        proc = agent_in_process("run", GOAL, "--yes", "--base-url", srv.url, cwd=demo_repo, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert FACT in request_text(planning_requests(srv)[0])
        assert _stored(demo_repo, [good])[good]["hit_count"] == 1  # ours is counted
    assert _stored(demo_repo, list(records)) == records  # left as they were written
    proc = agent_in_process("memory", "forget", "imported-trust", cwd=demo_repo, env=env)
    assert proc.returncode == 0, proc.stderr
    assert set(_stored(demo_repo, list(records))) == set(records) - {"imported-trust"}
