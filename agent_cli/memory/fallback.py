"""Long-term memory that may be out of reach: a run goes on without it, and says so once."""

from __future__ import annotations

from typing import Any, Callable

from agent_cli.errors import MemoryUnavailable


class NoLongTermMemory:
    """Long-term memory that finds nothing and keeps nothing, for a run whose server is down."""

    def recall(self, *args: Any, **kwargs: Any) -> list:
        return []

    retrieve = associate = recall

    def add_episode(self, *args: Any, **kwargs: Any) -> None:
        return None

    add_episodes = add_fact = curate = add_episode

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

    def __init__(self, opener: Callable[[], Any], notice: Callable[[str], None]) -> None:
        self._opener = opener
        self._notice = notice
        self._memory: Any = None

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
        self._memory = NoLongTermMemory()
        self._notice(f"long-term memory is unavailable, so this run goes on without it: "
                     f"{error.one_line()}")

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        attr = getattr(self._target(), name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return attr(*args, **kwargs)
            except MemoryUnavailable as e:
                self._give_up(e)
                return getattr(self._memory, name)(*args, **kwargs)

        return call
