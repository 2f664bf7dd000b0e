"""The collections long-term memory reads and writes, with the embedder they were written with.

A `Store` is what episodes, items (curation.py) and recall (reads.py) are given: its
collections by name (Chroma's, through chroma.py, or the snapshot's), the embedder, the
secrets to mask, and `guard`, which turns storage failures into a StorageError naming the
store. No chromadb here: a collection is anything with the `Collection` methods, and
`ChromaCollection` gives a Chroma collection (made in chroma.py) those methods.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

from agent_cli.core.errors import AgentError, EmbedderMismatch
from agent_cli.core.protocols import Embedder
from agent_cli.core.redact import redact_all
from agent_cli.memory.longterm.place import (
    ChromaServer,
    IndexNotReady,
    not_chromas,
    storage_error,
)

Meta = dict[str, Any]  # one record's metadata: str, int, float or bool values
Where = dict[str, Any]  # a Chroma `where` filter
Rows = dict[str, Any]  # Chroma's answer shape: "ids", "documents", "metadatas", "embeddings"
Hit = tuple[str, str, Meta, float]  # id, document, metadata, cosine similarity
T = TypeVar("T")

BATCH = 2000
CANDIDATES = 1000  # nearest rows filtered here before Chroma's filtered query is asked for
INDEX_TRIES = 3  # a search a server answers with IndexNotReady is asked this often in all
INDEX_PAUSE_S = 0.5  # before the second try; twice that before the third
_OPERATORS = ("$eq", "$gt", "$gte", "$lt", "$lte", "$in")
WRITES = ("writing", "deleting", "expiring", "reindexing")  # what `guard` calls a change
INCLUDE = ("documents", "metadatas")
UPGRADES = "upgrades"  # a collection's metadata key: the named upgrades done on it
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

    def modify(self, metadata: Meta) -> None: ...  # the collection's own metadata, replaced


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
        """Turn storage failures (sqlite, OS, chromadb, HTTP, a server's answer that is not
        Chroma's) into a StorageError naming the store; any other error is ours, and passes."""
        try:
            if action in WRITES and self._before_write is not None:
                self._before_write()
            yield
        except Exception as e:
            vendor = type(e).__module__.split(".")[0] in _VENDORS or bool(not_chromas(e))
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

    def upgrades(self, name: str) -> set[str]:
        """The named upgrades recorded as done on collection `name` (its metadata's `upgrades`)."""
        return set(str(self.cols[name].metadata.get(UPGRADES, "")).split(",")) - {""}

    def mark_upgraded(self, name: str, upgrade: str, done: bool = True) -> None:
        """Record on collection `name` that `upgrade` is done (so no later run looks again),
        or with `done` False that it is to be done again (a write brought what it upgrades)."""
        now = self.upgrades(name)
        wanted = now | {upgrade} if done else now - {upgrade}
        if wanted == now:
            return
        col = self.cols[name]
        # Chroma keeps the distance in its configuration and refuses to be given it again
        kept = {k: v for k, v in col.metadata.items() if not k.startswith("hnsw:")}
        with self.guard("writing"):
            col.modify({**kept, UPGRADES: ",".join(sorted(wanted))})

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

    def query(
        self, name: str, vec: Any, n: int, where: Where | None, narrow: Where | None = None
    ) -> list[Hit]:
        """(id, document, metadata, cosine similarity) of the `n` nearest records of `name`
        that pass `where`, nearest first.

        Filtered, the nearest rows are asked for without the filter (ids and distances, then
        the rows of the new ids) and filtered here: 4n, 8n, ... up to CANDIDATES (an answer
        shorter than asked for ends this only when every row has been seen: the index's search
        is approximate). Chroma evaluates a `where` clause over every row that passes it,
        seconds at a million rows, while the index finds the nearest in milliseconds. When
        CANDIDATES nearest rows hold fewer than `n` that pass, few rows pass: those of
        `narrow` (a clause of `where` that few rows pass, such as a repository's) are read, if
        there are at most CANDIDATES, and ranked here exactly (Chroma's filtered search misses
        some of so few); else Chroma's filtered query answers."""
        n, col = max(n, 1), self.cols[name]
        if where is None:
            return self._nearest(col, vec, n, None)
        fetch, seen, hits = 4 * n, set[str](), list[Hit]()
        while True:
            got = self._search(col, query_embeddings=[vec], n_results=fetch, include=["distances"])
            ids = got["ids"][0]
            distance = dict(zip(ids, got["distances"][0], strict=False))
            # the index's answers are approximate, not nested: at most CANDIDATES rows read
            new = [i for i in ids if i not in seen][: max(CANDIDATES - len(seen), 0)]
            seen.update(new)
            if new:
                with self.guard("searching"):
                    rows = col.get(ids=new, include=list(INCLUDE))
                for i, d, m in zip(rows["ids"], rows["documents"], rows["metadatas"], strict=False):
                    if matches(m or {}, where):
                        hits.append((i, d, m or {}, 1.0 - float(distance[i])))
            if len(hits) >= n or (len(ids) < fetch and self._all_seen(col, seen)):
                return sorted(hits, key=lambda h: -h[3])[:n]
            if fetch >= CANDIDATES:
                few = self._few(col, vec, n, where, narrow)
                return self._nearest(col, vec, n, where) if few is None else few
            fetch = min(fetch * 2, CANDIDATES)

    def _search(self, col: Collection, **query: Any) -> Rows:
        """`col.query(**query)`; asked again after a pause (INDEX_PAUSE_S, then twice that)
        while a server says it has not yet written the index the search needs."""
        for attempt in range(INDEX_TRIES):
            try:
                with self.guard("searching"):
                    return col.query(**query)
            except IndexNotReady:
                if attempt == INDEX_TRIES - 1:
                    raise
                time.sleep(INDEX_PAUSE_S * (attempt + 1))
        raise AssertionError("unreachable")

    def _all_seen(self, col: Collection, seen: set[str]) -> bool:
        """Whether `seen` holds every row of `col`: the index may answer with fewer rows than
        asked for while others remain (HNSW's search is approximate)."""
        with self.guard("searching"):
            return len(seen) >= col.count()

    def _few(
        self, col: Collection, vec: Any, n: int, where: Where, narrow: Where | None
    ) -> list[Hit] | None:
        """The `n` nearest of the rows that pass `narrow` and `where`, ranked exactly; None
        when more than CANDIDATES rows pass `narrow` (or there is none)."""
        if narrow is None:
            return None
        import numpy as np

        with self.guard("searching"):  # ids first: too many are never read
            ids = col.get(where=narrow, include=[], limit=CANDIDATES + 1)["ids"]
            if not ids or len(ids) > CANDIDATES:
                return None if ids else []
            got = col.get(ids=list(ids), include=[*INCLUDE, "embeddings"])
        q = np.asarray(vec, dtype=np.float32)
        hits: list[Hit] = []
        for i, d, m, v in zip(
            got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=False
        ):
            if matches(m or {}, where):
                v = np.asarray(v, dtype=np.float32)
                norm = float(np.linalg.norm(v) * np.linalg.norm(q)) or 1.0
                hits.append((i, d, m or {}, float(v @ q) / norm))
        return sorted(hits, key=lambda h: -h[3])[:n]

    def _nearest(self, col: Collection, vec: Any, n: int, where: Where | None) -> list[Hit]:
        """The `n` nearest records of `col` that pass `where`, as Chroma's filtered query finds them."""
        got = self._search(
            col, query_embeddings=[vec], n_results=n, where=where, include=[*INCLUDE, "distances"]
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


def matches(meta: Meta, where: Where | None, unknown: Sequence[str] = ()) -> bool:
    """Whether metadata passes a Chroma `where` filter ($and, $or, and on a key: a value or one
    of $eq $gt $gte $lt $lte $in), as Chroma decides: a key the metadata lacks never passes;
    a filter on a key of `unknown` is an error."""
    if not where:
        return True
    for key, cond in where.items():
        if key == "$and":
            ok = all(matches(meta, c, unknown) for c in cond)
        elif key == "$or":
            ok = any(matches(meta, c, unknown) for c in cond)
        elif key.startswith("$"):
            raise ValueError(f"unsupported filter {key}")
        elif key in unknown:
            raise ValueError(f"the snapshot does not keep {key}, so cannot filter on it")
        else:
            ok = key in meta and _holds(meta[key], cond)
        if not ok:
            return False
    return True


def _holds(value: Any, cond: Any) -> bool:
    if not isinstance(cond, dict):
        return _same(value, cond)
    for op, arg in cond.items():
        if op not in _OPERATORS:
            raise ValueError(f"unsupported filter operator {op}")
        if op == "$in":
            ok = any(_same(value, a) for a in arg)
        elif op == "$eq":
            ok = _same(value, arg)
        else:
            ok = (
                _number(value)
                and _number(arg)
                and {
                    "$gt": value > arg,
                    "$gte": value >= arg,
                    "$lt": value < arg,
                    "$lte": value <= arg,
                }[op]
            )
        if not ok:
            return False
    return True


def _same(a: Any, b: Any) -> bool:
    """Equal and of one kind: a boolean never equals a number, as in Chroma."""
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def count(col: Any, where: Where | None = None) -> int:
    """How many records collection `col` holds (those matching `where`, when given)."""
    return int(col.count()) if where is None else len(col.get(where=where, include=[])["ids"])


class ChromaCollection:
    """A Chroma collection as a `store.Collection`: plain lists and dicts in and out."""

    def __init__(self, col: Any) -> None:  # a chromadb Collection: not imported here
        self.col = col

    @property
    def metadata(self) -> Meta:
        return dict(self.col.metadata or {})

    def count(self) -> int:
        return int(self.col.count())

    def get(
        self,
        ids: list[str] | None = None,
        where: Where | None = None,
        include: Sequence[str] = INCLUDE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Rows:
        got = self.col.get(
            ids=ids,
            where=cast(Any, where),
            include=cast(Any, list(include)),
            limit=limit,
            offset=offset,
        )
        return cast(Rows, dict(got))

    def query(
        self,
        query_embeddings: list[Any],
        n_results: int = 10,
        where: Where | None = None,
        include: Sequence[str] = (*INCLUDE, "distances"),
    ) -> Rows:
        got = self.col.query(
            query_embeddings=query_embeddings,
            n_results=n_results,
            where=cast(Any, where),
            include=cast(Any, list(include)),
        )
        return cast(Rows, dict(got))

    def upsert(
        self, ids: list[str], embeddings: Any, documents: list[str], metadatas: list[Meta]
    ) -> None:
        self.col.upsert(
            ids=ids, embeddings=embeddings, documents=documents, metadatas=cast(Any, metadatas)
        )

    def update(self, ids: list[str], metadatas: list[Meta]) -> None:
        self.col.update(ids=ids, metadatas=cast(Any, metadatas))

    def delete(self, ids: list[str] | None = None, where: Where | None = None) -> None:
        self.col.delete(ids=ids, where=cast(Any, where))

    def modify(self, metadata: Meta) -> None:
        self.col.modify(metadata=cast(Any, metadata))
