"""Long-term memory in Chroma: episodes, facts, notes and procedures, searchable by meaning.

The only module that imports chromadb (inside functions, so importing this is cheap).
Collections: `episodes` (one document per run plus one per failure signature, each
pointing at its run and saying how the run fixed it, if it did), `facts` (facts, curated
notes and procedures, with trust and hits; see curation.py) and `archive` (expired items).
Every collection records the embedder's name and dimension. The store is a directory (an
embedded PersistentClient) or a `place.ChromaServer` (an HttpClient, shared by a team);
either way we supply the vectors, the server embeds nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_cli.core.errors import AgentError, EmbedderMismatch, StorageError, UsageError
from agent_cli.core.models import Episode
from agent_cli.core.redact import redact_all
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.curation import ITEM_KINDS, Curation, where
from agent_cli.memory.longterm.place import ChromaServer, probe, storage_error
from agent_cli.memory.longterm.records import (
    COLLECTIONS,
    Result,
    batches,
    episode_docs,
    public_meta,
    read_export,
    stamp,
)
from agent_cli.memory.longterm.signatures import signature_key

KINDS = ("all", "episode", *ITEM_KINDS)
LOCK_WAIT_S = 3.0
MIN_SCORE = 0.3  # a recalled item is at least this close to the query
ASSOCIATE_THRESHOLD = 0.78  # how close a fact or note must be to be associated with a text
BATCH = 2000
_STORAGE_ERRORS = (sqlite3.Error, OSError, RuntimeError, ValueError)
WRITES = ("writing", "deleting", "expiring", "reindexing")  # what _guard calls a change


class LongTermMemory(Curation):
    """Episodes, facts, notes and procedures in Chroma at `path`: a directory or a ChromaServer."""

    def __init__(
        self,
        path: Path | str | ChromaServer,
        embedder: Any,
        secrets: tuple[str, ...] | list[str] = (),
        *,
        min_score: float = MIN_SCORE,
        associate_threshold: float = ASSOCIATE_THRESHOLD,
        lock_wait_s: float = LOCK_WAIT_S,
    ) -> None:
        self._configure(path, embedder, secrets, min_score, associate_threshold)
        probe(self.path, lock_wait_s)
        with self._guard("opening"):
            self._client = _client(self.path)
            existing = {c.name for c in self._client.list_collections()}
            self._cols = {name: self._collection(name, existing) for name in COLLECTIONS}
        if self._snapshots:  # each write notes what it touched, for the snapshot at close
            self._cols = {
                name: snapshot.Tracked(col, self._changed.setdefault(name, set()))
                for name, col in self._cols.items()
            }

    def _configure(
        self,
        path: Path | str | ChromaServer,
        embedder: Any,
        secrets: tuple[str, ...] | list[str],
        min_score: float,
        associate_threshold: float,
    ) -> None:
        self.path = path if isinstance(path, ChromaServer) else Path(path)
        self.embedder = embedder
        self.secrets = tuple(s for s in secrets if s)
        self.min_score = min_score
        self.associate_threshold = associate_threshold
        self._mismatch: tuple[str, Any] | None = None
        self._snapshots = isinstance(self.path, Path)  # an embedded store keeps one (snapshot.py)
        self._wrote = False
        self._base: dict[str, Any] | None = None  # the snapshot as it was before the first write
        self._changed: dict[str, set[str]] = {}  # collection -> the ids written since
        self._whole = False  # the next snapshot must be read from the whole store

    def close(self) -> None:
        """Write the recall snapshot if this object changed the store, then release the
        client and its files; the object cannot be used afterwards."""
        try:
            self._write_snapshot()
        except (StorageError, OSError):
            pass  # a cache: without it, the next run opens the store instead
        finally:
            with self._guard("closing"):
                self._client.close()

    def _write_snapshot(self) -> None:
        """A new snapshot of an embedded store that this object changed (a store only read
        keeps the one it has, or none): the one it had with the rows written since read
        again, else the store read whole."""
        if not self._snapshots or self._mismatch or not self._wrote:
            return
        tables = None
        if self._base is not None and not self._whole:
            tables = snapshot.patched(
                self._base, self._changed, self._table, lambda name: self._cols[name].count()
            )
        snapshot.write(
            self.path, tables or {name: self._table(name) for name in snapshot.COLLECTIONS}
        )

    def _table(self, name: str, ids: list[str] | None = None) -> dict[str, Any]:
        """The collection's records (all, or those of `ids` still stored) as a snapshot table."""
        import numpy as np

        recs = list(self._records(name, vectors=True, ids=ids))
        vectors = np.asarray([r["embedding"] for r in recs], dtype=np.float32)
        return {
            "metadata": self._cols[name].metadata or {},
            "ids": [r["id"] for r in recs],
            "documents": [r["document"] for r in recs],
            "metadatas": [r["metadata"] for r in recs],
            "vectors": vectors.reshape(len(recs), -1)
            if recs
            else np.zeros((0, 0), dtype=np.float32),
        }

    def open_in_background(self, after_s: float = 0.0) -> None:
        """Nothing to do: this store is open."""

    def __enter__(self) -> LongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn storage failures (sqlite, OS, chromadb, HTTP) into a StorageError naming the store."""
        try:
            if action in WRITES and self._snapshots:
                if not self._wrote:
                    self._base = snapshot.load(self.path)  # patched at close (snapshot.py)
                snapshot.invalidate(self.path)  # no snapshot may outlive what it copied
                self._wrote = True
            yield
        except Exception as e:
            vendor = type(e).__module__.split(".")[0] in ("chromadb", "httpx")  # not imported here
            if isinstance(e, AgentError) or not (vendor or isinstance(e, _STORAGE_ERRORS)):
                raise
            raise storage_error(self.path, action, e) from None

    def _collection(self, name: str, existing: set[str]) -> Any:
        """The named collection, created for this embedder if new; records a mismatch."""
        if name not in existing and f"{name}-reindex" in existing:
            self._client.get_collection(f"{name}-reindex").modify(name=name)  # finish a reindex
            existing = existing | {name}
        if name not in existing:
            return self._client.create_collection(
                name, metadata=self._space_meta(), embedding_function=None
            )
        col = self._client.get_collection(name, embedding_function=None)
        self._check_embedder(col.metadata or {})
        return col

    def _check_embedder(self, stored: dict[str, Any]) -> None:
        """Record a mismatch when a collection was written with another embedder."""
        if stored.get("embedder") != self.embedder.name and self._mismatch is None:
            self._mismatch = (stored.get("embedder", "unknown"), stored.get("dim", "?"))

    def _space_meta(self) -> dict[str, Any]:
        return {
            "hnsw:space": "cosine",
            "embedder": self.embedder.name,
            "dim": int(self.embedder.dim),
        }

    def _require_match(self) -> None:
        """Raise EmbedderMismatch when the store was written with another embedder."""
        if self._mismatch:
            name, dim = self._mismatch
            raise EmbedderMismatch(
                f"memory at {self.path} was embedded with {name} ({dim} dims), but the configured "
                f"embedder is {self.embedder.name}",
                f"run `agent memory reindex` to re-embed everything with {self.embedder.name}, "
                "or configure the embedder the store was built with",
            )

    def _embed(self, texts: list[str]) -> Any:
        """Vectors for `texts`: a float32 array from WordLlama, lists from an endpoint."""
        if hasattr(self.embedder, "embed_array"):
            return self.embedder.embed_array(texts)
        return self.embedder.embed(texts)

    def _redact(self, value: Any) -> Any:
        """`value` with secrets masked in every string it holds."""
        return redact_all(value, self.secrets)

    def _upsert(self, col: Any, ids: list[str], docs: list[str], metas: list[dict]) -> None:
        """Embed `docs` and write them in batches Chroma accepts."""
        with self._guard("writing"):
            for i in range(0, len(ids), BATCH):
                vectors = self._embed(docs[i : i + BATCH])
                col.upsert(
                    ids=ids[i : i + BATCH],
                    embeddings=vectors,
                    documents=docs[i : i + BATCH],
                    metadatas=metas[i : i + BATCH],
                )

    def add_episode(self, ep: Episode) -> None:
        """Store one run's episode and its failure signatures, replacing an earlier version."""
        self.add_episodes([ep])

    def add_episodes(self, episodes: list[Episode]) -> None:
        """Store many episodes at once (upsert by run id)."""
        self._require_match()
        ids, docs, metas = [], [], []
        for ep in episodes:
            ep = Episode.model_validate(self._redact(ep.model_dump()))
            doc, gist = episode_docs(ep)
            date = ep.ended_at or ep.started_at or stamp(None)[0]
            base = {
                "run_id": ep.run_id,
                "status": ep.status,
                "created_at": date,
                "source": f"run {ep.run_id}",
                "gist": gist,
            }
            ids.append(ep.run_id)
            docs.append(doc)
            metas.append({**base, "doc": "episode", "episode": ep.model_dump_json()})
            fixed = {sig: fix for fix in ep.fixes for sig in fix.signatures}
            for n, sig in enumerate(ep.failure_signatures):
                ids.append(f"{ep.run_id}#sig{n}")
                docs.append(sig)
                fix = fixed.get(sig)
                metas.append(
                    {
                        **base,
                        "doc": "signature",
                        "sig_key": signature_key(sig),
                        "fixed": fix is not None,
                        "fix": fix.summary if fix else "",
                        "fix_task": fix.task if fix else "",
                    }
                )
        col = self._cols["episodes"]
        with self._guard("writing"):
            run_ids = [ep.run_id for ep in episodes]
            for i in range(0, len(run_ids), BATCH):
                col.delete(where={"run_id": {"$in": run_ids[i : i + BATCH]}})
        self._upsert(col, ids, docs, metas)

    def _search_episodes(self, vec: Any, k: int) -> list[Result]:
        """Episodes near `vec`, one result per run, a failure-signature hit naming the signature."""
        best: dict[str, Result] = {}
        for doc_id, doc, meta, score in self._query("episodes", vec, k * 3, None):
            run_id = meta.get("run_id", doc_id)
            if run_id in best and best[run_id].score >= score:
                continue
            extra = {"matched_signature": doc} if meta.get("doc") == "signature" else {}
            gist = meta.get("gist", "") + (f" [failed before: {doc}]" if extra else "")
            if meta.get("fix"):
                gist += f" [fixed by: {meta['fix']}]"
            best[run_id] = Result(
                score,
                "episode",
                run_id,
                doc,
                gist,
                meta.get("source", ""),
                meta.get("created_at", ""),
                {**public_meta(meta), **extra},
            )
        return list(best.values())

    def _query(self, name: str, vec: Any, n: int, where: dict | None) -> list[tuple]:
        """(id, document, metadata, cosine similarity) of the `n` nearest items."""
        with self._guard("searching"):
            got = self._cols[name].query(
                query_embeddings=[vec],
                n_results=max(n, 1),
                where=where,
                include=["documents", "metadatas", "distances"],
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

    def recall(
        self,
        query: str,
        k: int = 5,
        kind: str = "all",
        min_trust: float = 0.5,
        min_score: float | None = None,
    ) -> list[Result]:
        """The `k` most relevant episodes and facts above the relevance threshold, best first."""
        if kind not in KINDS:
            raise UsageError(f"unknown kind {kind!r}", f"use one of {', '.join(KINDS)}")
        self._require_match()
        if not query.strip() or k < 1:
            return []
        vec = self._embed([query])[0]
        found: list[Result] = []
        if kind in ("all", "episode"):
            found += self._search_episodes(vec, k)
        if kind != "episode":
            found += self._search_items(vec, k, min_trust, ITEM_KINDS if kind == "all" else (kind,))
        floor = self.min_score if min_score is None else min_score
        return sorted((r for r in found if r.score >= floor), key=lambda r: -r.score)[:k]

    def fixes_for(self, signatures: list[str], exclude_run: str = "", k: int = 3) -> list[Result]:
        """Earlier runs that had one of these failures (same test, same kind of error) and got
        the task verified, newest first, each saying how it was fixed."""
        keys = sorted({signature_key(s) for s in signatures if s.strip()})
        if not keys:
            return []
        with self._guard("reading"):
            got = self._cols["episodes"].get(
                where=where({"doc": "signature"}, {"fixed": True}, {"sig_key": {"$in": keys}}),
                include=["documents", "metadatas"],
            )
        best: dict[str, Result] = {}
        for doc, meta in sorted(
            zip(got["documents"], got["metadatas"], strict=False),
            key=lambda dm: dm[1].get("created_at", ""),
            reverse=True,
        ):
            run_id = meta.get("run_id", "")
            if run_id == exclude_run or run_id in best:
                continue
            gist = f'{doc} -> fixed in task "{meta.get("fix_task", "")}": {meta.get("fix", "")}'
            best[run_id] = Result(
                1.0,
                "episode",
                run_id,
                meta.get("fix", ""),
                gist,
                meta.get("source", ""),
                meta.get("created_at", ""),
                {**public_meta(meta), "matched_signature": doc},
            )
        return list(best.values())[:k]

    def counts(self) -> dict[str, int]:
        """How many episodes, facts, notes and procedures are active, and how many archived."""
        with self._guard("counting"):
            eps = self._cols["episodes"]
            signatures = len(eps.get(where={"doc": "signature"}, include=[])["ids"])
            episodes, archive = eps.count() - signatures, self._cols["archive"].count()
        return {"episodes": episodes, **self.kind_counts(), "archive": archive}

    def forget(self, item_id: str) -> int:
        """Delete an item (an episode with its failure signatures); how many documents went."""
        removed = 0
        with self._guard("deleting"):
            for name, col in self._cols.items():
                ids = set(col.get(ids=[item_id], include=[])["ids"])
                if name == "episodes":
                    ids.update(col.get(where={"run_id": item_id}, include=[])["ids"])
                if ids:
                    col.delete(ids=sorted(ids))
                    removed += len(ids)
        return removed

    def _records(
        self, name: str, vectors: bool = False, ids: list[str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every stored record of a collection (or those of `ids`), in batches, with its
        "embedding" if `vectors`."""
        col, offset = self._cols[name], 0
        include = ["documents", "metadatas", *(["embeddings"] if vectors else [])]
        while ids is None or offset < len(ids):
            with self._guard("reading"):
                got = (
                    col.get(include=include, limit=BATCH, offset=offset)
                    if ids is None
                    else col.get(ids=ids[offset : offset + BATCH], include=include)
                )
            for n, (i, d, m) in enumerate(
                zip(got["ids"], got["documents"], got["metadatas"], strict=False)
            ):
                rec = {"collection": name, "id": i, "document": d, "metadata": m or {}}
                if vectors:
                    rec["embedding"] = got["embeddings"][n]
                yield rec
            if ids is None and len(got["ids"]) < BATCH:
                return
            offset += BATCH

    def export(self, path: Path | str) -> int:
        """Write every record as one JSON line (without vectors); how many were written."""
        n = 0
        with self._guard("exporting"), open(path, "w", encoding="utf-8") as out:
            for name in COLLECTIONS:
                for rec in self._records(name):
                    out.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    n += 1
        return n

    def import_(self, path: Path | str) -> int:
        """Check a whole export file, then re-embed and upsert its records in batches; how many."""
        self._require_match()
        total = sum(1 for _ in read_export(path))  # one bad line anywhere: nothing is imported
        for name, ids, docs, metas in batches(read_export(path), BATCH):
            self._upsert(self._cols[name], ids, self._redact(docs), self._redact(metas))
        return total

    def reindex(self) -> int:
        """Re-embed every record with the current embedder; how many were re-embedded."""
        total, self._whole = 0, True  # every vector changes
        for name in COLLECTIONS:
            recs = list(self._records(name))
            with self._guard("reindexing"):
                if f"{name}-reindex" in {c.name for c in self._client.list_collections()}:
                    self._client.delete_collection(f"{name}-reindex")
                tmp = self._client.create_collection(
                    f"{name}-reindex", metadata=self._space_meta(), embedding_function=None
                )
            self._upsert(
                tmp,
                [r["id"] for r in recs],
                [r["document"] for r in recs],
                [r["metadata"] for r in recs],
            )
            with self._guard("reindexing"):
                self._client.delete_collection(name)  # the copy is complete; see _collection
                tmp.modify(name=name)
                self._cols[name] = self._client.get_collection(name, embedding_function=None)
            total += len(recs)
        self._mismatch = None
        return total


def _client(where: Path | ChromaServer) -> Any:
    """A Chroma client with telemetry off: a PersistentClient at a path, an HttpClient for a server."""
    import gc

    collecting = gc.isenabled()
    gc.disable()  # chromadb's import allocates a great deal; collecting meanwhile costs ~0.1 s
    try:
        import chromadb
        from chromadb.config import Settings as ChromaSettings
    finally:
        if collecting:
            gc.enable()

    if isinstance(where, ChromaServer):
        return _http_client(chromadb, ChromaSettings(anonymized_telemetry=False), where)
    where.mkdir(parents=True, exist_ok=True)
    return chromadb.PersistentClient(
        path=str(where), settings=ChromaSettings(anonymized_telemetry=False)
    )


def _http_client(chromadb: Any, settings: Any, server: ChromaServer) -> Any:
    """An HttpClient on the server's tenant and database (`place.probe_server` made sure of both)."""
    import httpx

    client = chromadb.HttpClient(
        host=server.host,
        port=server.port,
        ssl=server.ssl,
        headers=server.headers(),
        settings=settings,
        tenant=server.tenant,
        database=server.database,
    )
    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):  # chromadb sets no timeout: a hung server would hang us
        session.timeout = httpx.Timeout(120.0, connect=server.timeout_s)
    return client
