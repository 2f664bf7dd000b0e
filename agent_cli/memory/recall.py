"""recall(): bring cold items back to the hot zone by name or by meaning.

A mixin of WorkingMemory (working.py), whose state it shares; see docs/working_memory.md.
"""

from __future__ import annotations

import re
from typing import Any

from agent_cli import fences
from agent_cli import tokens as toks
from agent_cli.memory import scoring
from agent_cli.memory.store import Item, Store
from agent_cli.memory.symbols import identifiers, rank_hits

MIN_SIMILARITY = 0.2
_ID = re.compile(r"m\d+")


class Recall:
    """The recall half of WorkingMemory: symbol and meaning channels, batch restore, views."""

    store: Store
    embedder: Any
    recall_cooldown_steps: int
    _room: int
    _step: int
    _pinned_cost: int
    _hot_cost: int
    _hot: dict[str, Item]
    _mentions: dict[str, int]
    _restored: set[str]
    _vectors: scoring.VectorIndex | None

    def recall(self, query: str, k: int = 3) -> list[str]:
        """Bring back up to `k` cold items matching `query`; returns their ids, now hot."""
        if k <= 0:
            return []
        chosen = self._symbol_hits(query)[:k]
        if len(chosen) < k and self.embedder is not None:
            chosen += self._meaning_hits(query, k - len(chosen), set(chosen))
        return self._restore(chosen)

    def cooling(self, query: str, k: int = 3) -> list[tuple[str, int]]:
        """Cold items matching `query` that only their cooldown holds back: (id, steps left)."""
        found = self._symbol_hits(query, cooling=True)[:k]
        if len(found) < k and self.embedder is not None:
            found += self._meaning_hits(query, k - len(found), set(found), cooling=True)
        out = []
        for item_id in found:
            record = self.store.get(item_id)
            if record is not None:
                out.append((item_id, self._cooldown_left(record["step_evicted"])))
        return out

    def _cooldown_left(self, evicted: int) -> int:
        """Steps until an item evicted at step `evicted` may be recalled (0: it may now)."""
        return max(self.recall_cooldown_steps - (self._step - evicted), 0)

    def _symbol_hits(self, query: str, cooling: bool = False) -> list[str]:
        """Cold ids whose id or defined names appear in `query`, best first: those outside
        their cooldown, or (`cooling`) only those inside it."""
        names = identifiers(query)
        by_id = [n for n in names if _ID.fullmatch(n) and self.store.get(n) is not None]
        ranked = rank_hits(by_id, self.store.by_symbol(names),
                           self.store.by_symbol(names, folded=True))
        out = []
        for item_id in ranked:
            record = self.store.get(item_id) if item_id not in self._restored else None
            if record is not None and (self._cooldown_left(record["step_evicted"]) > 0) == cooling:
                out.append(item_id)
        return out

    def _meaning_hits(self, query: str, k: int, exclude: set[str], cooling: bool = False) -> list[str]:
        """Cold ids nearest to `query` in meaning, outside their cooldown (or only inside it)."""
        if self._vectors is None:
            self._vectors = scoring.VectorIndex(self.store.vectors())
        restored = self._restored

        def allow(item_id: str, evicted: int) -> bool:
            return (item_id not in exclude and item_id not in restored
                    and (self._cooldown_left(evicted) > 0) == cooling)

        query_vector = self._embed(query) or ()
        return [i for i, _ in self._vectors.search(query_vector, k, allow, MIN_SIMILARITY)]

    def _restore(self, ids: list[str]) -> list[str]:
        """Make room for the whole batch first, then bring it back as `recalled` views."""
        space = self._room - self._pinned_cost
        batch: list[Item] = []
        for item_id in ids:
            record = self.store.get(item_id)
            if record is None:
                continue
            view = self._view(record)
            if view.cost <= space - sum(v.cost for v in batch):
                batch.append(view)
        for view in batch:
            stub = self._hot.get(view.id)
            if stub is not None:
                view.refs = max(view.refs, stub.refs)
                self._unlink(stub)
        need = sum(v.cost for v in batch)
        while self._hot_cost + need > self._room:
            self._evict(self._weakest())
        for view in batch:
            self._rescore(view)
            self._admit(view)
            self._restored.add(view.id)
        return [v.id for v in batch]

    def _view(self, record: dict[str, Any]) -> Item:
        """A hot `recalled` copy of a cold record, cut to half the budget if longer."""
        text, count = record["text"], record["tokens"]
        limit = self._room // 2 - 32
        if count > limit:
            text = fences.close_cut(toks.truncate(text, limit - 32)
                                    + f"\n… (cut: {count} tokens in all)")
            count = toks.count(text)
        seen = record.get("seen") or {}
        since = max((self._mentions.get(n, 0) - seen.get(n, 0) for n in record["symbols"]),
                    default=0)
        vector = record.get("vector")
        view = Item(id=record["id"], kind="recalled", text=text, summary=record["summary"],
                    tokens=count, pinned=False, step=record["step"],
                    symbols=tuple(record["symbols"]), touched=self._step,
                    refs=record["refs"] + max(since, 0), origin_id=record["id"],
                    vector=tuple(vector) if vector else None)
        self._measure(view)
        return view

    # Provided by WorkingMemory.
    def _embed(self, text: str) -> tuple[float, ...] | None: ...
    def _evict(self, item: Item) -> None: ...
    def _weakest(self) -> Item: ...
    def _unlink(self, item: Item) -> None: ...
    def _admit(self, item: Item) -> None: ...
    def _rescore(self, item: Item) -> None: ...
    def _measure(self, item: Item) -> None: ...
