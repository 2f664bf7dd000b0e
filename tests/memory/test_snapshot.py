"""The recall snapshot of long-term memory: the same answers as the store, no chromadb, never stale."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta

import pytest

from agent_cli.agent.learn.learning import recall_for_run
from agent_cli.core.errors import EmbedderMismatch
from agent_cli.core.models import Fix
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.lazy import LazyLongTermMemory, SnapshotMemory
from embedkit import HashEmbedder
from episodekit import episode

SIG = "tests/test_parser.py::test_quotes failed at tests/test_parser.py:42: AssertionError"
QUERIES = [
    "database sessions",
    "how are the tests run here",
    "parser quotes failing",
    "release tags",
    "CI on GitHub Actions",
    "add a cache",
    "pizza recipe with tomatoes",
]


@pytest.fixture(scope="module")
def embedder():
    return WordLlamaEmbedder()


def fill(memory: LongTermMemory) -> None:
    memory.add_fact(
        "The database is PostgreSQL 16, reached through SQLAlchemy sessions",
        "harness",
        topic="proj",
    )
    memory.add_fact("Releases are tagged vYYYY.MM", "harness", topic="other")
    memory.add_fact("The model said the tests are slow", "model", trust=0.4, topic="proj")
    memory.curate(
        "Quoted strings are tokenized in src/lexer.py", topic="proj", origin_event_id="e1"
    )
    memory.add_procedure("python -m pytest -q", "make the parser pass", topic="proj")
    memory.add_episode(episode("r-db", "Refactor the database layer to use sessions"))
    memory.add_episode(
        episode(
            "r-parse",
            "Make quoted strings parse",
            failure_signatures=[SIG],
            fixes=[
                Fix(signatures=[SIG], task="fix quotes", summary="escaped quotes in the tokenizer")
            ],
        )
    )


def reads(memory: LongTermMemory) -> list:
    """Everything a run reads, as plain data (scores rounded: exact search against HNSW)."""
    out = []
    for q in QUERIES:
        for kind in ("all", "episode", "fact", "note"):
            out.append(
                [
                    (r.kind, r.id, round(r.score, 4), r.gist, r.hit_count)
                    for r in memory.recall(q, kind=kind)
                ]
            )
    out.append([r.id for r in memory.procedures("proj")])
    out.append([(r.id, r.gist) for r in memory.fixes_for([SIG])])
    return out


@pytest.fixture
def store(tmp_path, embedder):
    path = tmp_path / "chroma"
    with LongTermMemory(path, embedder) as memory:
        fill(memory)
    return path


def test_closing_a_changed_store_writes_a_snapshot_that_answers_as_the_store_does(store, embedder):
    assert snapshot.exists(store)
    cols = snapshot.load(store)
    assert {name: col.count() for name, col in cols.items()} == {"facts": 5, "episodes": 3}
    assert all("episode" not in m for m in cols["episodes"].get()["metadatas"])  # the bulky record
    with LongTermMemory(store, embedder) as memory:
        from_store = reads(memory)
    from_snapshot = reads(SnapshotMemory(cols, store, embedder))
    assert from_snapshot == from_store
    assert any(from_store[: len(QUERIES) * 4]), "the queries find something"
    assert snapshot.exists(store), "reading leaves the snapshot in place"


def test_hits_counted_on_the_snapshot_wait_and_are_written_once(store, embedder):
    reader = SnapshotMemory(snapshot.load(store), store, embedder)
    found = reader.associate("PostgreSQL database sessions", threshold=0.3, topics=["proj"])
    assert found and all(r.hit_count == 1 for r in found)
    assert [ids for ids, _ in reader.pending] == [[r.id for r in found]]
    with LongTermMemory(store, embedder) as memory:
        assert all(r.hit_count == 0 for r in memory.recall("PostgreSQL database", kind="fact"))
        for ids, metas in reader.pending:
            memory.write_hits(ids, metas)
        assert not snapshot.exists(store), "a write removes the snapshot first"
        counts = {r.id: r.hit_count for r in memory.recall("PostgreSQL database", kind="fact")}
    assert all(counts[r.id] == 1 for r in found)
    fresh = SnapshotMemory(snapshot.load(store), store, embedder)  # written again on close
    assert {r.id: r.hit_count for r in fresh.recall("PostgreSQL database", kind="fact")} == counts


def test_every_kind_of_change_removes_the_snapshot_until_the_store_is_closed(store, embedder):
    changes = [
        lambda m: m.add_fact("CI runs on GitHub Actions", "harness"),
        lambda m: m.forget("r-db"),
        lambda m: m.expire(ttl_days=0.0000001),
        lambda m: m.add_episode(episode("r-new", "Add a cache")),
    ]
    for change in changes:
        with LongTermMemory(store, embedder) as memory:
            before = reads(memory)
            change(memory)
            assert not snapshot.exists(store)
            after = reads(memory)
        assert before != after, "each change is visible to a read"
        assert reads(SnapshotMemory(snapshot.load(store), store, embedder)) == after


class Watched(LongTermMemory):
    """A LongTermMemory that notes which rows it reads back to write its snapshot."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read_back: list[tuple[str, list[str] | None]] = []

    def _table(self, name, ids=None):
        self.read_back.append((name, ids))
        return super()._table(name, ids)


