"""Recall from a store too large for a snapshot when Chroma's index answers approximately: an
answer shorter than asked for while rows remain does not end the search, and answers that are
not nested (a wider search finds other rows) never make recall read more than CANDIDATES rows.

HNSW promises neither a full nor a nested answer; `Approximate`, a counted collection of our
own around the real Chroma collection (collectionkit.py), makes each answer of the index short or shifted, every time, so
these tests do not depend on how a particular index was built.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.store import CANDIDATES, INCLUDE, Collection, Rows, Where
from collectionkit import Counting
from embedkit import HashEmbedder

DIM = 16
RARE = ("mem_000010", "mem_001500", "mem_002990")  # the only items of "git:rare"

Answer = Callable[[Collection, list[Any], int], Rows]  # the index's answer to n nearest


class Approximate(Counting):
    """A counted collection whose unfiltered nearest-rows answers come from `answer`; the rows
    of any other query are counted, with their content or not."""

    def __init__(self, col: Collection, answer: Answer) -> None:
        super().__init__(col)
        self.answer = answer

    def query(
        self,
        query_embeddings: list[Any],
        n_results: int = 10,
        where: Where | None = None,
        include: Sequence[str] = (*INCLUDE, "distances"),
    ) -> Rows:
        if where is None and list(include) == ["distances"]:
            return self.answer(self.col, query_embeddings, n_results)
        got = self.col.query(query_embeddings, n_results=n_results, where=where, include=include)
        self.rows_read += sum(len(ids) for ids in got["ids"])
        return got


def nearest(col: Collection, vecs: list[Any], n: int) -> Rows:
    return col.query(vecs, n_results=n, include=["distances"])


def short(col: Collection, vecs: list[Any], n: int) -> Rows:
    """Three in four of the `n` nearest, as HNSW answers when its search stops early."""
    got = nearest(col, vecs, n)
    keep = 3 * len(got["ids"][0]) // 4
    return {"ids": [got["ids"][0][:keep]], "distances": [got["distances"][0][:keep]]}


def shifted(col: Collection, vecs: list[Any], n: int) -> Rows:
    """`n` rows, but the `n` after the first `n` stored: each wider search finds other rows."""
    ids = col.get(limit=n, offset=n, include=[])["ids"]
    return {"ids": [ids], "distances": [[0.5] * len(ids)]}


def record(i: int) -> dict[str, Any]:
    meta = {
        "kind": "fact",
        "source": "harness",
        "trust": 1.0,
        "created_at": "2026-01-01T00:00:00+00:00",
        "text_hash": f"h{i}",
        "ttl_days": 0.0,
        "topic": "git:rare" if f"mem_{i:06d}" in RARE else "git:0123",
        "topic_alt": "",
    }
    words = ("parser", "cache", "login", "release", "migration", "scheduler")
    doc = f"the {words[i % 6]} of module {i % 97} keeps item {i}"
    return {"collection": "facts", "id": f"mem_{i:06d}", "document": doc, "metadata": meta}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3,000 facts, three of them of "git:rare", in a store too large for a snapshot."""
    root = tmp_path_factory.mktemp("short")
    export = root / "export.jsonl"
    export.write_text("".join(json.dumps(record(i)) + "\n" for i in range(3000)), "utf-8")
    with LongTermMemory(root / "chroma", HashEmbedder(DIM), snapshot_rows=1000) as mem:
        assert mem.import_(export) == 3000
    return root / "chroma"


@pytest.mark.parametrize("answer", [short, shifted], ids=["short", "shifted"])
def test_a_rare_repository_gets_its_items_however_the_index_answers(store, answer):
    with LongTermMemory(store, HashEmbedder(DIM), snapshot_rows=1000) as mem:
        facts = Approximate(mem.store.cols["facts"], answer)
        mem.store.cols["facts"] = facts
        hits = mem.recall("the cache of module 40", k=5, topics=["git:rare"], min_score=-1.0)
        assert sorted(h.id for h in hits) == list(RARE)
        assert facts.rows_read <= CANDIDATES + len(RARE)  # the candidates, then the rare rows
