"""Long-term memory opened when first needed: in the background when a store exists, else on write.

A run's first model request needs long-term memory only to recall from it, and a
repository without a store has nothing to recall: so no Chroma is opened (or imported)
before that request when there is no memory yet; the store is created when the run
first writes to it (its episode, at the end). When a store exists, it opens in a
worker thread (chromadb's import, the client, the embedder's model) while the rest of
the run starts, and the first recall waits for it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Sequence

from agent_cli.memory.longterm import LongTermMemory
from agent_cli.memory.place import ChromaServer
from agent_cli.models import Episode
from agent_cli.protocols import Embedder


class LazyLongTermMemory:
    """`protocols.LongTermStore` over a LongTermMemory at `path` that may not exist yet."""

    def __init__(self, path: Path | ChromaServer, embedder: Embedder,
                 secrets: tuple[str, ...] = ()) -> None:
        self.path = path if isinstance(path, ChromaServer) else Path(path)
        self.embedder = embedder
        self.secrets = secrets
        self._memory: LongTermMemory | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def exists(self) -> bool:
        """Whether anything is at the store's path (a store, or something broken to report);
        a server always counts: it may hold what other clones learned."""
        if isinstance(self.path, ChromaServer):
            return True
        return self.path.exists() or self.path.is_symlink()

    def open_in_background(self) -> None:
        """Start opening an existing store (and loading its embedder) in a worker thread."""
        if self._thread is None and self._memory is None and self.exists():
            self._thread = threading.Thread(target=self._open_quietly, daemon=True,
                                            name="open-long-term-memory")
            self._thread.start()

    def _open_quietly(self) -> None:
        try:
            self._memory = LongTermMemory(self.path, self.embedder, secrets=self.secrets)
            self.embedder.embed(["warm up"])  # loads the embedder's model, off the main thread
        except BaseException as e:  # raised again where the memory is used
            self._error = e

    def _get(self, create: bool) -> LongTermMemory | None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            if self._error is not None:
                error, self._error = self._error, None
                raise error
        if self._memory is None and (create or self.exists()):
            self._memory = LongTermMemory(self.path, self.embedder, secrets=self.secrets)
        return self._memory

    def recall(self, query: str, k: int = 5, kind: str = "all",
               min_trust: float = 0.5) -> Sequence[Any]:
        """What the store holds about `query`; nothing (and no store opened) when there is none."""
        memory = self._get(create=False)
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
        memory = self._get(create=False)
        return memory.procedures(topic, k=k) if memory else []

    def associate(self, text: str, **kwargs: Any) -> list:
        """Items close to `text`, each counted as a hit; none when there is no store."""
        memory = self._get(create=False)
        return memory.associate(text, **kwargs) if memory else []

    def count_hits(self, results: list, now: Any = None) -> list:
        """Count a hit on each recalled item."""
        memory = self._get(create=False)
        return memory.count_hits(results, now) if memory and results else results

    def fixes_for(self, signatures: list[str], **kwargs: Any) -> list:
        """Earlier fixes of these failures; none when there is no store."""
        memory = self._get(create=False)
        return memory.fixes_for(signatures, **kwargs) if memory else []

    def expire(self, now: Any = None, ttl_days: float | None = None) -> int:
        """Archive what went unused; nothing when there is no store."""
        memory = self._get(create=False)
        return memory.expire(now, ttl_days=ttl_days) if memory else 0

    def close(self) -> None:
        """Close the store if it was opened (waiting for a background open first)."""
        try:
            memory = self._get(create=False) if self._thread is not None else self._memory
        except BaseException:
            memory = self._memory
        if memory is not None:
            memory.close()
        self._memory = None

    def __enter__(self) -> "LazyLongTermMemory":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
