"""Long-term memory in Chroma: episodes, facts, notes and procedures, searchable by meaning.

The only module that imports chromadb (inside functions, so importing this is cheap).
Collections: `episodes` (one document per run plus one per failure signature, each
pointing at its run and saying how the run fixed it, if it did), `facts` (facts, curated
notes and procedures, with trust and hits; see curation.py) and `archive` (expired items).
Every collection records the embedder's name and dimension. The store is a directory (an
embedded PersistentClient) or a `place.ChromaServer` (an HttpClient, shared by a team);
either way we supply the vectors, the server embeds nothing.

Several runs may share the embedded store: every change is made holding its write lock
(`write.lock.WriteLock`), from a client opened again when another process wrote since this
one's was opened; every read holds it shared (Chroma's reads save the index too), so reads
go on side by side but never beside a write, and one that fails anyway is made again from a
fresh client. A server takes concurrent writers as they come; a
collection another client replaced there is looked up again by name (`_found_again`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast

from agent_cli.core import atomic
from agent_cli.core.errors import EmbedderMismatch, MemoryUnavailable, StorageError
from agent_cli.core.models import Episode
from agent_cli.core.protocols import Embedder, Recalled
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.curation import (
    CONTENT_UPGRADE,
    ITEM_KINDS,
    Curation,
    topic_fields,
    topic_where,
)
from agent_cli.memory.longterm.place import (
    OPEN_CALLS,
    ChromaServer,
    CollectionGone,
    NoMemoryYet,
    probe,
    within,
)
from agent_cli.memory.longterm.reads import MIN_SCORE, Reader
from agent_cli.memory.longterm.records import (
    COLLECTIONS,
    Result,
    batches,
    episode_docs,
    item_meta,
    stamp,
)
from agent_cli.memory.longterm.signatures import signature_key
from agent_cli.memory.longterm.store import (
    BATCH,
    UPGRADES,
    ChromaCollection,
    Collection,
    Meta,
    Store,
    Where,
    count,
)
from agent_cli.memory.longterm.write import forget as forgetting
from agent_cli.memory.longterm.write import importer
from agent_cli.memory.longterm.write.lock import WAIT_S, WriteLock

if TYPE_CHECKING:
    from chromadb.api.client import Client

LOCK_WAIT_S = 3.0
READ_TRIES = 3  # a read that meets another process's write in progress is made again
READ_PAUSE_S = 0.5  # before a read made again without waiting for the write lock
T = TypeVar("T")
Topics = list[str] | None  # the repositories a read or a change keeps to (None: all)
ASSOCIATE_THRESHOLD = 0.78  # how close a fact or note must be to be associated with a text


class LongTermMemory:
    """Episodes, facts, notes and procedures in Chroma at `path`: a directory or a ChromaServer."""

    def __init__(
        self,
        path: Path | str | ChromaServer,
        embedder: Embedder,
        secrets: tuple[str, ...] | list[str] = (),
        *,
        min_score: float = MIN_SCORE,
        associate_threshold: float = ASSOCIATE_THRESHOLD,
        lock_wait_s: float = LOCK_WAIT_S,
        write_wait_s: float = WAIT_S,
        snapshot_rows: int = snapshot.MAX_ROWS,
        reads_only: bool = False,
    ) -> None:
        self.path = path if isinstance(path, ChromaServer) else Path(path)
        self.reads_only = reads_only  # opened to read only: never holds the lock exclusive
        self.snapshot_rows = snapshot_rows  # a larger store keeps no snapshot, lists a slice
        self.embedder = embedder
        # one writer at a time in an embedded store; a server serializes writes itself
        self.lock = WriteLock(self.path, write_wait_s) if isinstance(self.path, Path) else None
        self._generation = ""  # the lock's generation when the client was opened
        self._wrote = False
        self._base: dict[str, snapshot.SnapshotCollection] | None = None  # before the first write
        self._changed: dict[str, set[str]] = {}  # collection -> the ids written since
        self._tracked: dict[str, snapshot.Tracked] = {}  # the collections noting them
        self._whole = False  # the next snapshot must be read from the whole store
        self.store = Store(self.path, embedder, secrets, before_write=self._before_write)
        self.items = Curation(self.store, associate_threshold, listed_whole=snapshot_rows)
        self.reader = Reader(self.store, self.items, min_score)
        if self.lock is None:  # a server: to read only, nothing is created on it
            probe(self.path, lock_wait_s, reading=reads_only)
            if not self._open(create=not reads_only):
                with self.store.guard("closing"):
                    self._client.close()
                raise NoMemoryYet(f"{self.path} holds no agent memory", "`agent run` creates it")
            return
        try:  # a directory that is no store, or a corrupt one, is refused and left as it is
            probe(self.path, lock_wait_s, reading=reads_only)
            probed = True
        except StorageError as e:
            # a reader takes no lock to wait behind, and Chroma itself would wait for as
            # long as the commit holds: it is said now, in one line
            if "locked" not in str(e) or not self.lock.path.exists() or reads_only:
                raise
            probed = False  # another run is writing: probed again once it is done
        _chromadb()  # the slow import, before the lock is taken
        if reads_only and self._open_unlocked():
            return
        with self.lock.held(writes=False) as generation:  # opening may create the collections
            if not probed:
                probe(self.path, lock_wait_s)
            self._open()
            self._generation = generation
        self._generation = self.lock.current

    def _open_unlocked(self) -> bool:
        """Open the client holding the lock shared only, to read only: whether the store had
        every collection (when it had not, opening would create them, a write, so nothing is
        kept open). No write is made meanwhile, so the generation read is the client's."""
        assert self.lock is not None
        with self.lock.shared() as generation:  # no write while Chroma loads what it reads
            if not self._open(create=False):
                with self.store.guard("closing"):
                    self._client.close()
                return False
        self._generation = generation
        return True

    def _open(self, create: bool = True) -> bool:
        """Open the client and its collections (created when missing); with `create` false,
        False and no collections when one is missing."""
        with self.store.guard("opening"):
            self._client = _client(self.path)
            existing = {c.name for c in self._client.list_collections()}
            if not create and not set(COLLECTIONS) <= existing:
                return False
            cols = {name: self._collection(name, existing) for name in COLLECTIONS}
        self.store.cols = dict(cols)
        if isinstance(self.path, Path):  # each write notes what it touched, for the snapshot
            self.store.cols = {name: self._track(name, col) for name, col in cols.items()}
        return True

    def _track(self, name: str, col: Collection) -> snapshot.Tracked:
        """`col`, noting the ids each write touches (a reopened client's keeps the earlier notes)."""
        earlier = self._tracked.get(name)
        tracked = snapshot.Tracked(col, self._changed.setdefault(name, set()), self.snapshot_rows)
        tracked.overflowed = earlier is not None and earlier.overflowed
        self._tracked[name] = tracked
        return tracked

    def _changing(self) -> None:
        """The hold of the write lock now changes the store (other processes open it again)."""
        if self.lock is not None:
            self.lock.mark_written()

    def _reopen(self) -> None:
        """Open the client again: another process wrote since it was opened."""
        with self.store.guard("opening"):
            self._client.close()
        self._open()

    @contextmanager
    def writing(self, changes: bool = True) -> Iterator[None]:
        """Hold the embedded store's write lock (if this object does not already), with a client
        that has seen every earlier write; nothing to hold for a server."""
        if self.lock is None or self.lock.holding:
            if changes and self.lock is not None:
                self.lock.mark_written()
            yield
            return
        with self.lock.held(writes=changes) as generation:
            if generation != self._generation:
                self._whole = self._whole or self._wrote  # the snapshot's base missed that write
                self._reopen()
            self._generation = generation
            yield
        self._generation = self.lock.current

    def _reopen_unlocked(self) -> None:
        """To read only: open the client again holding the lock shared only (a store without
        every collection, as a reindex leaves it for a moment, is an error to read again)."""
        with self.store.guard("opening"):
            self._client.close()
        if not self._open_unlocked():
            raise StorageError(
                f"memory store at {self.path}: a collection is missing",
                "try again once the run or `agent memory` command writing to it is done",
            )

    def _reopen_after_writes(self) -> None:
        """Wait for a write in progress to end, then open the client again (to read only: a
        moment, then holding the lock shared only)."""
        assert self.lock is not None
        if self.reads_only:
            time.sleep(READ_PAUSE_S)
            self._reopen_unlocked()
            return
        with self.lock.held(writes=False) as generation:
            self._whole = self._whole or (self._wrote and generation != self._generation)
            self._reopen()
            self._generation = generation

    @contextmanager
    def _reading(self) -> Iterator[None]:
        """Hold the embedded store's lock shared (`WriteLock.shared`: Chroma's reads save
        the index, so none may meet a write in progress), with a client that has seen every
        earlier write; nothing to hold for a server, or within this object's own write."""
        if self.lock is None or self.lock.holding:
            yield
            return
        with self.lock.shared() as generation:
            if generation != self._generation:  # another process wrote; none writes now
                if self.reads_only:
                    self._reopen_unlocked()
                else:
                    self._whole = self._whole or self._wrote  # the snapshot's base missed it
                    self._reopen()
                    self._generation = generation
            yield

    def _read(self, read: Callable[[], T]) -> T:
        """`read` holding the store's lock shared (`_reading`); when it fails (SQLite busy,
        say), made again once no write is in progress, from a client opened anew."""
        for attempt in range(READ_TRIES):
            try:
                with self._reading():
                    return read()
            except (MemoryUnavailable, EmbedderMismatch):
                raise
            except CollectionGone as e:
                return self._found_again(read, e)
            except StorageError:
                if self.lock is None or self.lock.holding or attempt == READ_TRIES - 1:
                    raise
                self._reopen_after_writes()
        raise AssertionError("unreachable")

    def _write(self, change: Callable[[], T]) -> T:
        """`change` holding the write lock (`writing`); made again on the collections looked
        up anew when a server answers that one it used is gone (`_found_again`)."""
        try:
            with self.writing():
                return change()
        except CollectionGone as e:
            return self._found_again(change, e)

    def _found_again(self, work: Callable[[], T], gone: CollectionGone) -> T:
        """`work` once more, after the server answered that a collection is gone (another
        client's `agent memory reindex` replaced it, or the server started again with no
        data): the collections are looked up again by name, created when missing (with the
        tenant and database) as on first use. When that fails too, the server is out of
        reach as far as this run can tell (MemoryUnavailable): a run goes on without it and
        what it learns waits in the outbox."""
        try:
            probe(self.path, LOCK_WAIT_S)
            self._reopen()
            return work()
        except (MemoryUnavailable, EmbedderMismatch):
            raise
        except StorageError as e:
            raise MemoryUnavailable(
                f"{gone.message}; looked up again: {e.message}", "see the server's log"
            ) from None

    @property
    def secrets(self) -> tuple[str, ...]:
        return self.store.secrets

    @property
    def min_score(self) -> float:
        return self.reader.min_score

    @property
    def associate_threshold(self) -> float:
        return self.items.associate_threshold

    def collection(self, name: str) -> Collection:
        """The named collection (episodes, facts, archive), to read, from a client that has
        seen every write."""
        with self._reading():
            return self.store.cols[name]

    def _before_write(self) -> None:
        """Before a change: keep the snapshot as it was (patched at close), then delete it,
        since no snapshot may outlive what it copied."""
        if not isinstance(self.path, Path):
            return
        if not self._wrote:
            self._base = snapshot.load(self.path)
        snapshot.invalidate(self.path)
        self._wrote = True

    def close(self) -> None:
        """Write the recall snapshot if this object changed the store, then release the
        client and its files; the object cannot be used afterwards."""
        try:
            if self._wrote:
                with self.writing(changes=False):  # from a client that saw every write
                    self._write_snapshot()
        except (StorageError, OSError):
            pass  # a cache: without it, the next run opens the store instead
        finally:
            with self.store.guard("closing"):
                self._client.close()

    def _write_snapshot(self) -> None:
        """A new snapshot of an embedded store that this object changed (a store only read
        keeps the one it has, or none): the one it had with the rows written since read
        again, else the store read whole."""
        if not isinstance(self.path, Path) or self.store.mismatch or not self._wrote:
            return
        with self.store.guard("counting"):
            rows = sum(self.store.cols[name].count() for name in snapshot.COLLECTIONS)
        if rows > self.snapshot_rows:
            return  # deleted before the first write; a recall queries Chroma's index instead
        tables = None
        whole = self._whole or any(t.overflowed for t in self._tracked.values())
        if self._base is not None and not whole:
            tables = snapshot.patched(self._base, self._changed, self._table, self._ids)
        snapshot.write(
            self.path, tables or {name: self._table(name) for name in snapshot.COLLECTIONS}
        )

    def _ids(self, name: str) -> list[str]:
        """Every id of the collection, in the store's order."""
        with self.store.guard("reading"):
            return list(self.store.cols[name].get(include=[])["ids"])

    def _table(self, name: str, ids: list[str] | None = None) -> dict[str, Any]:
        """The collection's records (all, or those of `ids` still stored) as a snapshot table."""
        import numpy as np

        recs = list(self._records(name, vectors=True, ids=ids))
        vectors = np.asarray([r["embedding"] for r in recs], dtype=np.float32)
        return {
            "metadata": self.store.cols[name].metadata,
            "ids": [r["id"] for r in recs],
            "documents": [r["document"] for r in recs],
            "metadatas": [r["metadata"] for r in recs],
            "vectors": vectors.reshape(len(recs), -1)
            if recs
            else np.zeros((0, 0), dtype=np.float32),
        }

    def prepare(self) -> None:
        """Nothing to do: this store is open."""

    def open_in_background(self, after_s: float = 0.0) -> None:
        """Nothing to do: this store is open."""

    def __enter__(self) -> LongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _collection(self, name: str, existing: set[str]) -> ChromaCollection:
        """The named collection, created for this embedder if new; records a mismatch."""
        if name not in existing and f"{name}-reindex" in existing:
            self._client.get_collection(f"{name}-reindex").modify(name=name)  # finish a reindex
            existing = existing | {name}
            self._changing()
        if name not in existing:
            self._changing()
            meta = self.store.space_meta()
            if name == "facts":  # every item this version writes has its content id
                meta[UPGRADES] = CONTENT_UPGRADE
            try:
                return ChromaCollection(
                    self._client.create_collection(name, metadata=meta, embedding_function=None)
                )
            except Exception as e:  # another client of the server created it meanwhile
                if "already exists" not in str(e):
                    raise
        col = ChromaCollection(self._client.get_collection(name, embedding_function=None))
        self.store.check_embedder(col.metadata)
        return col

    # -- what a run reads ----------------------------------------------------------------
    def recall(
        self,
        query: str,
        k: int = 5,
        kind: str = "all",
        min_trust: float = 0.5,
        min_score: float | None = None,
        topics: list[str] | None = None,
    ) -> list[Result]:
        """The `k` most relevant episodes and facts above the relevance threshold, best first
        (of the repositories `topics` when given)."""
        return self._read(lambda: self.reader.recall(query, k, kind, min_trust, min_score, topics))

    def fixes_for(
        self,
        signatures: list[str],
        exclude_run: str = "",
        k: int = 3,
        topics: list[str] | None = None,
    ) -> list[Result]:
        """Earlier runs that had one of these failures and got the task verified, newest first."""
        return self._read(lambda: self.reader.fixes_for(signatures, exclude_run, k, topics))

    def associate(
        self,
        text: str,
        *,
        now: datetime | None = None,
        k: int = 3,
        threshold: float | None = None,
        min_trust: float = 0.0,
        kinds: tuple[str, ...] = ITEM_KINDS,
        topics: list[str] | None = None,
        count: bool = True,
    ) -> list[Result]:
        """The top `k` active items closer than the threshold to `text`; counts a hit on each
        unless `count` is false."""
        close = self._read(
            lambda: self.items.associate(
                text,
                now=now,
                k=k,
                threshold=threshold,
                min_trust=min_trust,
                kinds=kinds,
                topics=topics,
                count=False,
            )
        )
        if count:
            self.count_hits(close, now)
        return close

    def procedures(self, topic: str, k: int = 5) -> list[Result]:
        """The procedures of repository `topic`, the most confirmed first."""
        return self._read(lambda: self.items.procedures(topic, k))

    def listing(self, topics: list[str], min_trust: float = 0.5, limit: int = 1000) -> list[Result]:
        """The facts, notes and procedures of the repositories `topics`, the most trusted first."""
        return self._read(lambda: self.items.listing(topics, min_trust, limit))

    def listed_count(self, topics: list[str], min_trust: float = 0.5) -> int:
        """How many facts, notes and procedures `listing` would give without its limit."""
        return self._read(lambda: self.items.listed_count(topics, min_trust))

    def count_hits(self, results: Sequence[Recalled], now: datetime | None = None) -> None:
        """Count one hit (recalled into a run) on each fact, note or procedure of `results`."""
        counted = [r for r in results if r.kind in ITEM_KINDS]
        if not counted:
            return
        self._write(lambda: self._count_hits(counted, results, now))

    def _count_hits(
        self, counted: list[Recalled], results: Sequence[Recalled], now: datetime | None
    ) -> None:
        with self.store.guard("reading"):  # another run may have counted since they were read
            got = self.store.cols["facts"].get(ids=[r.id for r in counted], include=["metadatas"])
        now_counts = {  # of those whose metadata checks: the others are not counted
            i: checked.hit_count
            for i, m in zip(got["ids"], got["metadatas"], strict=False)
            if (checked := item_meta(m)) is not None
        }
        for r in counted:
            r.hit_count = max(r.hit_count, now_counts.get(r.id, r.hit_count))
        self.items.count_hits(results, now)

    def write_hits(self, ids: list[str], metas: list[Meta]) -> None:
        """Store counted hits (`curation.hit_updates`)."""
        if ids:
            self._write(lambda: self.items.write_hits(ids, metas))

    # -- what a run writes ---------------------------------------------------------------
    def add_fact(
        self,
        text: str,
        source: str,
        trust: float = 1.0,
        *,
        now: datetime | None = None,
        ttl_days: float = 0,
        topic: str = "",
        run_id: str = "",
        files: dict[str, str] | None = None,
    ) -> str:
        """Store a fact (trust 1.0 when the harness observed it); the same text re-confirms it."""
        return self._write(
            lambda: self.items.add_fact(
                text,
                source,
                trust,
                now=now,
                ttl_days=ttl_days,
                topic=topic,
                run_id=run_id,
                files=files,
            )
        )

    def curate(
        self,
        text: str,
        *,
        topic: str,
        origin_event_id: str,
        now: datetime | None = None,
        trust: float = 0.5,
        ttl_days: float = 90,
        run_id: str = "",
        task: str = "",
    ) -> str:
        """Keep a note the run found worth remembering; returns its id `mem_YYYYMMDD_xxxxxx`."""
        return self._write(
            lambda: self.items.curate(
                text,
                topic=topic,
                origin_event_id=origin_event_id,
                now=now,
                trust=trust,
                ttl_days=ttl_days,
                run_id=run_id,
                task=task,
            )
        )

    def add_procedure(
        self,
        cmd: str,
        task: str,
        *,
        topic: str,
        run_id: str = "",
        files: dict[str, str] | None = None,
        now: datetime | None = None,
        ttl_days: float = 0,
    ) -> str:
        """Keep how this repository's checks are run (merged with the same command's)."""
        return self._write(
            lambda: self.items.add_procedure(
                cmd, task, topic=topic, run_id=run_id, files=files, now=now, ttl_days=ttl_days
            )
        )

    def adopt(self, legacy: str, topic: str) -> int:
        """Upgrade the items of the older topic `legacy` (see `Curation.adopt`) to the
        repository `topic`."""
        return self._write(lambda: self.items.adopt(legacy, topic))

    def upgrade_ids(self) -> int:
        """The named upgrade `content-ids`: items get the ids their content gives, duplicates
        merged (`Curation.upgrade_ids`); how many old ids went."""
        return self._write(self.items.upgrade_ids)

    def expire(
        self, now: datetime | None = None, ttl_days: float | None = None, topics: Topics = None
    ) -> int:
        """Archive the items unused past their time to live (or `ttl_days`), of `topics` if given."""
        return self._write(lambda: self.items.expire(now, ttl_days, topics))

    def add_episode(self, ep: Episode) -> None:
        """Store one run's episode and its failure signatures, replacing an earlier version."""
        self.add_episodes([ep])

    def add_episodes(self, episodes: list[Episode]) -> None:
        """Store many episodes at once (upsert by run id)."""
        self.store.require_match()
        ids: list[str] = []
        docs: list[str] = []
        metas: list[Meta] = []
        for ep in episodes:
            ep = Episode.model_validate(self.store.redact(ep.model_dump()))
            doc, gist = episode_docs(ep)
            date = ep.ended_at or ep.started_at or stamp(None)[0]
            base = {
                "run_id": ep.run_id,
                "status": ep.status,
                "created_at": date,
                "source": f"run {ep.run_id}",
                "gist": gist,
                **topic_fields(ep.topic),
            }
            ids.append(ep.run_id)
            docs.append(doc)
            tools = {"tools_used": ",".join(ep.tools_used)}
            metas.append({**base, **tools, "doc": "episode", "episode": ep.model_dump_json()})
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
        run_ids = [ep.run_id for ep in episodes]
        self._write(lambda: self._replace_episodes(run_ids, ids, docs, metas))

    def _replace_episodes(
        self, run_ids: list[str], ids: list[str], docs: list[str], metas: list[Meta]
    ) -> None:
        col = self.store.cols["episodes"]
        with self.store.guard("writing"):
            for i in range(0, len(run_ids), BATCH):
                col.delete(where={"run_id": {"$in": run_ids[i : i + BATCH]}})
        self.store.upsert(col, ids, docs, metas)

    # -- the `agent memory` commands -----------------------------------------------------
    def counts(self, topics: list[str] | None = None) -> dict[str, int]:
        """How many episodes, facts, notes and procedures are active, and how many archived: of
        the repositories `topics` only, when given (a store several repositories share)."""
        return self._read(lambda: self._counts(topics))

    def _counts(self, topics: list[str] | None) -> dict[str, int]:
        where = topic_where(topics) if topics else None
        with self.store.guard("counting"):
            eps, archived = self.store.cols["episodes"], self.store.cols["archive"]
            signature: Where = {"doc": "signature"}
            if where is not None:
                signature = {"$and": [where, signature]}
            signatures = len(eps.get(where=signature, include=[])["ids"])
            episodes = count(eps, where) - signatures
            archive = count(archived, where)
        return {"episodes": episodes, **self.items.kind_counts(where), "archive": archive}

    def forget(self, item_id: str, topics: list[str] | None = None) -> int:
        """Delete an item (an episode with its failure signatures), of the repositories `topics`
        only when given (a shared store; another's is a StorageError); how many documents went."""
        where = topic_where(topics) if topics else None
        with self.writing(), self.store.guard("deleting"):
            return forgetting.forget(self.store.cols, item_id, where)

    def _records(
        self, name: str, vectors: bool = False, ids: list[str] | None = None
    ) -> Iterator[dict[str, Any]]:
        """Every stored record of a collection (or those of `ids`), in batches, with its
        "embedding" if `vectors`."""
        col, offset = self.store.cols[name], 0
        include = ["documents", "metadatas", *(["embeddings"] if vectors else [])]
        while ids is None or offset < len(ids):
            with self.store.guard("reading"):
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

    def export(self, out: Path | str | BinaryIO) -> int:
        """Write every record as one JSON line (without vectors) to `out`, a stream or a file
        replaced whole once every record is written; how many were written. Metadata keys are
        written sorted (the store gives them in no fixed order), so two exports of one store
        are the same bytes. Reading fails as the store's error; writing as an OSError of
        `out`'s."""
        if isinstance(out, (str, Path)):
            with atomic.replacing(out) as stream:
                return self.export(stream)
        n = 0
        with self._reading():  # one store, no write meanwhile (writing `out` is not its failure)
            for name in COLLECTIONS:
                for rec in self._records(name):  # each batch read under the store's guard
                    rec["metadata"] = dict(sorted(rec["metadata"].items()))
                    out.write((json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8"))
                    n += 1
        return n

    def import_(
        self, path: Path | str, progress: importer.Progress | None = None, batch: int = BATCH
    ) -> int:
        """Check a whole export file, then re-embed and upsert its records in batches of at
        most `batch` (those stored already skipped), calling `progress(done, total, skipped)`
        after each; how many records the file holds."""
        self.store.require_match()
        total = importer.check(path, self.store.secrets)  # one bad line: nothing imported
        with self.writing():
            importer.write(self.store, path, total, progress, batch)
        return total

    def reindex(self) -> int:
        """Re-embed every record with the current embedder, then give every item its content
        id (`Curation.upgrade_ids`, however large the store); how many were re-embedded."""
        with self.writing():
            total = self._reindex()
            self.items.upgrade_ids(whole=True)
            return total

    def _reindex(self) -> int:
        total, self._whole = 0, True  # every vector changes
        for name in COLLECTIONS:
            with self.store.guard("reindexing"):
                if f"{name}-reindex" in {c.name for c in self._client.list_collections()}:
                    self._client.delete_collection(f"{name}-reindex")
                tmp = self._client.create_collection(
                    f"{name}-reindex", metadata=self.store.space_meta(), embedding_function=None
                )
            for _, ids, docs, metas in batches(self._records(name), BATCH):  # bounded memory
                self.store.upsert(ChromaCollection(tmp), ids, docs, metas)
                total += len(ids)
            with self.store.guard("reindexing"):
                self._client.delete_collection(name)  # the copy is complete; see _collection
                tmp.modify(name=name)
                col = ChromaCollection(self._client.get_collection(name, embedding_function=None))
                self.store.cols[name] = (
                    self._track(name, col) if isinstance(self.path, Path) else col
                )
        self.store.mismatch = None
        return total


def _chromadb() -> Any:
    """The chromadb module, imported on first use."""
    import gc

    collecting = gc.isenabled()
    gc.disable()  # chromadb's import allocates a great deal; collecting meanwhile costs ~0.1 s
    try:
        try:  # first and whole: see agent_cli/llm/openai/__init__.py
            import httpx  # noqa: F401
        except ImportError:
            pass
        import chromadb
    finally:
        if collecting:
            gc.enable()
    return chromadb


def _client(where: Path | ChromaServer) -> Client:
    """A Chroma client with telemetry off: a PersistentClient at a path, an HttpClient for a server."""
    chromadb = _chromadb()
    from chromadb.config import Settings as ChromaSettings

    if isinstance(where, ChromaServer):
        return _http_client(chromadb, ChromaSettings(anonymized_telemetry=False), where)
    where.mkdir(parents=True, exist_ok=True)
    client = chromadb.PersistentClient(
        path=str(where), settings=ChromaSettings(anonymized_telemetry=False)
    )
    return cast("Client", client)  # chromadb's factories name the interface, not the class


def _http_client(chromadb: Any, settings: Any, server: ChromaServer) -> Client:
    """An HttpClient on the server's tenant and database (`place.probe_server` made sure of both)."""
    import httpx

    def make() -> Any:
        return chromadb.HttpClient(
            host=server.host,
            port=server.port,
            ssl=server.ssl,
            headers=server.headers(),
            settings=settings,
            tenant=server.tenant,
            database=server.database,
        )

    # The client asks the server for its identity, tenant and database while it is made,
    # with no timeout: each is given as long as one of the probe's requests.
    client = within(server, OPEN_CALLS * server.timeout_s, "opening the client", make)
    session = getattr(getattr(client, "_server", None), "_session", None)
    if isinstance(session, httpx.Client):  # chromadb sets no timeout: a hung server would hang us
        session.timeout = httpx.Timeout(server.call_timeout_s, connect=server.timeout_s)
    return cast("Client", client)
