"""A run whose embedded store was damaged since its snapshot was written (its database
emptied, or overwritten): the run stops before its plan in one line that names the file
and what to do, rather than planning from the snapshot and then losing what it learned;
`agent recall`, `agent memory show` and `agent doctor` say the same, and the file is left
as it is."""

from __future__ import annotations

import pytest

from agent_cli.llm.openai.embedder import OpenAIEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory

pytestmark = pytest.mark.slow  # `agent doctor` probes the server

GOAL = "Add median() to calc/stats.py"


def _tree(path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


@pytest.mark.parametrize(
    "damaged, says",
    [
        (b"", "chroma.sqlite3 is empty (0 bytes)"),
        (b"not a database " * 4096, "chroma.sqlite3 is not an SQLite database"),
    ],
)
def test_a_damaged_store_beside_its_snapshot_stops_every_command_the_same_way(
    agent_in_process, fake_server, demo_repo, damaged, says
):
    srv = fake_server([])
    store = demo_repo / ".agent" / "chroma"
    embedder = OpenAIEmbedder(base_url=srv.url, api_key=None, model="fake-embed")
    with LongTermMemory(store, embedder) as mem:  # a store, and its snapshot
        mem.add_fact("tests/test_stats.py checks calc.stats", "harness")
    assert (store / "agent-recall.npz").is_file()
    (store / "chroma.sqlite3").write_bytes(damaged)
    before = _tree(store)
    line = f"memory store at {store}: {says}"
    env = {"AGENT_EMBEDDING_MODEL": "fake-embed", "OPENAI_BASE_URL": srv.url}  # the store's

    run = agent_in_process("run", GOAL, "--yes", cwd=demo_repo, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stderr.strip().startswith(f"error: {line}"), run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "move the directory aside" in run.stderr
    assert srv.chat_requests == []  # no plan made from the snapshot

    for args in (["recall", "calc.stats"], ["memory", "show"]):
        proc = agent_in_process(*args, cwd=demo_repo, env=env)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert proc.stderr.strip() == run.stderr.strip(), args

    doctor = agent_in_process("doctor", cwd=demo_repo, env=env)
    assert doctor.returncode != 0
    (said,) = [ln for ln in doctor.stdout.splitlines() if "memory store at" in ln]
    assert line in said and "FAIL" in said
    assert _tree(store) == before  # nothing written into the file, moved or deleted
