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
and the first recall waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_cli.core.models import Episode
from agent_cli.core.protocols import Embedder
from agent_cli.memory.longterm import snapshot
from agent_cli.memory.longterm.chroma import ASSOCIATE_THRESHOLD, MIN_SCORE, LongTermMemory
from agent_cli.memory.longterm.place import ChromaServer


class LazyLongTermMemory:
    """`protocols.LongTermStore` over a LongTermMemory at `path` that may not exist yet."""

    def __init__(
        self, path: Path | ChromaServer, embedder: Embedder, secrets: tuple[str, ...] = ()
    ) -> None:
        self.path = path if isinstance(path, ChromaServer) else Path(path)
        self.embedder = embedder
        self.secrets = secrets
        self._memory: LongTermMemory | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._reader: SnapshotMemory | None = None  # reads until the store is open
        self._warming: threading.Thread | None = None  # the embedder's model, loading
        self._needed = threading.Event()  # the store is wanted now: a delayed open starts

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
        cols = snapshot.load(self.path) if isinstance(self.path, Path) else None
        if cols is None:
            self.open_in_background()
            return
        self._reader = SnapshotMemory(cols, self.path, self.embedder, self.secrets)
        self._warming = threading.Thread(
            target=self._warm_quietly, daemon=True, name="load-embedder"
        )
        self._warming.start()

    def open_in_background(self, after_s: float = 0.0) -> None:
        """Start opening an existing store (and loading its embedder) in a worker thread,
        `after_s` seconds from now or as soon as the store is needed, whichever comes first:
        time for a request that is being sent to go out without chromadb's import competing
        with it for the interpreter."""
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
            self._memory = LongTermMemory(self.path, self.embedder, secrets=self.secrets)
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
        if self._memory is None and (create or self.exists()):
            self._memory = LongTermMemory(self.path, self.embedder, secrets=self.secrets)
        if self._memory is not None and self._reader is not None:
            reader, self._reader = self._reader, None
            for ids, metas in reader.pending:  # the hits counted on the snapshot
                self._memory.write_hits(ids, metas)
        return self._memory

    def _reading(self) -> LongTermMemory | None:
        """Where a read goes: the snapshot until the store is opened, then the store."""
        if self._reader is not None and self._thread is None and self._memory is None:
            warming, self._warming = self._warming, None
            if warming is not None:
                warming.join()
            return self._reader
        return self._get(create=False)

    def recall(
        self, query: str, k: int = 5, kind: str = "all", min_trust: float = 0.5
    ) -> Sequence[Any]:
        """What the store holds about `query`; nothing (and no store opened) when there is none."""
        memory = self._reading()
        return memory.recall(query, k=k, kind=kind, min_trust=min_trust) if memory else []

    def add_episode(self, ep: Episode) -> None:
        """Keep a run's episode, creating the store if needed."""
        self._get(create=True).add_episode(ep)

    def add_fact(self, text: str, source: str, trust: float = 1.0, **kwargs: Any) -> str:
        """Keep a fact, creating the store if needed; its id."""
        return self._get(create=True).add_fact(text, source, trust=trust, **kwargs)

    def add_procedure(self, cmd: str, task: str, **kwargs: Any) -> str:
        """Keep a verified acceptance command, creating the store if needed; its id."""
        return self._get(create=True).add_procedure(cmd, task, **kwargs)

    def curate(self, text: str, **kwargs: Any) -> str:
        """Keep a note, creating the store if needed; its id."""
        return self._get(create=True).curate(text, **kwargs)

    def procedures(self, topic: str, k: int = 5) -> list:
        """The procedures of repository `topic`; none when there is no store."""
        memory = self._reading()
        return memory.procedures(topic, k=k) if memory else []

    def associate(self, text: str, **kwargs: Any) -> list:
        """Items close to `text`, each counted as a hit; none when there is no store."""
        memory = self._reading()
        return memory.associate(text, **kwargs) if memory else []

    def count_hits(self, results: list, now: Any = None) -> list:
        """Count a hit on each recalled item."""
        memory = self._reading()
        return memory.count_hits(results, now) if memory and results else results

    def fixes_for(self, signatures: list[str], **kwargs: Any) -> list:
        """Earlier fixes of these failures; none when there is no store."""
        memory = self._reading()
        return memory.fixes_for(signatures, **kwargs) if memory else []

    def expire(self, now: Any = None, ttl_days: float | None = None) -> int:
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

    def __enter__(self) -> LazyLongTermMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SnapshotMemory(LongTermMemory):
    """LongTermMemory's reads (recall, associate, procedures, fixes_for) over the store's
    snapshot: no chromadb, no client. The hits it counts are kept in `pending`."""

    def __init__(
        self,
        cols: dict[str, snapshot.SnapshotCollection],
        path: Path,
        embedder: Any,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._configure(path, embedder, secrets, MIN_SCORE, ASSOCIATE_THRESHOLD)
        self._snapshots = False  # it neither deletes nor writes the snapshot
        self._cols = dict(cols)
        for col in self._cols.values():
            self._check_embedder(col.metadata)
        self.pending: list[tuple[list[str], list[dict]]] = []

    def write_hits(self, ids: list[str], metas: list[dict[str, Any]]) -> None:
        """Keep counted hits for the store."""
        if ids:
            self.pending.append((ids, metas))

    def close(self) -> None:
        """Nothing to release."""
