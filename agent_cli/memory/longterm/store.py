"""The collections long-term memory reads and writes, with the embedder they were written with.

A `Store` is what episodes, items (curation.py) and recall (reads.py) are given: its
collections by name (Chroma's, through chroma.py, or the snapshot's), the embedder, the
secrets to mask, and `guard`, which turns storage failures into a StorageError naming the
store. No chromadb here: a collection is anything with the `Collection` methods.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar

from agent_cli.core.errors import AgentError, EmbedderMismatch
from agent_cli.core.protocols import Embedder
from agent_cli.core.redact import redact_all
from agent_cli.memory.longterm.place import ChromaServer, storage_error

Meta = dict[str, Any]  # one record's metadata: str, int, float or bool values
Where = dict[str, Any]  # a Chroma `where` filter
Rows = dict[str, Any]  # Chroma's answer shape: "ids", "documents", "metadatas", "embeddings"
Hit = tuple[str, str, Meta, float]  # id, document, metadata, cosine similarity
T = TypeVar("T")

BATCH = 2000
WRITES = ("writing", "deleting", "expiring", "reindexing")  # what `guard` calls a change
INCLUDE = ("documents", "metadatas")
_STORAGE_ERRORS = (sqlite3.Error, OSError, RuntimeError, ValueError)
_VENDORS = ("chromadb", "httpx")  # errors of these modules, named without importing them


class Collection(Protocol):
    """A collection as long-term memory uses it (Chroma's method names and answer shapes)."""

    @property
    def metadata(self) -> Meta: ...

    def count(self) -> int: ...

    def get(
        self,
        ids: list[str] | None = None,
        where: Where | None = None,
        include: Sequence[str] = INCLUDE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Rows: ...

    def query(
        self,
        query_embeddings: list[Any],
        n_results: int = 10,
        where: Where | None = None,
        include: Sequence[str] = (*INCLUDE, "distances"),
    ) -> Rows: ...

    def upsert(
        self, ids: list[str], embeddings: Any, documents: list[str], metadatas: list[Meta]
    ) -> None: ...

    def update(self, ids: list[str], metadatas: list[Meta]) -> None: ...

    def delete(self, ids: list[str] | None = None, where: Where | None = None) -> None: ...


class Store:
    """Collections by name at `path`, the embedder and secrets; `before_write` runs before
    each change (the embedded store's snapshot bookkeeping)."""

    def __init__(
        self,
        path: Path | ChromaServer,
        embedder: Embedder,
        secrets: Iterable[str] = (),
        before_write: Callable[[], None] | None = None,
    ) -> None:
        self.path = path
        self.embedder = embedder
        self.secrets = tuple(s for s in secrets if s)
        self.cols: dict[str, Collection] = {}
        self.mismatch: tuple[str, Any] | None = None  # the embedder and dims it was written with
        self._before_write = before_write

    @contextmanager
    def guard(self, action: str) -> Iterator[None]:
        """Turn storage failures (sqlite, OS, chromadb, HTTP) into a StorageError naming the store."""
        try:
            if action in WRITES and self._before_write is not None:
                self._before_write()
            yield
        except Exception as e:
            vendor = type(e).__module__.split(".")[0] in _VENDORS
            if isinstance(e, AgentError) or not (vendor or isinstance(e, _STORAGE_ERRORS)):
                raise
            raise storage_error(self.path, action, e) from None

    def space_meta(self) -> Meta:
        """The metadata a new collection is created with: cosine space, this embedder."""
        return {
            "hnsw:space": "cosine",
            "embedder": self.embedder.name,
            "dim": int(self.embedder.dim),
        }

    def check_embedder(self, stored: Meta) -> None:
        """Record a mismatch when a collection was written with another embedder."""
        if stored.get("embedder") != self.embedder.name and self.mismatch is None:
            self.mismatch = (stored.get("embedder", "unknown"), stored.get("dim", "?"))

    def require_match(self) -> None:
        """Raise EmbedderMismatch when the store was written with another embedder."""
        if self.mismatch:
            name, dim = self.mismatch
            raise EmbedderMismatch(
                f"memory at {self.path} was embedded with {name} ({dim} dims), but the configured "
                f"embedder is {self.embedder.name}",
                f"run `agent memory reindex` to re-embed everything with {self.embedder.name}, "
                "or configure the embedder the store was built with",
            )

    def embed(self, texts: list[str]) -> Any:
        """Vectors for `texts`: a float32 array from WordLlama, lists from an endpoint."""
        embed_array = getattr(self.embedder, "embed_array", None)
        if embed_array is not None:
            return embed_array(texts)
        return self.embedder.embed(texts)

    def redact(self, value: T) -> T:
        """`value` with secrets masked in every string it holds."""
        masked: T = redact_all(value, self.secrets)
        return masked

    def upsert(self, col: Collection, ids: list[str], docs: list[str], metas: list[Meta]) -> None:
        """Embed `docs` and write them in batches Chroma accepts."""
        with self.guard("writing"):
            for i in range(0, len(ids), BATCH):
                col.upsert(
                    ids=ids[i : i + BATCH],
                    embeddings=self.embed(docs[i : i + BATCH]),
                    documents=docs[i : i + BATCH],
                    metadatas=metas[i : i + BATCH],
                )

    def query(self, name: str, vec: Any, n: int, where: Where | None) -> list[Hit]:
        """(id, document, metadata, cosine similarity) of the `n` nearest records of `name`."""
        with self.guard("searching"):
            got = self.cols[name].query(
                query_embeddings=[vec],
                n_results=max(n, 1),
                where=where,
                include=[*INCLUDE, "distances"],
            )
        return [
            (i, d, m or {}, 1.0 - float(dist))
            for i, d, m, dist in zip(
                got["ids"][0],
                got["documents"][0],
                got["metadatas"][0],
                got["distances"][0],
                strict=False,
            )
        ]
