"""Long-term memory opened when first needed: read from its snapshot, or in the background.

A run's first model request needs long-term memory only to recall from it, and a
repository without a store has nothing to recall: so no Chroma is opened (or imported)
before that request when there is no memory yet; the store is created when the run
first writes to it (its episode, at the end). When the store has a current snapshot
(snapshot.py), the first recall reads that, with the embedder loaded in a worker thread,
and the hits it counts wait (`SnapshotMemory.pending`) until the store itself opens: in
the background while the model plans (`open_in_background`, which the session calls as
the plan request goes out), or when first written to. Without a snapshot the store opens in a worker thread at once
(chromadb's import, the client, the embedder's model) while the rest of the run starts,
and the first recall waits for it. Read-only (a plan-only run), an embedded store is never
opened where it lies, since opening Chroma rewrites its files: the snapshot is read, or
else a copy of the store made for the purpose (holding its write lock shared, so that no
write is half made in the copy).
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from agent_cli.core.errors import StorageError
from agent_cli.core.models import Episode
from agent_cli.core.protocols import Embedder, Recalled
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.chroma import ASSOCIATE_THRESHOLD, LongTermMemory
from agent_cli.memory.longterm.curation import ITEM_KINDS, Curation
from agent_cli.memory.longterm.place import ChromaServer, NoMemoryYet, check_database
from agent_cli.memory.longterm.reads import MIN_SCORE, Reader
from agent_cli.memory.longterm.records import Result
from agent_cli.memory.longterm.store import Meta, Store
from agent_cli.memory.longterm.write.lock import WriteLock


class LazyLongTermMemory:
    """`protocols.LongTermStore` over a LongTermMemory at `path` that may not exist yet."""

    def __init__(
        self,
        path: Path | ChromaServer,
        embedder: Embedder,
        secrets: tuple[str, ...] = (),
        read_only: bool = False,
    ) -> None:
        self.path = path if isinstance(path, ChromaServer) else Path(path)
        self.read_only = read_only
        self._copy: tempfile.TemporaryDirectory[str] | None = None  # what a read-only run opens
        self.embedder = embedder
        self.secrets = secrets
        self._memory: LongTermMemory | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._reader: SnapshotMemory | None = None  # reads until the store is open
        self._warming: threading.Thread | None = None  # the embedder's model, loading
        self._needed = threading.Event()  # the store is wanted now: a delayed open starts
        self._absent = False  # read only: the server holds no memory, and none is created

    def exists(self) -> bool:
        """Whether anything is at the store's path (a store, or something broken to report);
        a server always counts: it may hold what other clones learned."""
        if isinstance(self.path, ChromaServer):
            return True
        return self.path.exists() or self.path.is_symlink()

    def prepare(self) -> None:
        """Get ready for the first recall: read a current snapshot (the embedder's model loads
        in a worker thread), else start opening an existing store in the background."""
        if self._thread is not None or self._memory is not None or self._reader is not None:
            return
        path = self.path
        if isinstance(path, Path):
            check_database(path)  # a snapshot beside a damaged store is not read as the store
        cols = snapshot.load(path) if isinstance(path, Path) else None
        if cols is None or not isinstance(path, Path):
            self.open_in_background()
            return
        self._reader = SnapshotMemory(cols, path, self.embedder, self.secrets)
        self._warming = threading.Thread(
            target=self._warm_quietly, daemon=True, name="load-embedder"
        )
        self._warming.start()

    def open_in_background(self, after_s: float = 0.0) -> None:
        """Start opening an existing store (and loading its embedder) in a worker thread,
        `after_s` seconds from now or as soon as the store is needed, whichever comes first:
        time for a request that is being sent to go out without chromadb's import competing
        with it for the interpreter."""
        if self.read_only and self._reader is not None:
            return  # the snapshot answers every read; the store is not opened
        if self._thread is None and self._memory is None and self.exists():
            self._thread = threading.Thread(
                target=self._open_quietly,
                args=(after_s,),
                daemon=True,
                name="open-long-term-memory",
            )
            self._thread.start()

    def _warm_quietly(self) -> None:
        warm = getattr(self.embedder, "warm", None)
        try:
            if warm is not None:
                warm()
        except Exception:  # the same failure is raised where the embedder is used
            pass

    def _open_quietly(self, after_s: float = 0.0) -> None:
        self._needed.wait(after_s)
        try:
            warming = self._warming  # the main thread may clear it meanwhile
            if warming is not None:
                warming.join()
            self._memory = self._open()
            self._warm_quietly()  # the embedder's model loads off the main thread
        except BaseException as e:  # raised again where the memory is used
            self._error = e

    def _get(self, create: bool) -> LongTermMemory | None:
        if self._thread is not None:
            self._needed.set()
            self._thread.join()
            self._thread = None
            if self._error is not None:
                error, self._error = self._error, None
                raise error
        if self._memory is None and not self._absent and (create or self.exists()):
            self._memory = self._open()
        if self._memory is not None and self._reader is not None:
            reader, self._reader = self._reader, None
            for ids, metas in reader.pending:  # the hits counted on the snapshot
                self._memory.write_hits(ids, metas)
        return self._memory

    def _open(self) -> LongTermMemory | None:
        """The store; read-only, an embedded one is opened from a copy of its directory, and
        a server's is opened to read only (None when it has none: nothing is created on it)."""
        where = self.path
        if self.read_only and isinstance(where, ChromaServer):
            try:
                return LongTermMemory(where, self.embedder, secrets=self.secrets, reads_only=True)
            except NoMemoryYet:
                self._absent = True
                return None
        if self.read_only and isinstance(where, Path) and where.is_dir():
            self._copy = tempfile.TemporaryDirectory(prefix="agent-memory-")
            copy = Path(self._copy.name) / "chroma"
            with WriteLock(where).shared():  # never a copy of a write half made
                shutil.copytree(where, copy, symlinks=True)
            try:
                return LongTermMemory(copy, self.embedder, secrets=self.secrets)
            except StorageError as e:  # named as the user's store, not as the copy
                raise type(e)(
                    e.message.replace(str(copy), str(where)), e.hint.replace(str(copy), str(where))
                ) from None
        return LongTermMemory(where, self.embedder, secrets=self.secrets)

    def _store(self) -> LongTermMemory:
        """The store, created if there is none yet."""
        memory = self._get(create=True)
        if memory is None:  # a read-only run's server that holds no memory
            raise StorageError(
                f"long-term memory at {self.path} is opened to read only; nothing is written",
                "run without --plan-only to write to it",
            )
        return memory

    def _reading(self) -> LongTermMemory | SnapshotMemory | None:
        """Where a read goes: the snapshot until the store is opened, then the store."""
        if self._reader is not None and self._thread is None and self._memory is None:
            warming, self._warming = self._warming, None
            if warming is not None:
                warming.join()
            return self._reader
        return self._get(create=False)

    def recall(
        self,
        query: str,
        k: int = 5,
        kind: str = "all",
        min_trust: float = 0.5,
        topics: list[str] | None = None,
        min_score: float | None = None,
    ) -> list[Result]:
        """What the store holds about `query`; nothing (and no store opened) when there is none."""
        memory = self._reading()
        if memory is None:
            return []
        return memory.recall(
            query, k=k, kind=kind, min_trust=min_trust, topics=topics, min_score=min_score
        )

    def add_episode(self, ep: Episode) -> None:
        """Keep a run's episode, creating the store if needed."""
        self._store().add_episode(ep)

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
        """Keep a fact, creating the store if needed; its id."""
        return self._store().add_fact(
            text, source, trust, now=now, ttl_days=ttl_days, topic=topic, run_id=run_id, files=files
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
        """Keep a verified acceptance command, creating the store if needed; its id."""
        return self._store().add_procedure(
            cmd, task, topic=topic, run_id=run_id, files=files, now=now, ttl_days=ttl_days
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
        """Keep a note, creating the store if needed; its id."""
        return self._store().curate(
            text,
            topic=topic,
            origin_event_id=origin_event_id,
            now=now,
            trust=trust,
            ttl_days=ttl_days,
            run_id=run_id,
            task=task,
        )

    def procedures(self, topic: str, k: int = 5) -> list[Result]:
        """The procedures of repository `topic`; none when there is no store."""
        memory = self._reading()
        return memory.procedures(topic, k=k) if memory else []

    def listing(self, topics: list[str], min_trust: float = 0.5, limit: int = 1000) -> list[Result]:
        """The facts, notes and procedures of the repositories `topics`; none without a store."""
        memory = self._reading()
        return memory.listing(topics, min_trust, limit) if memory else []

    def listed_count(self, topics: list[str], min_trust: float = 0.5) -> int:
        """How many items `listing` would give without its limit; none without a store."""
        memory = self._reading()
        return memory.listed_count(topics, min_trust) if memory else 0

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
        """Items close to `text`, each counted as a hit unless `count` is false; none when
        there is no store."""
        memory = self._reading()
        if memory is None:
            return []
        return memory.associate(
            text,
            now=now,
            k=k,
            threshold=threshold,
            min_trust=min_trust,
            kinds=kinds,
            topics=topics,
            count=count,
        )

    def count_hits(self, results: Sequence[Recalled], now: datetime | None = None) -> None:
        """Count a hit on each recalled item."""
        memory = self._reading()
        if memory is not None and results:
            memory.count_hits(results, now)

    def fixes_for(
        self,
        signatures: list[str],
        exclude_run: str = "",
        k: int = 3,
        topics: list[str] | None = None,
    ) -> list[Result]:
        """Earlier fixes of these failures; none when there is no store."""
        memory = self._reading()
        if memory is None:
            return []
        return memory.fixes_for(signatures, exclude_run=exclude_run, k=k, topics=topics)

    def adopt(self, legacy: str, topic: str) -> int:
        """Upgrade the items of the older topic `legacy` (see `Curation.adopt`) to the
        repository `topic`; nothing when there is no store."""
        memory = self._get(create=False)
        return memory.adopt(legacy, topic) if memory else 0

    def upgrade_ids(self) -> int:
        """Give items the ids their content gives, duplicates merged; nothing when there is no
        store."""
        memory = self._get(create=False)
        return memory.upgrade_ids() if memory else 0

    def expire(self, now: datetime | None = None, ttl_days: float | None = None) -> int:
        """Archive what went unused; nothing when there is no store."""
        memory = self._get(create=False)
        return memory.expire(now, ttl_days=ttl_days) if memory else 0

    def close(self) -> None:
        """Close the store if it was opened (waiting for a background open first)."""
        pending = self._reader is not None and self._reader.pending
        try:  # hits counted on the snapshot are written now if the store never opened
            memory = self._get(create=False) if self._thread or pending else self._memory
        except BaseException:
            memory = self._memory
        if memory is not None:
            memory.close()
        self._memory = self._reader = None
        if self._copy is not None:
            self._copy.cleanup()
            self._copy = None

    def __enter__(self) -> LazyLongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SnapshotMemory:
    """LongTermMemory's reads (recall, associate, procedures, fixes_for) over the store's
    snapshot: no chromadb, no client. The hits it counts are kept in `pending`."""

    def __init__(
        self,
        cols: dict[str, snapshot.SnapshotCollection],
        path: Path,
        embedder: Embedder,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.path, self.embedder = path, embedder
        self.store = Store(path, embedder, secrets)  # it neither deletes nor writes the snapshot
        self.store.cols = dict(cols)
        for col in cols.values():
            self.store.check_embedder(col.metadata)
        self.pending: list[tuple[list[str], list[Meta]]] = []
        self.items = Curation(self.store, ASSOCIATE_THRESHOLD, write_hits=self.write_hits)
        self.reader = Reader(self.store, self.items, MIN_SCORE)

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
        return self.reader.recall(query, k, kind, min_trust, min_score, topics)

    def fixes_for(
        self,
        signatures: list[str],
        exclude_run: str = "",
        k: int = 3,
        topics: list[str] | None = None,
    ) -> list[Result]:
        """Earlier runs that had one of these failures and got the task verified, newest first."""
        return self.reader.fixes_for(signatures, exclude_run, k, topics)

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
        """The top `k` items closer than the threshold to `text`; counts a hit on each
        unless `count` is false."""
        return self.items.associate(
            text,
            now=now,
            k=k,
            threshold=threshold,
            min_trust=min_trust,
            kinds=kinds,
            topics=topics,
            count=count,
        )

    def procedures(self, topic: str, k: int = 5) -> list[Result]:
        """The procedures of repository `topic`, the most confirmed first."""
        return self.items.procedures(topic, k)

    def listing(self, topics: list[str], min_trust: float = 0.5, limit: int = 1000) -> list[Result]:
        """The facts, notes and procedures of the repositories `topics`, the most trusted first."""
        return self.items.listing(topics, min_trust, limit)

    def listed_count(self, topics: list[str], min_trust: float = 0.5) -> int:
        """How many items `listing` would give without its limit."""
        return self.items.listed_count(topics, min_trust)

    def count_hits(self, results: Sequence[Recalled], now: datetime | None = None) -> None:
        """Count one hit on each fact, note or procedure of `results` (kept in `pending`)."""
        self.items.count_hits(results, now)

    def write_hits(self, ids: list[str], metas: list[Meta]) -> None:
        """Keep counted hits for the store."""
        if ids:
            self.pending.append((ids, metas))

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> SnapshotMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
