"""Long-term memory that may be out of reach: a run goes on without it, and says so once.

What the run writes meanwhile goes to the outbox (outbox.py) when there is one, and the
next run that reaches the store sends it before its own first write.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from agent_cli.core.errors import MemoryUnavailable
from agent_cli.core.models import Episode
from agent_cli.core.protocols import LongTermStore, Recalled
from agent_cli.memory.longterm.curation import ITEM_KINDS
from agent_cli.memory.longterm.write.outbox import Outbox

T = TypeVar("T")


class Opened(LongTermStore, Protocol):
    """Long-term memory as the fallback opens it: a LongTermStore that can get ready early."""

    def prepare(self) -> None: ...


class NoLongTermMemory:
    """Long-term memory that finds nothing, for a run whose server is down; its writes go to
    `outbox` when there is one, else nowhere."""

    def __init__(self, outbox: Outbox | None = None) -> None:
        self._outbox = outbox

    def recall(
        self,
        query: str,
        k: int = 5,
        kind: str = "all",
        min_trust: float = 0.5,
        topics: list[str] | None = None,
        min_score: float | None = None,
    ) -> list[Recalled]:
        return []

    def procedures(self, topic: str, k: int = 5) -> list[Recalled]:
        return []

    def listing(
        self, topics: list[str], min_trust: float = 0.5, limit: int = 1000
    ) -> list[Recalled]:
        return []

    def listed_count(self, topics: list[str], min_trust: float = 0.5) -> int:
        return 0

    def associate(self, text: str, **options: Any) -> list[Recalled]:
        return []

    def count_hits(self, results: Sequence[Recalled], now: datetime | None = None) -> None:
        return None

    def fixes_for(
        self,
        signatures: list[str],
        exclude_run: str = "",
        k: int = 3,
        topics: list[str] | None = None,
    ) -> list[Recalled]:
        return []

    def adopt(self, legacy: str, topic: str) -> int:
        return 0

    def upgrade_ids(self) -> int:
        return 0

    def expire(self, now: datetime | None = None, ttl_days: float | None = None) -> int:
        return 0

    def _keep(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        if self._outbox is not None:  # None stands for "not given": the default, when sent
            self._outbox.keep(op, args, {k: v for k, v in kwargs.items() if v is not None})
        return ""

    def add_episode(self, ep: Episode) -> None:
        self._keep("add_episode", (ep,), {})

    def add_fact(self, text: str, source: str, trust: float = 1.0, **options: Any) -> str:
        return self._keep("add_fact", (text, source), {"trust": trust, **options})

    def add_procedure(self, cmd: str, task: str, **options: Any) -> str:
        return self._keep("add_procedure", (cmd, task), options)

    def curate(self, text: str, **options: Any) -> str:
        return self._keep("curate", (text,), options)

    def prepare(self) -> None:
        return None

    def open_in_background(self, after_s: float = 0.0) -> None:
        return None

    def close(self) -> None:
        return None


class FallbackLongTerm:
    """Opens long-term memory on first use; once it is unavailable, uses NoLongTermMemory.

    `notice` is told once, in one line, why the run goes on without long-term memory.
    Only MemoryUnavailable (a server that cannot be reached) is absorbed: any other
    storage error still stops the command, as it would with the embedded store.
    """

    def __init__(
        self,
        opener: Callable[[], Opened],
        notice: Callable[[str], None],
        outbox: Outbox | None = None,
    ) -> None:
        self._opener = opener
        self._notice = notice
        self._memory: Opened | None = None
        self._outbox = outbox
        self._sent = outbox is None  # what an earlier run kept goes before the first write

    def _target(self) -> Opened:
        if self._memory is None:
            try:
                self._memory = self._opener()
            except MemoryUnavailable as e:
                return self._give_up(e)
        return self._memory

    def _give_up(self, error: MemoryUnavailable) -> NoLongTermMemory:
        none = NoLongTermMemory(self._outbox)
        self._memory = none
        kept = " (what it learns is kept for the next run that reaches it)" if self._outbox else ""
        self._notice(
            f"long-term memory is unavailable, so this run goes on without it{kept}: "
            f"{error.one_line()}"
        )
        return none

    def _send_waiting(self) -> None:
        """Send what earlier runs kept in the outbox, once, if the store answers."""
        if self._sent or self._outbox is None:
            return
        self._sent = True
        target = self._target()
        if isinstance(target, NoLongTermMemory):
            return
        for line in self._outbox.send(target).notices():
            self._notice(line)

    def _call(self, use: Callable[[Opened], T], write: bool = False) -> T:
        """`use` on the store; on NoLongTermMemory once the store is found unreachable."""
        try:
            if write:
                self._send_waiting()
            return use(self._target())
        except MemoryUnavailable as e:
            return use(self._give_up(e))

    def prepare(self) -> None:
        """Get the store ready for the first recall (its snapshot, or opening it)."""
        self._call(lambda m: m.prepare())

    def open_in_background(self, after_s: float = 0.0) -> None:
        self._call(lambda m: m.open_in_background(after_s))

    def recall(
        self,
        query: str,
        k: int = 5,
        kind: str = "all",
        min_trust: float = 0.5,
        topics: list[str] | None = None,
        min_score: float | None = None,
    ) -> Sequence[Recalled]:
        return self._call(
            lambda m: m.recall(
                query, k=k, kind=kind, min_trust=min_trust, topics=topics, min_score=min_score
            )
        )

    def procedures(self, topic: str, k: int = 5) -> Sequence[Recalled]:
        return self._call(lambda m: m.procedures(topic, k=k))

    def listing(
        self, topics: list[str], min_trust: float = 0.5, limit: int = 1000
    ) -> Sequence[Recalled]:
        return self._call(lambda m: m.listing(topics, min_trust, limit))

    def listed_count(self, topics: list[str], min_trust: float = 0.5) -> int:
        return self._call(lambda m: m.listed_count(topics, min_trust))

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
    ) -> Sequence[Recalled]:
        return self._call(
            lambda m: m.associate(
                text,
                now=now,
                k=k,
                threshold=threshold,
                min_trust=min_trust,
                kinds=kinds,
                topics=topics,
                count=count,
            )
        )

    def count_hits(self, results: Sequence[Recalled], now: datetime | None = None) -> None:
        self._call(lambda m: m.count_hits(results, now))

    def fixes_for(
        self,
        signatures: list[str],
        exclude_run: str = "",
        k: int = 3,
        topics: list[str] | None = None,
    ) -> Sequence[Recalled]:
        return self._call(
            lambda m: m.fixes_for(signatures, exclude_run=exclude_run, k=k, topics=topics)
        )

    def adopt(self, legacy: str, topic: str) -> int:
        return self._call(lambda m: m.adopt(legacy, topic))

    def upgrade_ids(self) -> int:
        return self._call(lambda m: m.upgrade_ids())

    def expire(self, now: datetime | None = None, ttl_days: float | None = None) -> int:
        return self._call(lambda m: m.expire(now, ttl_days=ttl_days))

    def add_episode(self, ep: Episode) -> None:
        self._call(lambda m: m.add_episode(ep), write=True)

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
        return self._call(
            lambda m: m.add_fact(
                text,
                source,
                trust,
                now=now,
                ttl_days=ttl_days,
                topic=topic,
                run_id=run_id,
                files=files,
            ),
            write=True,
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
        return self._call(
            lambda m: m.add_procedure(
                cmd, task, topic=topic, run_id=run_id, files=files, now=now, ttl_days=ttl_days
            ),
            write=True,
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
        return self._call(
            lambda m: m.curate(
                text,
                topic=topic,
                origin_event_id=origin_event_id,
                now=now,
                trust=trust,
                ttl_days=ttl_days,
                run_id=run_id,
                task=task,
            ),
            write=True,
        )

    def close(self) -> None:
        self._call(lambda m: m.close())
