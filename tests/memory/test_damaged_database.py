"""A store whose `chroma.sqlite3` is empty, not SQLite, or cut short: refused in one error
naming the file and what to do, before Chroma or a recall snapshot is read, and never
written, moved or deleted. Real embedded Chroma; the embedder is `HashEmbedder`."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from embedkit import HashEmbedder


def _tree(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


@pytest.fixture(scope="module")
def whole(tmp_path_factory) -> Path:
    """A real store with facts, and its recall snapshot beside it."""
    store = tmp_path_factory.mktemp("whole") / "chroma"
    with LongTermMemory(store, HashEmbedder()) as mem:
        for n in range(40):
            mem.add_fact(f"fact number {n}: the parser lives in src/parse_{n}.py", "harness")
    assert snapshot.path_of(store).is_file()
    return store


def _damaged(whole: Path, tmp_path: Path, how: str) -> Path:
    store = tmp_path / "chroma"
    shutil.copytree(whole, store)
    db = store / "chroma.sqlite3"
    data = db.read_bytes()
    if how == "empty":
        db.write_bytes(b"")
    elif how == "cut short":
        db.write_bytes(data[: len(data) // 2])
    else:
        db.write_bytes(os.urandom(len(data)))
    return store


DAMAGE = [
    ("empty", "chroma.sqlite3 is empty (0 bytes)"),
    ("cut short", "chroma.sqlite3 is cut short: "),
    ("random bytes", "chroma.sqlite3 is not an SQLite database"),
]


@pytest.mark.parametrize("how, says", DAMAGE)
def test_a_damaged_database_is_refused_naming_it_and_left_as_it_is(whole, tmp_path, how, says):
    store = _damaged(whole, tmp_path, how)
    before = _tree(store)
    for reads_only in (False, True):
        with pytest.raises(StorageError) as raised:
            LongTermMemory(store, HashEmbedder(), reads_only=reads_only)
        line = raised.value.one_line()
        assert line.startswith(f"memory store at {store}: {says}"), line
        assert "nothing was changed; move the directory aside" in line
        assert "\n" not in line
    assert _tree(store) == before  # no new store written into the file, nothing removed


@pytest.mark.parametrize("how, says", DAMAGE)
def test_the_snapshot_of_a_damaged_store_does_not_stand_in_for_it(whole, tmp_path, how, says):
    """A run reads the snapshot instead of opening Chroma: it must not plan from it and then
    find, at its end, that nothing it learned can be kept."""
    store = _damaged(whole, tmp_path, how)
    before = _tree(store)
    lazy = LazyLongTermMemory(store, HashEmbedder())
    with pytest.raises(StorageError, match=re.escape(says)):
        lazy.prepare()
    lazy.close()
    assert _tree(store) == before


def test_a_whole_store_still_opens_and_recalls(whole, tmp_path):
    store = tmp_path / "chroma"
    shutil.copytree(whole, store)
    with LongTermMemory(store, HashEmbedder(), reads_only=True) as mem:
        assert mem.counts()["facts"] == 40
    lazy = LazyLongTermMemory(store, HashEmbedder(), read_only=True)
    lazy.prepare()
    assert lazy.recall("the parser lives in src", k=3, min_score=-1.0)
    lazy.close()


HOLD_LOCK = """
import sqlite3, sys
con = sqlite3.connect(sys.argv[1], isolation_level=None)
con.execute("BEGIN EXCLUSIVE")
print("held", flush=True)
sys.stdin.readline()
con.close()
"""


def test_a_file_shorter_than_its_header_while_a_writer_holds_the_lock_is_not_refused(
    whole, tmp_path
):
    """A commit under way writes the page count before the pages that grow the file, so
    the file looks cut short until the commit ends: the check waits for SQLite's lock, and
    leaves the file to SQLite when the lock is not given in time; once no writer holds it,
    the same file is refused."""
    import subprocess
    import sys

    from agent_cli.memory.longterm import place

    store = tmp_path / "chroma"
    shutil.copytree(whole, store)
    db = store / "chroma.sqlite3"
    writer = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store / "chroma.sqlite3")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "held\n"
        with open(db, "r+b") as file:  # what a commit under way shows a reader
            file.truncate(db.stat().st_size // 2)
        place.check_database(store)  # a writer holds the lock: not judged
    finally:
        assert writer.stdin is not None
        writer.stdin.write("done\n")
        writer.stdin.close()
        writer.wait(timeout=30)
    with pytest.raises(StorageError, match="chroma.sqlite3 is cut short"):
        place.check_database(store)
