"""Long-term memory in Chroma: episodes, facts and curated notes, searchable by meaning.

The only module that imports chromadb (inside functions, so importing this is cheap).
Collections: `episodes` (one document per run plus one per failure signature, each
pointing at its run), `facts` (facts and curated notes, with trust and a time to live)
and `archive` (expired items). Every collection records the embedder's name and dimension.
The store is a directory (an embedded PersistentClient) or a `place.ChromaServer` (an
HttpClient, shared by a team); either way we supply the vectors, the server embeds nothing.
"""

from __future__ import annotations

import json
import secrets as _random
import sqlite3
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from agent_cli.errors import AgentError, EmbedderMismatch, StorageError, UsageError
from agent_cli.memory.place import ChromaServer, probe, storage_error
from agent_cli.memory.records import (COLLECTIONS, Result, batches, episode_docs, expiry, one_line,
                                      public_meta, read_export, stamp, text_hash)
from agent_cli.models import Episode
from agent_cli.redact import redact

KINDS = ("all", "episode", "fact")
LOCK_WAIT_S = 3.0
BATCH = 2000
_STORAGE_ERRORS = (sqlite3.Error, OSError, RuntimeError, ValueError)


class LongTermMemory:
    """Episodes, facts and curated notes in Chroma at `path`: a directory or a ChromaServer."""

    def __init__(self, path: Path | str | ChromaServer, embedder: Any,
                 secrets: tuple[str, ...] | list[str] = (),
                 *, min_score: float = 0.3, associate_threshold: float = 0.78,
                 lock_wait_s: float = LOCK_WAIT_S) -> None:
        self.path = path if isinstance(path, ChromaServer) else Path(path)
        self.embedder = embedder
        self.secrets = tuple(s for s in secrets if s)
        self.min_score = min_score
        self.associate_threshold = associate_threshold
        probe(self.path, lock_wait_s)
        self._mismatch: tuple[str, Any] | None = None
        with self._guard("opening"):
            self._client = _client(self.path)
            existing = {c.name for c in self._client.list_collections()}
            self._cols = {name: self._collection(name, existing) for name in COLLECTIONS}

    def close(self) -> None:
        """Release the client and its files; the object cannot be used afterwards."""
        with self._guard("closing"):
            self._client.close()

    def __enter__(self) -> "LongTermMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _guard(self, action: str) -> Iterator[None]:
        """Turn storage failures (sqlite, OS, chromadb, HTTP) into a StorageError naming the store."""
        try:
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
            return self._client.create_collection(name, metadata=self._space_meta(), embedding_function=None)
        col = self._client.get_collection(name, embedding_function=None)
        stored = col.metadata or {}
        if stored.get("embedder") != self.embedder.name and self._mismatch is None:
            self._mismatch = (stored.get("embedder", "unknown"), stored.get("dim", "?"))
        return col

    def _space_meta(self) -> dict[str, Any]:
        return {"hnsw:space": "cosine", "embedder": self.embedder.name, "dim": int(self.embedder.dim)}

    def _require_match(self) -> None:
        """Raise EmbedderMismatch when the store was written with another embedder."""
        if self._mismatch:
            name, dim = self._mismatch
            raise EmbedderMismatch(
                f"memory at {self.path} was embedded with {name} ({dim} dims), but the configured "
                f"embedder is {self.embedder.name}",
                f"run `agent memory reindex` to re-embed everything with {self.embedder.name}, "
                "or configure the embedder the store was built with")

    def _embed(self, texts: list[str]) -> Any:
        """Vectors for `texts`: a float32 array from WordLlama, lists from an endpoint."""
        if hasattr(self.embedder, "embed_array"):
            return self.embedder.embed_array(texts)
        return self.embedder.embed(texts)

    def _redact(self, value: Any) -> Any:
        """`value` with secrets masked in every string it holds."""
        if isinstance(value, str):
            return redact(value, self.secrets)
        if isinstance(value, list):
            return [self._redact(v) for v in value]
        if isinstance(value, dict):
            return {k: self._redact(v) for k, v in value.items()}
        return value

    def _upsert(self, col: Any, ids: list[str], docs: list[str], metas: list[dict]) -> None:
        """Embed `docs` and write them in batches Chroma accepts."""
        with self._guard("writing"):
            for i in range(0, len(ids), BATCH):
                vectors = self._embed(docs[i:i + BATCH])
                col.upsert(ids=ids[i:i + BATCH], embeddings=vectors,
                           documents=docs[i:i + BATCH], metadatas=metas[i:i + BATCH])

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
            base = {"run_id": ep.run_id, "status": ep.status, "created_at": date,
                    "source": f"run {ep.run_id}", "gist": gist}
            ids.append(ep.run_id)
            docs.append(doc)
            metas.append({**base, "doc": "episode", "episode": ep.model_dump_json()})
            for n, sig in enumerate(ep.failure_signatures):
                ids.append(f"{ep.run_id}#sig{n}")
                docs.append(sig)
                metas.append({**base, "doc": "signature"})
        col = self._cols["episodes"]
        with self._guard("writing"):
            run_ids = [ep.run_id for ep in episodes]
            for i in range(0, len(run_ids), BATCH):
                col.delete(where={"run_id": {"$in": run_ids[i:i + BATCH]}})
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
            best[run_id] = Result(score, "episode", run_id, doc, gist, meta.get("source", ""),
                                  meta.get("created_at", ""), {**public_meta(meta), **extra})
        return list(best.values())

    def add_fact(self, text: str, source: str, trust: float = 1.0, *, now: datetime | None = None,
                 ttl_days: float = 0) -> str:
        """Store a fact (trust 1.0 when the harness observed it); the same text re-confirms it."""
        return self._put_item(text, kind="fact", source=source, trust=trust, now=now, ttl_days=ttl_days)

    def curate(self, text: str, *, topic: str, origin_event_id: str, now: datetime | None = None,
               trust: float = 0.6, ttl_days: float = 90) -> str:
        """Keep a note the run found worth remembering; returns its id `mem_YYYYMMDD_xxxxxx`."""
        return self._put_item(text, kind="note", source=f"event {origin_event_id}", trust=trust,
                              now=now, ttl_days=ttl_days, topic=topic, origin_event_id=origin_event_id)

    def _put_item(self, text: str, *, kind: str, source: str, trust: float, now: datetime | None,
                  ttl_days: float, **extra: str) -> str:
        """Add an item to `facts`, or re-confirm the one with the same text."""
        self._require_match()
        text, source = self._redact(text).strip(), self._redact(source)
        if not text:
            raise UsageError("a memory item needs some text")
        iso, ts = stamp(now)
        col, digest = self._cols["facts"], text_hash(text)
        with self._guard("reading"):
            got = col.get(where={"text_hash": digest}, include=["metadatas"], limit=1)
        if got["ids"]:
            old = got["metadatas"][0]
            meta = {"confirmed_at": iso, "confirmed_ts": ts, "trust": max(float(old["trust"]), trust),
                    "expires_ts": expiry(ts, old.get("last_hit_ts", 0), old["ttl_days"])}
            if trust > float(old["trust"]):
                meta.update(kind=kind, source=source)
            with self._guard("writing"):
                col.update(ids=got["ids"], metadatas=[meta])
            return got["ids"][0]
        item_id = f"mem_{datetime.fromtimestamp(ts, timezone.utc):%Y%m%d}_{_random.token_hex(3)}"
        meta = {"kind": kind, "source": source, "trust": float(trust), "created_at": iso,
                "confirmed_at": iso, "confirmed_ts": ts, "hit_count": 0, "last_hit_at": "",
                "last_hit_ts": 0.0, "ttl_days": float(ttl_days), "expires_ts": expiry(ts, 0, ttl_days),
                "text_hash": digest, "gist": one_line(text, 200), "topic": "", "origin_event_id": "",
                **{k: self._redact(v) for k, v in extra.items()}}
        self._upsert(col, [item_id], [text], [meta])
        return item_id

    def _search_facts(self, vec: Any, k: int, min_trust: float) -> list[Result]:
        where = {"trust": {"$gte": float(min_trust)}}
        return [Result(score, "fact", i, doc, meta.get("gist", ""), meta.get("source", ""),
                       meta.get("confirmed_at", ""), public_meta(meta))
                for i, doc, meta, score in self._query("facts", vec, k, where)]

    def associate(self, text: str, *, now: datetime | None = None, k: int = 3,
                  threshold: float | None = None) -> list[Result]:
        """The top `k` active items closer than the threshold to `text`; counts a hit on each."""
        self._require_match()
        limit = self.associate_threshold if threshold is None else threshold
        if not text.strip():
            return []
        hits = [r for r in self._search_facts(self._embed([text])[0], k, 0.0) if r.score > limit]
        iso, ts = stamp(now)
        for r in hits:
            r.metadata.update(hit_count=int(r.metadata.get("hit_count", 0)) + 1, last_hit_at=iso)
        if hits:
            metas = [{"hit_count": r.metadata["hit_count"], "last_hit_at": iso, "last_hit_ts": ts,
                      "expires_ts": expiry(r.metadata.get("confirmed_ts", 0), ts,
                                            r.metadata.get("ttl_days", 0))} for r in hits]
            with self._guard("writing"):
                self._cols["facts"].update(ids=[r.id for r in hits], metadatas=metas)
        return hits

    def expire(self, now: datetime | None = None) -> int:
        """Move items unused for longer than their ttl_days into the archive; how many moved."""
        iso, ts = stamp(now)
        facts, archive = self._cols["facts"], self._cols["archive"]
        with self._guard("expiring"):
            got = facts.get(where={"expires_ts": {"$lt": ts}},
                            include=["documents", "metadatas", "embeddings"])
            if not got["ids"]:
                return 0
            metas = [{**m, "archived_at": iso} for m in got["metadatas"]]
            archive.upsert(ids=got["ids"], embeddings=got["embeddings"],
                           documents=got["documents"], metadatas=metas)
            facts.delete(ids=got["ids"])
        return len(got["ids"])

    def _query(self, name: str, vec: Any, n: int, where: dict | None) -> list[tuple]:
        """(id, document, metadata, cosine similarity) of the `n` nearest items."""
        with self._guard("searching"):
            got = self._cols[name].query(query_embeddings=[vec], n_results=max(n, 1), where=where,
                                         include=["documents", "metadatas", "distances"])
        return [(i, d, m or {}, 1.0 - float(dist)) for i, d, m, dist in
                zip(got["ids"][0], got["documents"][0], got["metadatas"][0], got["distances"][0])]

    def recall(self, query: str, k: int = 5, kind: str = "all", min_trust: float = 0.5,
               min_score: float | None = None) -> list[Result]:
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
        if kind in ("all", "fact"):
            found += self._search_facts(vec, k, min_trust)
        floor = self.min_score if min_score is None else min_score
        return sorted((r for r in found if r.score >= floor), key=lambda r: -r.score)[:k]

    def counts(self) -> dict[str, int]:
        """How many episodes, active facts and notes, and archived items are stored."""
        with self._guard("counting"):
            eps = self._cols["episodes"]
            signatures = len(eps.get(where={"doc": "signature"}, include=[])["ids"])
            return {"episodes": eps.count() - signatures, "facts": self._cols["facts"].count(),
                    "archive": self._cols["archive"].count()}

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

    def _records(self, name: str) -> Iterator[dict[str, Any]]:
        """Every stored record of a collection, in batches."""
        col, offset = self._cols[name], 0
        while True:
            with self._guard("reading"):
                got = col.get(include=["documents", "metadatas"], limit=BATCH, offset=offset)
            for i, d, m in zip(got["ids"], got["documents"], got["metadatas"]):
                yield {"collection": name, "id": i, "document": d, "metadata": m or {}}
            if len(got["ids"]) < BATCH:
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
        total = 0
        for name in COLLECTIONS:
            recs = list(self._records(name))
            with self._guard("reindexing"):
                if f"{name}-reindex" in {c.name for c in self._client.list_collections()}:
                    self._client.delete_collection(f"{name}-reindex")
                tmp = self._client.create_collection(f"{name}-reindex", metadata=self._space_meta(),
                                                     embedding_function=None)
            self._upsert(tmp, [r["id"] for r in recs], [r["document"] for r in recs],
                         [r["metadata"] for r in recs])
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
    return chromadb.PersistentClient(path=str(where),
                                     settings=ChromaSettings(anonymized_telemetry=False))


def _http_client(chromadb: Any, settings: Any, server: ChromaServer) -> Any:
    """An HttpClient on the server's tenant and database (`place.probe_server` made sure of both)."""
    import httpx

    client = chromadb.HttpClient(host=server.host, port=server.port, ssl=server.ssl,
                                 headers=server.headers(), settings=settings,
                                 tenant=server.tenant, database=server.database)
    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):  # chromadb sets no timeout: a hung server would hang us
        session.timeout = httpx.Timeout(120.0, connect=server.timeout_s)
    return client
