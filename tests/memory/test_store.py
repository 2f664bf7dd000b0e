"""Cold stores: the protocol on both, SQLite's WAL, migrations, errors and restarts."""

from __future__ import annotations

import json
import sqlite3

import pytest

from agent_cli.core.errors import StorageError
from agent_cli.memory import InMemStore, SqliteStore, WorkingMemory
from agent_cli.memory.working.store import MIGRATIONS

RETRY = '''def count_attempts(obj):
    """How many attempts were made."""
    return getattr(obj, "attempts", 0)
'''


def record(item_id: str, symbols=(), vector=None, step_evicted=0, **extra) -> dict:
    """A cold record as WorkingMemory writes it."""
    data = {
        "id": item_id,
        "kind": "edit",
        "text": f"text of {item_id}",
        "summary": f"sum {item_id}",
        "tokens": 4,
        "pinned": False,
        "step": 1,
        "symbols": list(symbols),
        "touched": 1,
        "refs": 0,
        "origin_id": None,
        "cost": 12,
        "vector": vector,
        "step_evicted": step_evicted,
        "seen": dict.fromkeys(symbols, 0),
    }
    data.update(extra)
    return data


@pytest.fixture(params=["memory", "sqlite"])
def store(request, tmp_path):
    """Each store implementation, empty."""
    made = InMemStore() if request.param == "memory" else SqliteStore(tmp_path / "cold.sqlite")
    yield made
    made.close()


def test_put_get_delete(store):
    vector = [0.1, 1 / 3, -2.5e-300, 7.0]
    store.put(record("m1", ["count_attempts"], vector=vector))
    got = store.get("m1")
    assert got == record("m1", ["count_attempts"], vector=vector)
    assert store.get("m2") is None
    store.delete("m1")
    store.delete("m1")
    assert store.get("m1") is None and store.count() == 0
    assert store.by_symbol(["count_attempts"]) == []


def test_put_replaces_by_id(store):
    store.put(record("m1", ["old_name"]))
    store.put(record("m1", ["new_name"], step_evicted=5))
    assert store.count() == 1
    assert store.by_symbol(["old_name"]) == []
    assert store.by_symbol(["new_name"]) == [("m1", "new_name")]
    assert store.manifest()[0]["step_evicted"] == 5


def test_manifest_recent_and_counts(store):
    for n in (3, 1, 2):
        store.put(record(f"m{n}", [f"name_{n}"], step_evicted=n))
    assert [e["id"] for e in store.manifest()] == ["m1", "m2", "m3"]
    assert store.manifest()[0] == {
        "id": "m1",
        "kind": "edit",
        "summary": "sum m1",
        "symbols": ["name_1"],
        "step_evicted": 1,
    }
    assert [e["id"] for e in store.recent(2)] == ["m2", "m1"]
    store.put(record("m3", ["name_3"]))
    assert store.recent(1)[0]["id"] == "m3"
    assert store.count() == 3 and store.max_number() == 3


def test_by_symbol_exact_and_folded(store):
    store.put(record("m1", ["count_attempts"]))
    store.put(record("m2", ["COUNT_ATTEMPTS", "other"]))
    assert store.by_symbol(["count_attempts"]) == [("m1", "count_attempts")]
    assert sorted(i for i, _ in store.by_symbol(["Count_Attempts"], folded=True)) == ["m1", "m2"]
    assert store.by_symbol([]) == []


def test_vectors_lists_only_records_with_a_vector(store):
    store.put(record("m1", vector=[1.0, 0.0], step_evicted=4))
    store.put(record("m2"))
    assert store.vectors() == [("m1", 4, [1.0, 0.0])]


def test_sqlite_uses_wal_and_records_migrations_in_order(tmp_path):
    path = tmp_path / "cold.sqlite"
    SqliteStore(path).close()
    SqliteStore(path).close()  # opening again applies nothing twice
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY rowid")]
    assert names == [name for name, _ in MIGRATIONS]
    conn.close()


def test_sqlite_commits_each_change_at_once(tmp_path):
    path = tmp_path / "cold.sqlite"
    store = SqliteStore(path)
    store.put(record("m1", ["count_attempts"]))
    other = sqlite3.connect(path)
    assert other.execute("SELECT id FROM symbols").fetchall() == [("m1",)]
    store.delete("m1")
    assert other.execute("SELECT COUNT(*) FROM items").fetchone()[0] == 0
    other.close()
    store.close()


def test_a_failed_put_leaves_nothing_half_written(tmp_path):
    store = SqliteStore(tmp_path / "cold.sqlite")
    store.put(record("m1", ["first"]))
    with pytest.raises(StorageError):
        store.put(record("m1", ["second"], step_evicted=None))  # NOT NULL fails mid-way
    assert store.by_symbol(["first"]) == [("m1", "first")]
    assert store.get("m1")["symbols"] == ["first"]
    store.close()


def test_a_file_written_by_a_newer_version_is_refused(tmp_path):
    path = tmp_path / "cold.sqlite"
    SqliteStore(path).close()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO migrations VALUES ('999_future', 'now')")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="newer version"):
        SqliteStore(path)


def test_a_corrupt_file_raises_storage_error_naming_it_and_is_left_alone(tmp_path):
    path = tmp_path / "cold.sqlite"
    garbage = b"this is not a database\x00" * 200
    path.write_bytes(garbage)
    with pytest.raises(StorageError) as caught:
        SqliteStore(path)
    assert str(path) in caught.value.message
    assert "untouched" in caught.value.hint
    assert path.read_bytes() == garbage


def test_a_path_that_cannot_be_opened_raises_storage_error(tmp_path):
    with pytest.raises(StorageError) as caught:
        SqliteStore(tmp_path)  # a directory
    assert str(tmp_path) in caught.value.message


def test_a_locked_database_raises_storage_error_naming_it(tmp_path):
    path = tmp_path / "cold.sqlite"
    store = SqliteStore(path, timeout=0.1)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StorageError) as caught:
            store.put(record("m1"))
        assert str(path) in caught.value.message
        assert "lock" in caught.value.hint
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    store.put(record("m1"))
    assert store.count() == 1
    store.close()


def test_the_cold_zone_survives_a_restart(tmp_path):
    path = tmp_path / "cold.sqlite"
    store = SqliteStore(path)
    mem = WorkingMemory(store=store, max_tokens=300)
    edit = mem.add("edit", RETRY, summary="retry.py")
    for i in range(20):
        mem.tick()
        mem.add("edit", f"step {i}\n" + " ".join(f"k{i}y{j}" for j in range(30)))
    manifest = mem.cold_manifest()
    state = json.loads(json.dumps(mem.export_state()))
    store.close()

    store = SqliteStore(path)
    fresh = WorkingMemory(store=store, max_tokens=300)
    assert fresh.cold_manifest() == manifest
    newest_cold = max(int(e["id"][1:]) for e in manifest)
    assert fresh.add("log", "after the restart") == f"m{newest_cold + 1}"  # never a cold id
    assert fresh.recall("count_attempts", k=1) == [edit]
    store.close()

    store = SqliteStore(path)
    resumed = WorkingMemory(store=store, max_tokens=300)
    resumed.import_state(state)
    assert resumed.export_state() == state
    assert resumed.stats()["step"] == 20
    store.close()
