"""A Chroma server that has not yet written the index a search needs (chroma-core/chroma#4212:
"Error creating hnsw segment reader: Nothing found on disk", met while other clients write):
the search is asked again after a pause, and only a server that keeps saying so fails it.

`NotReadyYet` is a collection of our own around the real collection of a real `chroma run`
server; its first searches raise the server's own error, as chromadb's client raises it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import chromadb.errors
import pytest

from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm.chroma import LongTermMemory
from agent_cli.memory.longterm.place import ChromaServer, IndexNotReady
from agent_cli.memory.longterm.store import INCLUDE, INDEX_TRIES, Collection, Rows, Where
from collectionkit import Counting
from embedkit import HashEmbedder

pytestmark = pytest.mark.slow  # a `chroma run` process serves these tests
NOT_READY = "Error executing plan: Internal error: Error creating hnsw segment reader: Nothing found on disk"


class NotReadyYet(Counting):
    """A collection whose first `fails` searches raise the server's not-ready error."""

    def __init__(self, col: Collection, fails: int) -> None:
        super().__init__(col)
        self.fails = fails
        self.searches: list[float] = []

    def query(
        self,
        query_embeddings: list[Any],
        n_results: int = 10,
        where: Where | None = None,
        include: Sequence[str] = (*INCLUDE, "distances"),
    ) -> Rows:
        self.searches.append(time.monotonic())
        if len(self.searches) <= self.fails:
            raise chromadb.errors.InternalError(NOT_READY)
        return super().query(query_embeddings, n_results=n_results, where=where, include=include)


def _memory_with(chroma_server, chroma_database, fails: int) -> tuple[LongTermMemory, str, Any]:
    mem = LongTermMemory(ChromaServer(chroma_server.url, database=chroma_database), HashEmbedder())
    fact = mem.add_fact("The stats tests run with pytest tests/test_stats.py", "harness")
    col = mem.store.cols["facts"] = NotReadyYet(mem.store.cols["facts"], fails)
    return mem, fact, col


def test_a_search_the_server_is_not_ready_for_is_asked_again(chroma_server, chroma_database):
    mem, fact, col = _memory_with(chroma_server, chroma_database, fails=INDEX_TRIES - 1)
    with mem:
        assert [r.id for r in mem.recall("stats tests with pytest", k=3, kind="fact")] == [fact]
    assert len(col.searches) >= INDEX_TRIES
    assert col.searches[1] - col.searches[0] >= 0.4  # after a pause, not at once


def test_a_server_that_stays_not_ready_fails_the_search_naming_it(chroma_server, chroma_database):
    mem, _, col = _memory_with(chroma_server, chroma_database, fails=100)
    with mem, pytest.raises(StorageError) as failed:
        mem.recall("stats tests with pytest", k=3, kind="fact")
    assert isinstance(failed.value, IndexNotReady)
    assert "Nothing found on disk" in str(failed.value) and chroma_server.url in str(failed.value)
    assert len(col.searches) == INDEX_TRIES
