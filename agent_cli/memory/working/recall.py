"""Finding cold items for recall(): by the names they define, then by meaning.

WorkingMemory asks a `ColdSearch` which cold ids match a query and makes room for them itself;
`view()` turns a cold record into the hot `recalled` item that comes back. See
docs/working_memory.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from agent_cli.core import fences
from agent_cli.core import tokens as toks
from agent_cli.memory.working import scoring
from agent_cli.memory.working.names.symbols import identifiers, rank_hits
from agent_cli.memory.working.store import Item, Store

MIN_SIMILARITY = 0.2
_ID = re.compile(r"m\d+")

Embed = Callable[[str], "tuple[float, ...] | None"]


class ColdSearch:
    """The symbol and meaning channels over one cold store."""

    def __init__(self, store: Store, embed: Embed | None, cooldown_steps: int) -> None:
        self.store = store
        self.embed = embed
        self.cooldown_steps = cooldown_steps
        self._vectors: scoring.VectorIndex | None = None  # loaded on the first meaning search

    def find(
        self, query: str, k: int, hidden: Collection[str], step: int, cooling: bool = False
    ) -> list[str]:
        """Up to `k` cold ids matching `query`, best first, none of them in `hidden`: those
        outside their cooldown (both channels), or (`cooling`) only those inside it."""
        if k <= 0:
            return []
        chosen = self._symbol_hits(query, hidden, step, cooling)[:k]
        if len(chosen) < k and self.embed is not None:
            chosen += self._meaning_hits(query, k - len(chosen), set(chosen), hidden, step, cooling)
        return chosen

    def cooling(
        self, query: str, k: int, hidden: Collection[str], step: int
    ) -> list[tuple[str, int]]:
        """Cold ids matching `query` that only their cooldown holds back: (id, steps left)."""
        out: list[tuple[str, int]] = []
        for item_id in self.find(query, k, hidden, step, cooling=True):
            record = self.store.get(item_id)
            if record is not None:
                out.append((item_id, self.cooldown_left(record["step_evicted"], step)))
        return out

    def cooldown_left(self, evicted: int, step: int) -> int:
        """Steps until an item evicted at step `evicted` may be recalled (0: it may now)."""
        if self.cooldown_steps <= 0:
            return 0
        return min(max(self.cooldown_steps - (step - evicted), 0), self.cooldown_steps)

    def indexed(self, record: dict[str, Any]) -> None:
        """Keep the vector index in step with a record just written to the store."""
        if self._vectors is not None:
            self._vectors.put(record["id"], record.get("vector"), record["step_evicted"])

    def _symbol_hits(
        self, query: str, hidden: Collection[str], step: int, cooling: bool
    ) -> list[str]:
        """Cold ids whose id or defined names appear in `query`, best first."""
        names = identifiers(query)
        by_id = [n for n in names if _ID.fullmatch(n) and self.store.get(n) is not None]
        ranked = rank_hits(
            by_id, self.store.by_symbol(names), self.store.by_symbol(names, folded=True)
        )
        out: list[str] = []
        for item_id in ranked:
            record = self.store.get(item_id) if item_id not in hidden else None
            if (
                record is not None
                and (self.cooldown_left(record["step_evicted"], step) > 0) == cooling
            ):
                out.append(item_id)
        return out

    def _meaning_hits(
        self,
        query: str,
        k: int,
        exclude: set[str],
        hidden: Collection[str],
        step: int,
        cooling: bool,
    ) -> list[str]:
        """Cold ids nearest to `query` in meaning, outside their cooldown (or only inside it)."""
        if self._vectors is None:
            self._vectors = scoring.VectorIndex(self.store.vectors())

        def allow(item_id: str, evicted: int) -> bool:
            return (
                item_id not in exclude
                and item_id not in hidden
                and (self.cooldown_left(evicted, step) > 0) == cooling
            )

        query_vector = (self.embed(query) if self.embed else None) or ()
        return [i for i, _ in self._vectors.search(query_vector, k, allow, MIN_SIMILARITY)]


def view(record: dict[str, Any], limit: int, mentions: Mapping[str, int], step: int) -> Item:
    """A hot `recalled` copy of a cold record, cut to `limit` tokens if longer.

    References made while it was cold (mentions counted since `seen`) are added to its refs.
    """
    text, count = record["text"], record["tokens"]
    if count > limit and not record.get("exact", True):
        count = toks.count(text)  # the booked count was an estimate
    if count > limit:
        text = fences.close_cut(
            toks.truncate(text, limit - 32) + f"\n… (cut: {count} tokens in all)"
        )
    seen = record.get("seen") or {}
    since = max((mentions.get(n, 0) - seen.get(n, 0) for n in record["symbols"]), default=0)
    vector = record.get("vector")
    return Item(
        id=record["id"],
        kind="recalled",
        text=text,
        summary=record["summary"],
        tokens=0,
        pinned=False,
        step=record["step"],
        symbols=tuple(record["symbols"]),
        touched=step,
        refs=record["refs"] + max(since, 0),
        origin_id=record["id"],
        repeats=record.get("repeats", 1),
        vector=tuple(vector) if vector else None,
    )
