"""Working memory (hot items within a token budget, a cold store behind them) and its stores.

Importing this package does no I/O and loads no vendor SDK; long-term memory lives in
`agent_cli.memory.longterm.chroma` and is imported on its own.
"""

from agent_cli.core.protocols import ColdStore, Embedder
from agent_cli.memory.working.memory import Context, WorkingMemory, WorkingState
from agent_cli.memory.working.store import InMemStore, Item, SqliteStore, Store

__all__ = [
    "ColdStore",
    "Context",
    "Embedder",
    "InMemStore",
    "Item",
    "SqliteStore",
    "Store",
    "WorkingMemory",
    "WorkingState",
]