def test_closing_reads_back_only_the_rows_written_and_matches_the_store(store, embedder):
    memory = Watched(store, embedder)
    memory.add_fact("CI runs on GitHub Actions", "harness")
    memory.add_episode(
        episode(
            "r-parse",
            "Make quoted strings parse",
            failure_signatures=[
                "tests/test_lexer.py::test_escape failed at tests/test_lexer.py:9: AssertionError"
            ],
        )
    )
    memory.forget("r-db")
    memory.recall("database")  # a read is not a change
    memory.close()
    read = dict(memory.read_back)
    assert set(read) == {"facts", "episodes"} and len(memory.read_back) == 2
    assert len(read["facts"]) == 1  # the new fact alone, not the five stored before
    # the replaced episode with its signature, and the forgotten one
    assert set(read["episodes"]) == {"r-parse", "r-parse#sig0", "r-db"}
    with LongTermMemory(store, embedder) as whole:
        expected = reads(whole)
    assert reads(SnapshotMemory(snapshot.load(store), store, embedder)) == expected


def test_a_patched_snapshot_keeps_the_stores_order_of_rows(store, embedder):
    with LongTermMemory(store, embedder) as memory:  # the first fact, re-confirmed in place
        memory.add_fact(
            "The database is PostgreSQL 16, reached through SQLAlchemy sessions", "harness"
        )
        memory.add_fact("Docs use mkdocs", "harness")
        memory.add_episode(episode("r-db", "Refactor the database layer to use sessions"))
    with LongTermMemory(store, embedder) as memory:
        order = {n: memory.collection(n).get(include=[])["ids"] for n in snapshot.COLLECTIONS}
    cols = snapshot.load(store)
    assert {n: cols[n].get(include=[])["ids"] for n in snapshot.COLLECTIONS} == order


def test_a_write_after_another_handle_closed_still_reaches_the_snapshot(store, embedder):
    first = Watched(store, embedder)
    first.add_fact("Logs are written to var/log/app.log", "harness")
    with LongTermMemory(store, embedder) as second:
        second.add_fact("The API is served by uvicorn on port 8000", "harness")
    assert snapshot.exists(store)
    first.add_fact("Migrations live in db/migrations and run with alembic", "harness")
    assert not snapshot.exists(store)
    first.close()
    assert ("facts", None) in first.read_back, "the other handle's fact: the store is read whole"
    texts = {
        r.text
        for r in SnapshotMemory(snapshot.load(store), store, embedder).recall(
            "where do logs, migrations and the API server live", k=10, kind="fact", min_score=0.0
        )
    }
    assert {
        "Logs are written to var/log/app.log",
        "The API is served by uvicorn on port 8000",
        "Migrations live in db/migrations and run with alembic",
    } <= texts


