"""A read of the embedded store never meets another process's write in progress.

Chroma's reads save the index as well: a query made while another process wrote (an `agent
recall` during an `agent memory import`) left `link_lists.bin` growing until the disk was
full, or ended the reader with a segmentation fault in Chroma's query. A read holds the
write lock shared: it waits for a write in progress (at most the store's wait, then
StoreBusy), and readers go on side by side. The lock is held here from another open file
description, which flock treats as another process does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.write.lock import StoreBusy, WriteLock
from embedkit import HashEmbedder

FACT = "The API listens on port 8080"


@pytest.fixture
def store(tmp_path) -> Path:
    path = tmp_path / "chroma"
    with LongTermMemory(path, HashEmbedder()) as mem:
        mem.add_fact(FACT, "harness")
    return path


@pytest.fixture
def holding() -> Iterator[Callable[[AbstractContextManager[object], float], None]]:
    """Hold a lock (`WriteLock(...).held()` or `.shared()`) for `seconds` in another thread;
    returns once it is held."""
    threads: list[threading.Thread] = []

    def hold(lock: AbstractContextManager[object], seconds: float) -> None:
        held = threading.Event()

        def run() -> None:
            with lock:
                held.set()
                time.sleep(seconds)

        threads.append(threading.Thread(target=run, daemon=True))
        threads[-1].start()
        assert held.wait(10)

    yield hold
    for thread in threads:
        thread.join()


@pytest.mark.parametrize("reads_only", [False, True])
def test_a_read_waits_for_a_write_in_progress(store, holding, reads_only):
    mem = LongTermMemory(store, HashEmbedder(), reads_only=reads_only)
    try:
        holding(WriteLock(store).held(), 1.5)  # another process writing
        started = time.monotonic()
        found = mem.recall("which port does the API listen on", min_score=-1)
        assert time.monotonic() - started >= 1.2  # made once the write was done
        assert [r.text for r in found] == [FACT]
    finally:
        mem.close()


@pytest.mark.parametrize("reads_only", [False, True])
def test_a_write_kept_in_progress_too_long_is_said_busy_not_read_beside(store, holding, reads_only):
    mem = LongTermMemory(store, HashEmbedder(), reads_only=reads_only, write_wait_s=0.3)
    try:
        holding(WriteLock(store).held(), 2.0)
        with pytest.raises(StoreBusy) as e:
            mem.counts()
        assert f"memory store at {store} is busy" in e.value.one_line()
    finally:
        mem.close()


def test_readers_do_not_wait_for_each_other(store, holding):
    holding(WriteLock(store).shared(), 2.0)  # another process reading
    mem = LongTermMemory(store, HashEmbedder(), reads_only=True, write_wait_s=0.3)
    try:
        assert mem.counts()["facts"] == 1
        assert mem.export(store.parent / "all.jsonl") == 1
    finally:
        mem.close()


def test_a_write_waits_for_a_read_in_progress(store, holding):
    mem = LongTermMemory(store, HashEmbedder(), write_wait_s=0.3)
    try:
        holding(WriteLock(store).shared(), 2.0)
        with pytest.raises(StoreBusy):
            mem.add_fact("The API reads its port from PORT", "harness")
    finally:
        mem.close()


def test_a_plan_only_run_copies_no_write_half_made(store, holding):
    (store / "agent-recall.npz").unlink()  # no snapshot: the store is copied to be opened
    lazy = LazyLongTermMemory(store, HashEmbedder(), read_only=True)
    try:
        holding(WriteLock(store).held(), 1.5)
        started = time.monotonic()
        found = lazy.recall("which port does the API listen on", min_score=-1)
        assert time.monotonic() - started >= 1.2  # copied once the write was done
        assert [r.text for r in found] == [FACT]
    finally:
        lazy.close()
