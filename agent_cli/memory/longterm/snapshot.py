"""A copy of long-term memory's searchable collections that a run can read without chromadb.

A run's first model request (the plan) carries what long-term memory recalls about the
goal. Opening the embedded Chroma store for that costs chromadb's import and the client
(most of a second), so the store also keeps a snapshot beside its own files:
`agent-recall.npz`, holding the `facts` and `episodes` collections (ids, documents,
metadata without the bulky episode record, and the vectors). The run recalls from it with
numpy, exactly (no approximate index), through the same LongTermMemory code, and opens
the store itself later, in the background, for what it writes.

Keeping it true: a LongTermMemory deletes the snapshot before each write (`invalidate`),
and writes a new one when it closes if it wrote (`write`), so a snapshot on disk matches
the store as `agent` last left it; a process that died between the two leaves none, and
the next run opens the store as before (a store that an older version wrote gets one when
a run first changes it: every run does). Another program writing
into the store directly is not seen until `agent` next changes it.

Writing it anew costs a read of the whole store (0.8 s at 12,000 documents), so a store
that had a snapshot when it was first written to keeps it in memory, notes the ids each
write touches (`Tracked`), and at close reads back only those, and the ids alone in the
store's order (`patched`); when the rows that gives are not those the store holds (another
process wrote too), it is read whole.

Only a small store has one: past MAX_ROWS (episodes and facts together) a recall is one
query of Chroma's own index, which costs the same at a million rows, while the snapshot is
read whole and scanned row by row; such a store has its snapshot deleted at its first write
and gets none at close, and a snapshot file larger than MAX_BYTES (an older version wrote
one for any size) is not read. Writes note at most MAX_ROWS ids (`Tracked`): past that the
snapshot, if the store is still small enough, is read whole.

Only the embedded store has one: a memory server may hold what other clones learned.
The file is a cache: one that cannot be read or written is ignored (and one that cannot be
read is deleted).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from agent_cli.core.atomic import MiB
from agent_cli.core.errors import StorageError
from agent_cli.memory.longterm.store import INCLUDE, Collection, Meta, Rows, Where
from agent_cli.memory.longterm.store import matches as store_matches

FILE = "agent-recall.npz"
TEMP_PREFIX = ".agent-recall-"  # a snapshot being written
FORMAT = 1
COLLECTIONS = ("facts", "episodes")
MAX_ROWS = 20_000  # a store beyond this is recalled from through Chroma's index
MAX_BYTES = 128 * MiB  # a snapshot of MAX_ROWS rows takes about 40 MB
DROPPED_KEYS = ("episode",)  # the whole episode record: large, and no recall reads it


Table = dict[str, Any]  # "metadata", "ids", "documents", "metadatas", "vectors" (see `write`)


def path_of(store: Path) -> Path:
    return Path(store) / FILE


def invalidate(store: Path) -> None:
    """Delete the snapshot (before the store changes); OSError when it cannot be deleted."""
    path_of(store).unlink(missing_ok=True)


def exists(store: Path) -> bool:
    return path_of(store).is_file()


def write(store: Path, tables: dict[str, Table]) -> None:
    """Write the snapshot atomically. `tables`: collection name -> {"metadata": the collection's
    metadata, "ids", "documents", "metadatas", "vectors": a float32 array, one row per id}."""
    import numpy as np

    index: dict[str, Any] = {"format": FORMAT, "collections": {}}
    arrays: dict[str, Any] = {}
    for name in COLLECTIONS:
        table = tables[name]
        index["collections"][name] = {
            "metadata": table["metadata"],
            "ids": list(table["ids"]),
            "documents": list(table["documents"]),
            "metadatas": [
                {k: v for k, v in (m or {}).items() if k not in DROPPED_KEYS}
                for m in table["metadatas"]
            ],
        }
        arrays[f"vectors_{name}"] = np.asarray(table["vectors"], dtype=np.float32)
    arrays["index"] = np.frombuffer(json.dumps(index, ensure_ascii=False).encode(), dtype=np.uint8)
    for left in Path(store).glob(TEMP_PREFIX + "*"):  # from a process killed while writing
        left.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(dir=store, prefix=TEMP_PREFIX, suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(out, **arrays)
        os.replace(tmp, path_of(store))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load(store: Path, max_bytes: int = MAX_BYTES) -> dict[str, SnapshotCollection] | None:
    """The snapshot's collections, or None when there is none, it holds more than `max_bytes`
    or it cannot be read, or no database is beside it (then it is deleted, so that the store
    writes a new one when it next closes, if it is small enough). A snapshot whose database is
    gone (deleted, moved aside) is a copy of a store no longer there: read, it would answer
    with what every other command says does not exist, and what could not be forgotten."""
    path = path_of(store)
    if not path.is_file():
        return None
    try:
        if not (store / "chroma.sqlite3").is_file():
            raise ValueError("no database beside the snapshot")
        if path.stat().st_size > max_bytes:
            raise ValueError(f"a snapshot of {path.stat().st_size:,} bytes is not read")
        import numpy as np

        with np.load(path, allow_pickle=False) as data:
            index = json.loads(data["index"].tobytes().decode())
            if index.get("format") != FORMAT:
                raise ValueError(f"snapshot format {index.get('format')!r}")
            return {
                name: SnapshotCollection(name, index["collections"][name], data[f"vectors_{name}"])
                for name in COLLECTIONS
            }
    except Exception:  # a cache that cannot be read, whatever numpy or json found wrong
        try:
            invalidate(store)
        except OSError:
            pass
        return None


class SnapshotCollection:
    """One collection of the snapshot, a `store.Collection` read the way Chroma's is: `get`
    and `query` with a `where` filter, returning Chroma's shapes. Nothing can be written."""

    def __init__(self, name: str, table: Table, vectors: Any) -> None:
        ids, docs, metas = table["ids"], table["documents"], table["metadatas"]
        if not (len(ids) == len(docs) == len(metas) == len(vectors)):
            raise ValueError(f"snapshot collection {name} has rows of different lengths")
        self.name = name
        self._metadata: Meta = table.get("metadata") or {}
        self._ids: list[str] = ids
        self._docs: list[str] = docs
        self._metas: list[Meta] = metas
        self._vectors = vectors
        self._norms: Any = None  # of every row, computed on the first query

    @property
    def metadata(self) -> Meta:
        return self._metadata

    def count(self) -> int:
        return len(self._ids)

    def table(self, drop: set[str] | frozenset[str] = frozenset()) -> Table:
        """Its rows but those of `drop`, as a table of `write`."""
        keep = [i for i, item_id in enumerate(self._ids) if item_id not in drop]
        return {
            "metadata": self.metadata,
            "ids": [self._ids[i] for i in keep],
            "documents": [self._docs[i] for i in keep],
            "metadatas": [self._metas[i] for i in keep],
            "vectors": self._vectors[keep],
        }

    def _rows(self, ids: Iterable[str] | None, where: Where | None) -> list[int]:
        wanted = set(ids) if ids is not None else None
        return [
            i
            for i, item_id in enumerate(self._ids)
            if (wanted is None or item_id in wanted) and matches(self._metas[i], where)
        ]

    def get(
        self,
        ids: list[str] | None = None,
        where: Where | None = None,
        include: Sequence[str] = INCLUDE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> Rows:
        rows = self._rows(ids, where)[offset or 0 :]
        rows = rows[:limit] if limit is not None else rows
        got: dict[str, Any] = {"ids": [self._ids[i] for i in rows]}
        if "documents" in include:
            got["documents"] = [self._docs[i] for i in rows]
        if "metadatas" in include:
            got["metadatas"] = [dict(self._metas[i]) for i in rows]
        if "embeddings" in include:
            got["embeddings"] = self._vectors[rows]
        return got

    def query(
        self,
        query_embeddings: list[Any],
        n_results: int = 10,
        where: Where | None = None,
        include: Sequence[str] = (*INCLUDE, "distances"),
    ) -> Rows:
        """The `n_results` rows nearest each query by cosine distance (1 - similarity), exactly."""
        import numpy as np

        if self._norms is None:
            self._norms = np.linalg.norm(self._vectors, axis=1) if len(self._ids) else np.zeros(0)
        rows = (
            np.arange(len(self._ids))
            if where is None
            else np.asarray(self._rows(None, where), dtype=np.int64)
        )
        matrix, norms = (
            (self._vectors, self._norms)
            if where is None
            else (self._vectors[rows], self._norms[rows])
        )
        n = min(max(int(n_results), 0), len(rows))
        out: dict[str, list[Any]] = {"ids": [], "documents": [], "metadatas": [], "distances": []}
        for query in query_embeddings:
            q = np.asarray(query, dtype=np.float32)
            sims: Any = np.zeros(0)
            best: list[int] = []
            if n:
                with np.errstate(invalid="ignore", divide="ignore"):
                    sims = np.nan_to_num(matrix @ q / (norms * np.linalg.norm(q)))
                top = np.argpartition(-sims, n - 1)[:n] if n < len(sims) else np.arange(len(sims))
                best = sorted(top.tolist(), key=lambda j: (-sims[j], j))
            out["ids"].append([self._ids[rows[j]] for j in best])
            out["documents"].append([self._docs[rows[j]] for j in best])
            out["metadatas"].append([dict(self._metas[rows[j]]) for j in best])
            out["distances"].append([1.0 - float(sims[j]) for j in best])
        return out

    def upsert(
        self, ids: list[str], embeddings: Any, documents: list[str], metadatas: list[Meta]
    ) -> None:
        raise self._read_only()

    def update(self, ids: list[str], metadatas: list[Meta]) -> None:
        raise self._read_only()

    def delete(self, ids: list[str] | None = None, where: Where | None = None) -> None:
        raise self._read_only()

    def modify(self, metadata: Meta) -> None:
        raise self._read_only()

    def _read_only(self) -> StorageError:
        return StorageError(
            f"the recall snapshot's {self.name} cannot be written", "write to the store itself"
        )


class Tracked:
    """A collection whose every write notes the ids it touches in `changed`, at most `limit`
    of them: past that `changed` is emptied and `overflowed` set for good."""

    def __init__(self, col: Collection, changed: set[str], limit: int = MAX_ROWS) -> None:
        self.col, self.changed, self.limit = col, changed, limit
        self.overflowed = False

    def _note(self, ids: Iterable[str]) -> None:
        if self.overflowed:
            return
        self.changed.update(ids)
        if len(self.changed) > self.limit:
            self.changed.clear()
            self.overflowed = True

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
        return self.col.get(ids=ids, where=where, include=include, limit=limit, offset=offset)

    def query(
        self,
        query_embeddings: list[Any],
        n_results: int = 10,
        where: Where | None = None,
        include: Sequence[str] = (*INCLUDE, "distances"),
    ) -> Rows:
        return self.col.query(query_embeddings, n_results=n_results, where=where, include=include)

    def upsert(
        self, ids: list[str], embeddings: Any, documents: list[str], metadatas: list[Meta]
    ) -> None:
        self._note(ids)
        self.col.upsert(ids=ids, embeddings=embeddings, documents=documents, metadatas=metadatas)

    def update(self, ids: list[str], metadatas: list[Meta]) -> None:
        self._note(ids)
        self.col.update(ids=ids, metadatas=metadatas)

    def delete(self, ids: list[str] | None = None, where: Where | None = None) -> None:
        if ids is None and where is not None:  # the ids it would delete, then those
            ids = list(self.col.get(where=where, include=[])["ids"])
            if not ids:
                return
        self._note(ids or ())
        self.col.delete(ids=ids)

    def modify(self, metadata: Meta) -> None:
        self.col.modify(metadata)


def patched(
    base: dict[str, SnapshotCollection],
    changed: dict[str, set[str]],
    fetch: Callable[[str, list[str]], Table],
    order: Callable[[str], list[str]],
) -> dict[str, Table] | None:
    """The tables of `base` with the `changed` rows read again (`fetch(name, ids)` gives a
    table of those still stored), in the store's own order of its ids (`order(name)`: a
    read of the ids alone), so that whatever keeps that order (`get`) answers alike; None
    when the rows are not those the store holds: something other than these writes changed it."""
    import numpy as np

    tables: dict[str, Table] = {}
    for name in COLLECTIONS:
        old = base[name].table(drop=changed.get(name, set()))
        new = fetch(name, sorted(changed.get(name, ())))
        ids = old["ids"] + new["ids"]
        position = {item_id: n for n, item_id in enumerate(ids)}
        stored = order(name)
        if len(position) != len(ids) or sorted(stored) != sorted(position):
            return None
        rows = [position[item_id] for item_id in stored]
        parts = [t["vectors"] for t in (old, new) if len(t["ids"])]
        vectors = np.vstack(parts) if parts else np.zeros((0, 0), np.float32)
        docs, metas = old["documents"] + new["documents"], old["metadatas"] + new["metadatas"]
        tables[name] = {
            "metadata": new["metadata"],
            "ids": stored,
            "documents": [docs[n] for n in rows],
            "metadatas": [metas[n] for n in rows],
            "vectors": vectors[rows] if len(rows) else vectors,
        }
    return tables


def matches(meta: Meta, where: Where | None) -> bool:
    """Whether metadata passes a Chroma `where` filter (`store.matches`); a key the snapshot
    drops is an error (it would never pass here, and may in the store)."""
    return store_matches(meta, where, DROPPED_KEYS)
