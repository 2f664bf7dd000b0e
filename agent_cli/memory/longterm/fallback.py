"""Long-term memory that may be out of reach: a run goes on without it, and says so once.

What the run writes meanwhile goes to the outbox (outbox.py) when there is one, and the
next run that reaches the store sends it before its own first write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agent_cli.core.errors import MemoryUnavailable
from agent_cli.memory.longterm.outbox import WRITES, Outbox


class NoLongTermMemory:
    """Long-term memory that finds nothing, for a run whose server is down; its writes go to
    `outbox` when there is one, else nowhere."""

    def __init__(self, outbox: Outbox | None = None) -> None:
        self._outbox = outbox

    def recall(self, *args: Any, **kwargs: Any) -> list:
        return []

    retrieve = associate = recall

    def _keep(self, op: str, args: tuple, kwargs: dict[str, Any]) -> str:
        if self._outbox is not None:
            self._outbox.keep(op, args, kwargs)
        return ""

    def add_episode(self, *args: Any, **kwargs: Any) -> None:
        self._keep("add_episode", args, kwargs)

    def add_fact(self, *args: Any, **kwargs: Any) -> str:
        return self._keep("add_fact", args, kwargs)

    def add_procedure(self, *args: Any, **kwargs: Any) -> str:
        return self._keep("add_procedure", args, kwargs)

    def curate(self, *args: Any, **kwargs: Any) -> str:
        return self._keep("curate", args, kwargs)

    def add_episodes(self, *args: Any, **kwargs: Any) -> None:
        return None

    def close(self) -> None:
        return None

    def __getattr__(self, name: str) -> Callable[..., list]:
        """Any other call finds nothing (an empty list) and changes nothing."""
        if name.startswith("__"):
            raise AttributeError(name)
        return self.recall


class FallbackLongTerm:
    """Opens long-term memory on first use; once it is unavailable, uses NoLongTermMemory.

    `notice` is told once, in one line, why the run goes on without long-term memory.
    Only MemoryUnavailable (a server that cannot be reached) is absorbed: any other
    storage error still stops the command, as it would with the embedded store.
    """

    def __init__(
        self, opener: Callable[[], Any], notice: Callable[[str], None], outbox: Outbox | None = None
    ) -> None:
        self._opener = opener
        self._notice = notice
        self._memory: Any = None
        self._outbox = outbox
        self._sent = outbox is None  # what an earlier run kept goes before the first write

    @property
    def available(self) -> bool:
        """Whether the real store is in use (opening it if that has not been tried yet)."""
        return not isinstance(self._target(), NoLongTermMemory)

    def _target(self) -> Any:
        if self._memory is None:
            try:
                self._memory = self._opener()
            except MemoryUnavailable as e:
                self._give_up(e)
        return self._memory

    def _give_up(self, error: MemoryUnavailable) -> None:
        self._memory = NoLongTermMemory(self._outbox)
        kept = " (what it learns is kept for the next run that reaches it)" if self._outbox else ""
        self._notice(
            f"long-term memory is unavailable, so this run goes on without it{kept}: "
            f"{error.one_line()}"
        )

    def _send_waiting(self) -> None:
        """Send what earlier runs kept in the outbox, once, if the store answers."""
        if self._sent or self._outbox is None:
            return
        self._sent = True
        target = self._target()
        if isinstance(target, NoLongTermMemory):
            return
        sent = self._outbox.send(target)
        if sent:
            self._notice(
                f"long-term memory: sent {sent} write(s) kept by an earlier run while "
                "it was unreachable"
            )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._target(), name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                if name in WRITES:
                    self._send_waiting()
                return attr(*args, **kwargs)
            except MemoryUnavailable as e:
                self._give_up(e)
                return getattr(self._memory, name)(*args, **kwargs)

        return call