def test_a_process_that_dies_after_a_write_leaves_no_snapshot_to_mislead_the_next_run(
    store, tmp_path
):
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(tmp_path.parent)!r})
        from agent_cli.memory.embed import WordLlamaEmbedder
        from agent_cli.memory.longterm.chroma import LongTermMemory
        m = LongTermMemory({str(store)!r}, WordLlamaEmbedder())
        m.add_fact("Deployments go through the blue-green script in ops/deploy.sh", "harness")
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert not snapshot.exists(store)
    lazy = LazyLongTermMemory(store, WordLlamaEmbedder())
    lazy.prepare()
    try:
        assert lazy._reader is None, "no snapshot: the store itself is opened"
        found = lazy.recall("how do deployments work", kind="fact")
        assert "blue-green" in found[0].text
        lazy.count_hits(found)  # a run counts its hits: a change
    finally:
        lazy.close()
    assert (
        "blue-green"
        in SnapshotMemory(snapshot.load(store), store, WordLlamaEmbedder())
        .recall("how do deployments work", kind="fact")[0]
        .text
    )


def test_a_run_recalls_from_the_snapshot_without_chromadb_and_its_hits_reach_the_store(
    store, embedder
):
    script = textwrap.dedent(f"""
        import json, sys
        from agent_cli.agent.learn.learning import recall_for_run
        from agent_cli.memory.embed import WordLlamaEmbedder
        from agent_cli.memory.longterm.lazy import LazyLongTermMemory
        lazy = LazyLongTermMemory({str(store)!r}, WordLlamaEmbedder())
        lazy.prepare()
        found = recall_for_run(lazy, "Use database sessions in the parser", ["proj"], lambda p: None)
        print(json.dumps({{"found": [[r.id, r.hit_count] for r in found.items],
                          "chromadb": "chromadb" in sys.modules}}))
        lazy.close()
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], check=True, timeout=120, capture_output=True, text=True
    )
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["chromadb"] is False
    with LongTermMemory(store, embedder) as memory:
        expected = recall_for_run(
            memory, "Use database sessions in the parser", ["proj"], lambda p: None
        )
    # the same items, counted once by the snapshot run (then once more by this check)
    assert [[r.id, r.hit_count - (r.kind != "episode")] for r in expected.items] == seen["found"]
    assert any(kind != "episode" for kind in (r.kind for r in expected.items))


def test_a_delayed_background_open_starts_at_once_when_the_store_is_needed(store, embedder):
    import threading

    lazy = LazyLongTermMemory(store, embedder)
    lazy.prepare()
    lazy.open_in_background(after_s=600)  # "after the request is out": far off here
    done = []
    worker = threading.Thread(
        target=lambda: done.append(lazy.add_fact("Docs use mkdocs", "h")), daemon=True
    )
    worker.start()
    worker.join(timeout=60)
    assert done, "the write waited for the delay instead of opening the store"
    lazy.close()


def test_a_damaged_or_foreign_snapshot_is_ignored(store, embedder):
    for damage in (b"not a zip file", b"", b"PK\x03\x04 a cut zip"):
        snapshot.path_of(store).write_bytes(damage)
        assert snapshot.load(store) is None
        lazy = LazyLongTermMemory(store, embedder)
        lazy.prepare()
        try:
            assert lazy._reader is None and lazy.recall("database sessions")
            assert not snapshot.exists(store), "the damaged file is gone"
            lazy.add_fact(f"Damage {len(damage)} was survived", "harness")
        finally:
            lazy.close()
        assert snapshot.load(store) is not None, "the run's write brought a new one"


def test_a_snapshot_whose_database_is_gone_answers_nothing(store, embedder):
    """The database deleted or moved aside: its snapshot is not read as the store (recall would
    bring back what `memory show`, `export` and `forget` say is not there)."""
    assert snapshot.exists(store)
    (store / "chroma.sqlite3").unlink()
    assert snapshot.load(store) is None
    assert not snapshot.exists(store), "the orphaned copy is gone"
    lazy = LazyLongTermMemory(store, embedder)
    lazy.prepare()
    try:
        assert not [r for r in lazy.recall("database sessions") if "PostgreSQL" in r.text]
    finally:
        lazy.close()


def test_a_snapshot_left_half_written_by_a_killed_process_is_cleared_on_the_next_write(
    store, embedder
):
    left = store / (snapshot.TEMP_PREFIX + "x1y2z3.npz")
    left.write_bytes(b"PK\x03\x04 half of a snapshot")
    with LongTermMemory(store, embedder) as memory:
        memory.add_fact("Benchmarks live in bench/", "harness")
    assert not left.exists() and snapshot.load(store) is not None
    assert [p.name for p in store.iterdir() if "recall" in p.name] == [snapshot.FILE]


def test_a_snapshot_of_another_embedder_is_the_same_clear_error(store):
    with pytest.raises(EmbedderMismatch, match="embedded with wordllama") as err:
        SnapshotMemory(snapshot.load(store), store, HashEmbedder()).recall("database")
    assert "agent memory reindex" in err.value.hint


def test_only_a_change_writes_a_snapshot_and_an_emptied_store_has_an_empty_one(tmp_path, embedder):
    path = tmp_path / "chroma"
    with LongTermMemory(path, embedder) as memory:
        memory.recall("anything")
    assert not snapshot.exists(path), "a store only read (here: created empty) gets none"
    with LongTermMemory(path, embedder) as memory:
        memory.forget(memory.add_fact("Temporary", "harness"))
    reader = SnapshotMemory(snapshot.load(path), path, embedder)
    assert reader.recall("anything", min_score=0.0) == [] and reader.procedures("proj") == []


def test_a_query_returns_the_nearest_rows_best_first_with_or_without_a_filter(tmp_path):
    import numpy as np

    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((500, 16)).astype(np.float32)
    ids = [f"r{i}" for i in range(500)]
    metas = [{"kind": "fact" if i % 2 else "note"} for i in range(500)]
    empty = {
        "metadata": {},
        "ids": [],
        "documents": [],
        "metadatas": [],
        "vectors": np.zeros((0, 0)),
    }
    snapshot.write(
        tmp_path,
        {
            "facts": {
                "metadata": {},
                "ids": ids,
                "documents": ids,
                "metadatas": metas,
                "vectors": vectors,
            },
            "episodes": empty,
        },
    )
    (tmp_path / "chroma.sqlite3").touch()  # a snapshot is read only beside its database
    facts = snapshot.load(tmp_path)["facts"]
    q = rng.standard_normal(16).astype(np.float32)
    sims = vectors @ q / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(q))
    best = [f"r{j}" for j in np.argsort(-sims)]
    assert facts.query([q], 9)["ids"][0] == best[:9]
    assert facts.query([q], 9, where={"kind": {"$in": ["fact", "note"]}})["ids"][0] == best[:9]
    assert (
        facts.query([q], 5, where={"kind": "fact"})["ids"][0]
        == [r for r in best if int(r[1:]) % 2][:5]
    )
    distances = facts.query([q], 600)["distances"][0]
    assert len(distances) == 500 and distances == sorted(distances)
    assert snapshot.load(tmp_path)["episodes"].query([q], 3)["ids"] == [[]]


@pytest.mark.parametrize(
    "where,meta,passes",
    [
        (None, {}, True),
        ({"kind": "fact"}, {"kind": "fact"}, True),
        ({"kind": "fact"}, {"kind": "note"}, False),
        ({"kind": "fact"}, {}, False),
        ({"trust": {"$gte": 0.5}}, {"trust": 0.5}, True),
        ({"trust": {"$gte": 0.5}}, {"trust": 0.4}, False),
        ({"trust": {"$gte": 0.5}}, {"trust": "high"}, False),
        ({"last_hit_ts": {"$lt": 10}}, {"last_hit_ts": 3.0}, True),
        ({"fixed": True}, {"fixed": True}, True),
        ({"fixed": True}, {"fixed": 1}, False),
        ({"topic": {"$in": ["proj", ""]}}, {"topic": ""}, True),
        ({"topic": {"$in": ["proj", ""]}}, {"topic": "other"}, False),
        (
            {"$and": [{"kind": "fact"}, {"trust": {"$gt": 0.1}}]},
            {"kind": "fact", "trust": 0.2},
            True,
        ),
        (
            {"$and": [{"kind": "fact"}, {"trust": {"$gt": 0.1}}]},
            {"kind": "fact", "trust": 0.1},
            False,
        ),
        ({"$or": [{"kind": "fact"}, {"kind": "note"}]}, {"kind": "note"}, True),
    ],
)
def test_filters_mean_what_they_mean_in_chroma(where, meta, passes):
    assert snapshot.matches(meta, where) is passes


def test_a_filter_the_snapshot_cannot_evaluate_is_an_error_not_a_silent_miss():
    with pytest.raises(ValueError, match=r"\$nin"):
        snapshot.matches({"kind": "fact"}, {"kind": {"$nin": ["note"]}})
    with pytest.raises(ValueError, match=r"\$not"):
        snapshot.matches({"kind": "fact"}, {"$not": {"kind": "fact"}})
    with pytest.raises(ValueError, match="does not keep episode"):
        snapshot.matches({"doc": "episode"}, {"$and": [{"doc": "episode"}, {"episode": "{}"}]})


def test_an_endpoint_embedder_is_asked_nothing_until_something_is_recalled(tmp_path):
    from agent_cli.llm.fake.server import FakeOpenAIServer
    from agent_cli.llm.openai.embedder import OpenAIEmbedder

    with FakeOpenAIServer() as server:

        def asked() -> int:
            return sum(r["path"].endswith("/embeddings") for r in server.requests)

        embedder = OpenAIEmbedder(base_url=server.url, api_key=None, model="emb")
        with LongTermMemory(tmp_path / "chroma", embedder) as memory:
            memory.add_fact("The docs are built with mkdocs", "harness")
        before = asked()
        for use_snapshot in (True, False):
            if not use_snapshot:
                snapshot.invalidate(tmp_path / "chroma")
            lazy = LazyLongTermMemory(
                tmp_path / "chroma", OpenAIEmbedder(base_url=server.url, api_key=None, model="emb")
            )
            lazy.prepare()
            lazy.open_in_background()
            lazy.close()
            assert asked() == before, "opening is not a reason to call the endpoint"
        lazy = LazyLongTermMemory(tmp_path / "chroma", embedder)
        lazy.prepare()
        assert lazy.recall("how are the docs built", min_trust=0.5)
        lazy.close()
        assert asked() == before + 1


# -- the snapshot against Chroma itself, on random stores -----------------------------------
VOCAB = [
    "parser",
    "quotes",
    "lexer",
    "database",
    "session",
    "cache",
    "tests",
    "release",
    "tag",
    "deploy",
    "docs",
    "port",
    "server",
    "logs",
    "migrations",
    "ci",
    "build",
    "make",
    "pytest",
    "config",
]
NOW = datetime(2025, 6, 1, tzinfo=UTC)


def words(rng: random.Random, lo: int = 1, hi: int = 5) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(lo, hi)))


def random_store(rng: random.Random, path, embedder, items: int, runs: int) -> None:
    """A store of random facts, notes, procedures and episodes, some hit, some re-confirmed,
    some forgotten, written in two sessions: the second snapshot is the first one patched."""
    random_writes(rng, path, embedder, items, runs, "a")
    random_writes(rng, path, embedder, items // 3, runs // 3, "b")


def random_writes(rng: random.Random, path, embedder, items: int, runs: int, tag: str) -> None:
    days = [rng.randint(0, 300) for _ in range(4)]  # few dates: many ties in date order
    with LongTermMemory(path, embedder) as memory:
        for n in range(items):
            text, topic = words(rng, 2, 6), rng.choice(("proj", "other", ""))
            trust = rng.choice((0.0, 0.3, 0.5, 0.5, 1.0, round(rng.random(), 3)))
            now = NOW - timedelta(days=rng.choice(days))
            ttl = rng.choice((0, 0, 30, 90))
            made = rng.choice(("fact", "note", "procedure"))
            if made == "fact":
                files = {f"src/{rng.choice(VOCAB)}.py": "b" * 8} if rng.random() < 0.3 else None
                memory.add_fact(
                    text, "harness", trust, now=now, ttl_days=ttl, topic=topic, files=files
                )
            elif made == "note":
                memory.curate(
                    text, topic=topic, origin_event_id=f"e{n}", now=now, trust=trust, ttl_days=ttl
                )
            else:
                memory.add_procedure(words(rng, 1, 3), text, topic=topic, now=now, ttl_days=ttl)
        episodes = []
        for n in range(runs):
            sigs = [
                f"tests/test_{rng.choice(VOCAB)}.py::test_{rng.choice(VOCAB)} failed: {words(rng)}"
                for _ in range(rng.randint(0, 2))
            ]
            fixes = (
                [Fix(signatures=sigs[:1], task=words(rng), summary=words(rng))]
                if sigs and rng.random() < 0.5
                else []
            )
            episodes.append(
                episode(
                    f"r{n:03d}" if tag == "a" or rng.random() < 0.5 else f"{tag}{n:03d}",
                    words(rng, 2, 6),
                    status=rng.choice(("verified", "failed", "rejected")),
                    failure_signatures=sigs,
                    fixes=fixes,
                    ended_at=(NOW - timedelta(days=rng.choice(days))).isoformat(),
                )
            )
        memory.add_episodes(episodes)
        for _ in range(rng.randint(0, 3) if tag != "a" else 0):
            gone = memory.recall(words(rng), k=1, min_trust=0.0, min_score=-1.0)
            if gone:
                memory.forget(gone[0].id)
        for _ in range(items // 5):
            found = memory.recall(words(rng), k=rng.randint(1, 4), kind="all", min_trust=0.0)
            memory.count_hits(found, now=NOW - timedelta(days=rng.randint(0, 100)))


def random_where(rng: random.Random, metas: list[dict], depth: int = 0) -> dict | None:
    """A random Chroma filter over the keys and values these records hold (and some they do not)."""
    roll = rng.random()
    if depth < 2 and roll < 0.2:
        parts = [random_where(rng, metas, depth + 1) for _ in range(rng.randint(2, 3))]
        return {rng.choice(("$and", "$or")): [p for p in parts if p] or [{"kind": "fact"}]}
    if depth == 0 and roll < 0.3:
        return None
    meta = rng.choice(metas)
    key = rng.choice([*(k for k in meta if k not in snapshot.DROPPED_KEYS), "missing"])
    value = meta.get(key, rng.choice(("fact", 1, 0.5, True)))
    if isinstance(value, (bool, str)):
        seen = sorted({m[key] for m in metas if key in m and type(m[key]) is type(value)})
        op = rng.choice(("plain", "$eq", "$in"))
        if op == "$in":
            return {key: {"$in": rng.sample(seen, min(len(seen), rng.randint(1, 3))) or [value]}}
        return {key: value} if op == "plain" else {key: {"$eq": value}}
    op = rng.choice(("$gt", "$gte", "$lt", "$lte", "$eq", "$in", "range"))
    bound = value if rng.random() < 0.6 else type(value)(value * rng.uniform(0.5, 1.5))
    if op == "range":
        return {"$and": [{key: {"$gte": bound}}, {key: {"$lte": bound + rng.choice((0, 1, 10))}}]}
    return {key: {"$in": [bound, type(bound)(0)]} if op == "$in" else {op: bound}}


TIE = 1e-5  # float32 sums in another order (Chroma's SIMD, numpy's BLAS) differ this little


def assert_same_ranking(ours: list[tuple[str, float]], theirs: list[tuple[str, float]], case: str):
    """The same ids in the same order, with the same distances; ids whose distances are equal
    (to float32 rounding) may come in either order, since Chroma orders equals as its index
    finds them, and at the end of a list either of them may be the one that made the cut."""
    assert len(ours) == len(theirs), case
    for (a, da), (b, db) in zip(ours, theirs, strict=True):
        assert abs(da - db) < TIE, f"{case}: {a} {da} against {b} {db}"
    start = 0
    while start < len(theirs):
        end = start + 1
        while end < len(theirs) and theirs[end][1] - theirs[end - 1][1] < TIE:
            end += 1
        if end < len(theirs):  # the last group may go on past the cut
            mine = {i for i, _ in ours[start:end]}
            assert mine == {i for i, _ in theirs[start:end]}, f"{case}: at {start}: {ours} {theirs}"
        start = end


def ranked(rows: dict) -> list[tuple[str, float]]:
    return list(zip(rows["ids"][0], rows["distances"][0], strict=True))


def scored(results: list) -> list[tuple[str, float]]:
    return [(r.id, -r.score) for r in results]


def exhaustive(memory: LongTermMemory) -> None:
    """Make Chroma search each collection's whole graph from the next client on: the
    snapshot's search is exact, and Chroma's HNSW at its default `ef_search` (100) now and then
    misses a neighbour (chroma-core/chroma#1205; a filtered recall did so in CI), which no
    snapshot should copy. This is Chroma's own setting, changed through its API on the test's
    store; a client already open keeps the index it loaded, so a new one is opened after."""
    for name in snapshot.COLLECTIONS:
        col = memory.collection(name).col.col  # Chroma's own, under the tracking and typing
        col.modify(configuration={"hnsw": {"ef_search": EXHAUSTIVE_EF}})


EXHAUSTIVE_EF = 10_000  # more than any test store holds


def compare_on_random_stores(tmp_path, seeds: range, items: int, runs: int, rounds: int) -> int:
    """Ask Chroma and the snapshot the same random questions; their answers must be the same:
    the same ids in the same order. How many questions were asked."""
    embedder = HashEmbedder(dim=32)
    asked = 0
    for seed in seeds:
        rng = random.Random(seed)
        path = tmp_path / f"store{seed}"
        random_store(rng, path, embedder, items, runs)
        reader = SnapshotMemory(snapshot.load(path), path, embedder)
        with LongTermMemory(path, embedder) as memory:
            exhaustive(memory)
        with LongTermMemory(path, embedder) as memory:  # a client that loads the index anew
            metas = {
                name: memory.collection(name).get(include=["metadatas"])["metadatas"]
                for name in snapshot.COLLECTIONS
            }
            for _ in range(rounds):
                name = rng.choice(snapshot.COLLECTIONS)
                where = random_where(rng, metas[name])
                k = rng.randint(1, items + runs)
                vec = embedder.embed([words(rng)])[0]
                case = f"seed {seed}: {name} k={k} where={where}"
                theirs = memory.collection(name).query([vec], n_results=k, where=where)
                ours = reader.store.cols[name].query([vec], n_results=k, where=where)
                assert_same_ranking(ranked(ours), ranked(theirs), case)
                got = sorted(memory.collection(name).get(where=where, include=[])["ids"])
                assert sorted(reader.store.cols[name].get(where=where, include=[])["ids"]) == got
                query, k = words(rng), rng.randint(1, 12)
                kind = rng.choice(("all", "episode", "fact", "note", "procedure"))
                floor = rng.choice((0.0, 0.3, 0.5, 0.7, 1.0, round(rng.random(), 2)))
                case = f"seed {seed}: recall {query!r} k={k} kind={kind} min_trust={floor}"
                assert_same_ranking(
                    scored(reader.recall(query, k, kind, floor, min_score=-1.0)),
                    scored(memory.recall(query, k, kind, floor, min_score=-1.0)),
                    case,
                )
                kinds = tuple(rng.sample(("fact", "note", "procedure"), rng.randint(1, 3)))
                topics = rng.choice((None, ["proj"], ["proj", ""], ["other"]))
                args = (vec, k, floor, kinds, topics)
                assert_same_ranking(
                    scored(reader.items.search_items(*args)),
                    scored(memory.items.search_items(*args)),
                    f"seed {seed}: items k={k} min_trust={floor} kinds={kinds} topics={topics}",
                )
                asked += 4
            sigs = [m["sig_key"] for m in metas["episodes"] if "sig_key" in m]
            assert sigs, "some runs failed"
            assert [r.id for r in reader.fixes_for(sigs)] == [r.id for r in memory.fixes_for(sigs)]
            assert [r.id for r in reader.procedures("proj", 50)] == [
                r.id for r in memory.procedures("proj", 50)
            ]
    return asked


def test_the_snapshot_answers_random_questions_as_chroma_does(tmp_path):
    assert compare_on_random_stores(tmp_path, range(1), items=24, runs=9, rounds=60) == 240


@pytest.mark.slow
def test_the_snapshot_answers_many_random_questions_as_chroma_does(tmp_path):
    # Two larger stores, each asked every kind of question (a raw query and a get under a
    # random filter, a recall, an item search) 64 times: most of the time goes to Chroma's
    # own answers, and more rounds on the same stores ask the same kinds of question again.
    assert compare_on_random_stores(tmp_path, range(2, 4), items=120, runs=40, rounds=64) == 512
