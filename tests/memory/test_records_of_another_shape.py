"""Records of another shape in long-term memory's `facts`: a field the code reads holding what is
not of its type or range, as another tool, an older version or a teammate on a shared server
may write it. Written with chromadb's own client into a real embedded store; such a record
is not recalled, listed, counted, merged or taken over, and stays as it was written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import chromadb
import pytest
from chromadb.config import Settings

from agent_cli.core.errors import StorageError
from agent_cli.memory.embed import WordLlamaEmbedder
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.curation import (
    CONTENT_UPGRADE,
    content_id,
    item_key,
    topic_fields,
)
from rawfactskit import raw_metas, raw_upsert

TOPIC = "git:" + "a" * 40
LEGACY = "calc"  # a topic an earlier version filed items under (a folder's name)
QUERY = "the median function in calc/stats.py"
GOOD = "calc/stats.py holds the median function"
WRONG: list[tuple[str, Any]] = [  # one record each, wrong in that field alone
    ("hit_count", "many"),
    ("ttl_days", "ninety"),
    ("trust", "high"),
    ("trust", 5),
    ("confirmed_ts", "yesterday"),
    ("last_hit_ts", True),
    ("expires_ts", "never"),
    ("confirmations", 1.5),
    ("confirmed_at", 20250101),
    ("gist", ["a", "list"]),
    ("kind", 3),
    ("files", "{not json"),
]


@pytest.fixture(scope="module")
def embedder():
    return WordLlamaEmbedder()


def foreign(field: str, value: Any, topic: str = TOPIC) -> dict[str, Any]:
    """A fact's metadata as another tool writes it, `field` holding `value`."""
    return {
        **topic_fields(topic),
        "kind": "fact",
        "source": "wiki import",
        "trust": 0.9,
        "gist": f"{GOOD} (the {field} record)",
        field: value,
    }


def upsert_foreign(store: Path, embedder, records: dict[str, dict[str, Any]]) -> None:
    """Write `records` (id -> metadata) into `facts`, each document the good fact's words with
    its id."""
    raw_upsert(store, embedder, records, [f"{GOOD}, says {i}" for i in records])


def test_a_record_of_another_shape_is_left_out_of_every_read_and_never_written(tmp_path, embedder):
    store = tmp_path / "chroma"
    with LongTermMemory(store, embedder) as mem:
        good = mem.add_fact(GOOD, "harness", topic=TOPIC)
    records = {
        f"foreign-{n}-{field}": foreign(field, value) for n, (field, value) in enumerate(WRONG)
    }
    records["foreign-legacy"] = foreign("ttl_days", "ninety", topic=LEGACY)
    records["foreign-procedure"] = {**foreign("hit_count", "many"), "kind": "procedure"}
    upsert_foreign(store, embedder, records)
    with LongTermMemory(store, embedder) as mem:
        found = mem.recall(QUERY, k=20, topics=[TOPIC])
        assert [r.id for r in found] == [good]
        assert [r.id for r in mem.recall(QUERY, k=20)] == [good]  # of every repository
        assert [r.id for r in mem.listing([TOPIC, LEGACY])] == [good]
        assert mem.procedures(TOPIC) == []
        assert [r.id for r in mem.associate(GOOD, topics=[TOPIC], threshold=0.0)] == [good]
        mem.count_hits(found)
        assert mem.adopt(LEGACY, TOPIC) == 0  # not filed under this repository
        mem.store.mark_upgraded("facts", CONTENT_UPGRADE, done=False)  # as an older store is
        assert mem.upgrade_ids() == 0  # their ids are no content ids: not merged, not moved
        assert mem.recall(QUERY, topics=[TOPIC])[0].hit_count == 2  # the good one counted
    assert raw_metas(store, list(records)) == records


def test_an_item_stored_again_over_a_record_of_another_shape_is_refused_in_one_line(
    tmp_path, embedder
):
    store = tmp_path / "chroma"
    LongTermMemory(store, embedder).close()
    item_id = content_id(item_key(TOPIC, GOOD))
    records = {item_id: foreign("ttl_days", "ninety")}
    upsert_foreign(store, embedder, records)
    with LongTermMemory(store, embedder) as mem, pytest.raises(StorageError) as err:
        mem.add_fact(GOOD, "harness", topic=TOPIC)
    said = err.value.one_line()
    assert f"memory item {item_id} holds this fact already" in said and "'ttl_days'" in said
    assert f"agent memory forget {item_id}" in said and "\n" not in said
    assert raw_metas(store, [item_id]) == records  # not re-confirmed, nor rewritten in ours


def test_a_hit_is_not_written_over_a_record_that_changed_shape_since_it_was_read(
    tmp_path, embedder
):
    store = tmp_path / "chroma"
    with LongTermMemory(store, embedder) as mem:
        good = mem.add_fact(GOOD, "harness", topic=TOPIC)
        found = mem.recall(QUERY, topics=[TOPIC])
        assert [r.id for r in found] == [good]
        changed = {good: {**raw_metas(store, [good])[good], "hit_count": "many"}}
        with chromadb.PersistentClient(str(store), Settings(anonymized_telemetry=False)) as c:
            c.get_collection("facts").update(ids=[good], metadatas=[changed[good]])
        mem.count_hits(found)
    assert raw_metas(store, [good]) == changed
