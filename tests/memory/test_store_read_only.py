"""A cold store opened only to read (`agent memory show`): nothing created, nothing written, and
a store on a read-only filesystem is still read; opened to write there, the error says why,
as the commands that write to long-term memory there do (use a copy)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_cli.core.errors import StorageError
from agent_cli.memory import SqliteStore
from agent_cli.memory.longterm.place import storage_error


def _record(n: int) -> dict[str, object]:
    return {
        "id": f"m{n}",
        "kind": "edit",
        "text": f"def parse_{n}(): pass",
        "summary": f"parse_{n}",
        "tokens": 5,
        "pinned": False,
        "step": n,
        "symbols": [f"parse_{n}"],
        "touched": n,
        "refs": 0,
        "step_evicted": n,
        "seen": {},
    }


@pytest.fixture
def read_only_copy(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(a folder with a store of two records, the same folder bind-mounted read-only)."""
    folder, mount = tmp_path / "state", tmp_path / "ro"
    folder.mkdir()
    mount.mkdir()
    store = SqliteStore(folder / "memory.db")
    store.put(_record(1))
    store.put(_record(2))
    store.close()
    steps = (
        ["mount", "--bind", str(folder), str(mount)],
        ["mount", "-o", "remount,ro,bind", str(mount)],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(mount)], capture_output=True)
            pytest.skip(f"a read-only bind mount needs privileges: {done.stderr.strip()}")
    try:
        yield folder, mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_a_store_on_a_read_only_filesystem_is_read(read_only_copy: tuple[Path, Path]) -> None:
    _, mount = read_only_copy
    store = SqliteStore(mount / "memory.db", read_only=True)
    try:
        assert store.count() == 2
        assert store.get("m2")["summary"] == "parse_2"  # type: ignore[index]
        assert store.by_symbol(["parse_1"]) == [("m1", "parse_1")]
    finally:
        store.close()


def test_opened_to_write_there_it_says_the_folder_cannot_be_written(
    read_only_copy: tuple[Path, Path],
) -> None:
    _, mount = read_only_copy
    with pytest.raises(StorageError) as caught:
        SqliteStore(mount / "memory.db")
    assert "cannot be written" in caught.value.hint
    assert "not a readable SQLite database" not in caught.value.hint  # it is one


def test_chroma_on_a_read_only_filesystem_gets_a_hint_that_fits(
    read_only_copy: tuple[Path, Path],
) -> None:
    _, mount = read_only_copy
    error = storage_error(mount, "opening", OSError("attempt to write a readonly database"))
    assert "cannot be written" in error.hint and "AGENT_HOME" in error.hint


def test_reading_only_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(StorageError, match="does not exist"):
        SqliteStore(tmp_path / "runs" / "memory.db", read_only=True)
    assert not (tmp_path / "runs").exists()


def test_reading_only_writes_nothing(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memory.db")
    store.put(_record(1))
    store.close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    reader = SqliteStore(tmp_path / "memory.db", read_only=True)
    try:
        with pytest.raises(StorageError):
            reader.put(_record(2))
        assert reader.count() == 1
    finally:
        reader.close()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing left beside


def test_an_older_store_is_not_migrated_to_be_read(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "memory.db")
    store.close()
    import sqlite3

    with sqlite3.connect(tmp_path / "memory.db") as conn:
        conn.execute("DELETE FROM migrations WHERE name = '002_symbols'")
    with pytest.raises(StorageError, match="older version"):
        SqliteStore(tmp_path / "memory.db", read_only=True)
    with sqlite3.connect(tmp_path / "memory.db") as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM migrations")]
    assert names == ["001_items"]


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """(a repository whose long-term store, `.agent/chroma`, is bind-mounted read-only over
    itself, the id of a fact in it)."""
    from agent_cli.memory.embed import WordLlamaEmbedder
    from agent_cli.memory.longterm.chroma import LongTermMemory
    from conftest import make_repo

    repo = make_repo(tmp_path / "repo")
    store = repo / ".agent" / "chroma"
    with LongTermMemory(store, WordLlamaEmbedder()) as mem:
        fact = mem.add_fact("tests run with pytest -q", "harness")
    steps = (
        ["mount", "--bind", str(store), str(store)],
        ["mount", "-o", "remount,ro,bind", str(store)],
    )
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(store)], capture_output=True)
            pytest.skip(f"a read-only bind mount needs privileges: {done.stderr.strip()}")
    try:
        yield repo, fact
    finally:
        subprocess.run(["umount", str(store)], check=True)


def test_commands_that_write_to_a_read_only_store_say_to_use_a_copy(
    read_only_store: tuple[Path, str], agent_in_process
) -> None:
    repo, fact = read_only_store
    for args in (["memory", "forget", fact], ["memory", "expire"], ["memory", "reindex"]):
        done = agent_in_process(*args, cwd=repo)
        assert done.returncode == 1, (args, done.stdout)
        assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr
        assert "cannot be written" in done.stderr, done.stderr
        assert "point AGENT_HOME at the copy" in done.stderr and "aside" not in done.stderr
