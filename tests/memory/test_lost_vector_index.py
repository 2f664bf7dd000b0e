"""An embedded store whose vector index is lost (a segment directory deleted, damaged, or
copied from elsewhere) while its records are whole: Chroma answers a search with "Error
finding id", and the error says that `agent memory reindex` builds the index again, rather
than to move the store (and every record in it) aside."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm.chroma import LongTermMemory
from embedkit import HashEmbedder

ROWS = 1200  # past Chroma's sync threshold (1,000): the log no longer holds every vector


def _export(path: Path) -> Path:
    meta = {
        "kind": "fact",
        "source": "harness",
        "trust": 1.0,
        "created_at": "2026-01-01T00:00:00+00:00",
        "ttl_days": 0.0,
        "topic": "",
    }
    with open(path, "w", encoding="utf-8") as out:
        for i in range(ROWS):
            doc = f"the cache of module {i % 97} keeps item {i}"
            rec = {"id": f"mem_{i:06d}", "document": doc, "collection": "facts"}
            out.write(json.dumps({**rec, "metadata": {**meta, "text_hash": f"h{i}"}}) + "\n")
    return path


def _index_directory(store: Path, collection: str) -> Path:
    con = sqlite3.connect(store / "chroma.sqlite3")
    try:
        (segment,) = con.execute(
            "SELECT s.id FROM segments s JOIN collections c ON s.collection = c.id "
            "WHERE s.scope = 'VECTOR' AND c.name = ?",
            (collection,),
        ).fetchone()
    finally:
        con.close()
    return store / segment


def test_a_lost_index_is_said_to_be_built_again_by_reindex(tmp_path):
    store = tmp_path / "chroma"
    with LongTermMemory(store, HashEmbedder()) as mem:
        assert mem.import_(_export(tmp_path / "export.jsonl")) == ROWS
    shutil.rmtree(_index_directory(store, "facts"))
    (store / "agent-recall.npz").unlink(missing_ok=True)  # the search goes to Chroma
    with LongTermMemory(store, HashEmbedder(), reads_only=True) as reader:
        with pytest.raises(StorageError) as e:
            reader.recall("the cache of module 7", min_score=-1)
    line = e.value.one_line()
    assert f"memory store at {store}" in line and "Error finding id" in line
    assert "`agent memory reindex` builds the index again" in line
    assert "move it aside" not in line  # the records are whole
    with LongTermMemory(store, HashEmbedder()) as mem:
        assert mem.reindex() == ROWS
        assert mem.recall("the cache of module 7", min_score=-1)  # as the hint said
