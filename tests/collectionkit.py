"""`Counting`: a `store.Collection` of the tests' own around a real Chroma collection, which
counts what long-term memory reads from it and writes to it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agent_cli.memory.longterm.store import INCLUDE, Collection, Meta, Rows, Where


class Counting:
    """A `store.Collection` around another: counts the rows each read returns with their
    content (ids and distances alone come from the index), notes the ids the index answers
    and each write."""

    def __init__(self, col: Collection) -> None:
        self.col = col
        self.rows_read = 0
        self.answered: set[str] = set()
        self.upserts: list[int] = []

    @property
    def metadata(self) -> Meta:
        return self.col.metadata

    def count(self) -> int:
        return self.col.count()

    def get(
        self,
        ids: list[str] | None = None,
        where: Where | None = None,
        include: Sequence[str] = INCLUDE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Rows:
        got = self.col.get(ids=ids, where=where, include=include, limit=limit, offset=offset)
        self.rows_read += len(got["ids"]) if content(include) else 0
        return got

    def query(
        self,
        query_embeddings: list[Any],
        n_results: int = 10,
        where: Where | None = None,
        include: Sequence[str] = (*INCLUDE, "distances"),
    ) -> Rows:
        got = self.col.query(query_embeddings, n_results=n_results, where=where, include=include)
        self.rows_read += sum(len(ids) for ids in got["ids"]) if content(include) else 0
        self.answered.update(i for ids in got["ids"] for i in ([] if content(include) else ids))
        return got

    def upsert(
        self, ids: list[str], embeddings: Any, documents: list[str], metadatas: list[Meta]
    ) -> None:
        self.upserts.append(len(ids))
        self.col.upsert(ids=ids, embeddings=embeddings, documents=documents, metadatas=metadatas)

    def update(self, ids: list[str], metadatas: list[Meta]) -> None:
        self.col.update(ids=ids, metadatas=metadatas)

    def delete(self, ids: list[str] | None = None, where: Where | None = None) -> None:
        self.col.delete(ids=ids, where=where)

    def modify(self, metadata: Meta) -> None:
        self.col.modify(metadata)


def content(include: Sequence[str]) -> bool:
    return bool({"documents", "metadatas", "embeddings"} & set(include))
