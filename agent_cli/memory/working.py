"""Working memory: typed items scored against the goal, packed into a token budget.

What does not fit moves to a cold store (see store.py) and comes back with recall().
The step advances only with tick() (the run loop calls it once per tool call); add() does not,
so items added within one step are equally recent. Recency counts steps since an item was added
or last touched; recall() touches what it brings back. A mention by a later item raises the
item's references term instead: touching it too would let old, much-mentioned items look as
new as the latest edits. The latest edits are kept hot whatever their score (see _weakest()).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, Sequence

from agent_cli import tokens as toks
from agent_cli.memory import scoring
from agent_cli.memory.recall import Recall
from agent_cli.memory.store import InMemStore, Item, Store, id_number
from agent_cli.memory.symbols import definitions, mentioned
from agent_cli.text import shorten

FOOTER_TOKENS = 64  # reserved for the "available with recall" line
FOOTER_ENTRIES = 8
SEPARATOR_TOKENS = 2  # the newline after the header and the blank line after the text
SUMMARY_CHARS = 80
MIN_TOKENS = 256
STATE_FORMAT = 1
_RECENCY = [scoring.recency_term(age) for age in range(4096)]


class Embedder(Protocol):
    """Turns texts into vectors; any object with this method will do."""

    def embed(self, texts: list[str]) -> list[list[float]]: ...


@dataclass(slots=True)
class Context:
    """What assemble() packed: the text the model reads, its exact token count, the items in it."""

    text: str
    tokens: int
    items: list[Item]

    def render(self) -> str:
        """The context as one string."""
        return self.text


def _summary(summary: str, text: str) -> str:
    """One short line: the given summary, or the first non-blank line of the text."""
    return shorten(summary.strip() or text.lstrip().split("\n", 1)[0], SUMMARY_CHARS)


class WorkingMemory(Recall):
    """Hot items within `max_tokens`, the rest in `store`; see docs/working_memory.md."""

    def __init__(self, store: Store | None = None, embedder: Embedder | None = None,
                 max_tokens: int = 4000, recall_cooldown_steps: int = 0,
                 pinned_share: float = 1 / 3, protect_recent_edits: int = 10) -> None:
        if max_tokens < MIN_TOKENS:
            raise ValueError(f"max_tokens must be at least {MIN_TOKENS}, not {max_tokens}")
        if not 0 < pinned_share <= 1:
            raise ValueError(f"pinned_share must be in (0, 1], not {pinned_share}")
        if recall_cooldown_steps < 0:
            raise ValueError("recall_cooldown_steps cannot be negative")
        if protect_recent_edits < 0:
            raise ValueError("protect_recent_edits cannot be negative")
        self.store = store if store is not None else InMemStore()
        self.embedder = embedder
        self.max_tokens = max_tokens
        self.recall_cooldown_steps = recall_cooldown_steps
        self.pinned_share = pinned_share
        self.protect_recent_edits = protect_recent_edits
        self._encode: Callable[[str], list[int]] | None = None  # loaded on the first add()
        self._room = max_tokens - FOOTER_TOKENS
        self._pinned_cap = int(self._room * pinned_share)
        self._reset()
        self._next = self.store.max_number() + 1

    def _reset(self) -> None:
        """Empty hot zone, step 0, no goal."""
        self._hot: dict[str, Item] = {}
        self._hot_cost = 0
        self._pinned_cost = 0
        self._hot_defs: dict[str, set[str]] = {}  # name -> hot items defining it
        self._mentions: dict[str, int] = {}  # defined name -> items that mentioned it since
        self._restored: set[str] = set()  # cold records whose recalled view is hot
        self._protected: dict[str, None] = {}  # the latest edits, oldest first
        self._step = 0
        self._goal = ""
        self._goal_vector: tuple[float, ...] | None = None
        self._evictions = 0
        self._vectors: scoring.VectorIndex | None = None

    @property
    def step(self) -> int:
        """The step counter; tick() advances it."""
        return self._step

    @property
    def goal(self) -> str:
        """The current goal."""
        return self._goal

    def tick(self) -> int:
        """Advance the step by one (once per tool call) and return it."""
        self._step += 1
        return self._step

    def set_goal(self, goal: str) -> None:
        """Score items against `goal` from now on."""
        self._goal = goal
        self._goal_vector = self._embed(goal)
        for item in self._hot.values():
            self._rescore(item)

    def note(self, text: str, summary: str = "") -> str:
        """Add a pinned note; returns its id."""
        return self.add("note", text, summary)

    def add(self, kind: str, text: str, summary: str = "") -> str:
        """Add an item, evicting the weakest to stay within budget; returns its id."""
        scoring.check_kind(kind)
        item = self._make(kind, str(text), summary)
        self._reference(item)
        if kind == "edit":
            self._protect(item.id)
        if item.cost > self._room:
            self._store_oversized(item)
        else:
            self._admit(item)
            self._fit()
        return item.id

    def _make(self, kind: str, text: str, summary: str) -> Item:
        """A new hot item with the next id, its tokens counted once."""
        item = Item(id=f"m{self._next}", kind=kind, text=text, summary=_summary(summary, text),
                    tokens=self._count(text), pinned=kind == "note", step=self._step,
                    symbols=definitions(text), touched=self._step, vector=self._embed(text))
        self._next += 1
        self._measure(item)
        return item

    def _count(self, text: str) -> int:
        """How many tokens `text` takes: agent_cli.tokens.count(text), exactly.

        count() encodes with no special token allowed, which is encode_ordinary(): the same ids,
        without count()'s model lookup and checks on each call (a few µs on every add()).
        """
        if self._encode is None:
            self._encode = toks.get_encoding().encode_ordinary
        return len(self._encode(text))

    def _measure(self, item: Item) -> None:
        """Set the item's cost in the context and its score."""
        item.cost = self._count(item.header()) + item.tokens + SEPARATOR_TOKENS
        self._rescore(item)

    def _protect(self, item_id: str) -> None:
        """Count a new edit among the latest ones, which _weakest() passes over."""
        self._protected[item_id] = None
        if len(self._protected) > self.protect_recent_edits:
            del self._protected[next(iter(self._protected))]

    def _embed(self, text: str) -> tuple[float, ...] | None:
        """The unit vector of `text`, or None without an embedder."""
        if self.embedder is None:
            return None
        return scoring.normalise(self.embedder.embed([text])[0])

    def _rescore(self, item: Item) -> None:
        """Recompute the parts of the score that do not change with the step."""
        item.goal = scoring.goal_term(item.vector, self._goal_vector)
        item.static = scoring.static_score(item.kind, item.refs, item.goal, item.tokens)

    def _score(self, item: Item) -> float:
        """The item's score now."""
        age = self._step - item.touched
        return item.static + (_RECENCY[age] if 0 <= age < 4096 else scoring.recency_term(age))

    def _reference(self, item: Item) -> None:
        """Count `item`'s mentions of names defined earlier, once per defining hot item."""
        mentions, hot_defs = self._mentions, self._hot_defs
        bumped: set[str] = set()
        for name in mentioned(item.text, mentions):
            mentions[name] += 1
            if name in hot_defs:
                bumped.update(hot_defs[name])
        for item_id in bumped:
            target = self._hot[item_id]
            target.refs += 1
            self._rescore(target)

    def _admit(self, item: Item) -> None:
        """Put an item in the hot zone and index the names it defines."""
        self._hot[item.id] = item
        self._hot_cost += item.cost
        if item.pinned:
            self._pinned_cost += item.cost
        for name in item.symbols:
            self._hot_defs.setdefault(name, set()).add(item.id)
            self._mentions.setdefault(name, 0)

    def _unlink(self, item: Item) -> None:
        """Take an item out of the hot zone, its name index and the latest edits."""
        del self._hot[item.id]
        self._protected.pop(item.id, None)
        self._hot_cost -= item.cost
        if item.pinned:
            self._pinned_cost -= item.cost
        for name in item.symbols:
            ids = self._hot_defs.get(name)
            if ids is not None:
                ids.discard(item.id)
                if not ids:
                    del self._hot_defs[name]

    def _fit(self) -> None:
        """Evict until pinned items are within their share and everything within budget."""
        while self._pinned_cost > self._pinned_cap:
            self._evict(next(it for it in self._hot.values() if it.pinned))
        while self._hot_cost > self._room:
            self._evict(self._weakest())

    def _weakest(self) -> Item:
        """The item to evict next.

        The lowest-scoring item that is neither pinned nor one of the latest edits; failing that
        (the latest edits alone overflow the budget), the lowest-scoring unpinned item; failing
        that, the oldest pinned one.
        """
        weakest = latest = None
        low = latest_low = math.inf
        step, table, protected = self._step, _RECENCY, self._protected
        for item in self._hot.values():  # inlined _score(): this loop runs on nearly every add
            if item.pinned:
                continue
            age = step - item.touched
            score = item.static + (table[age] if 0 <= age < 4096 else scoring.recency_term(age))
            if item.id in protected:
                if score < latest_low:
                    latest, latest_low = item, score
            elif score < low:
                weakest, low = item, score
        return weakest or latest or next(iter(self._hot.values()))

    def _evict(self, item: Item) -> None:
        """Move an item to the cold store; a view only refreshes the record it came from."""
        self._unlink(item)
        self._evictions += 1
        if item.origin_id is not None:
            self._restored.discard(item.origin_id)
            record = self.store.get(item.origin_id)
            if record is not None:
                record.update(refs=item.refs, touched=item.touched, step_evicted=self._step,
                              seen=self._seen(item.symbols))
                self._put(record)
                return
        self._put(self._record(item))

    def _record(self, item: Item) -> dict[str, Any]:
        """The cold record of an item evicted now."""
        record = item.to_dict()
        record.update(step_evicted=self._step, seen=self._seen(item.symbols))
        return record

    def _seen(self, names: Sequence[str]) -> dict[str, int]:
        """How often each name had been mentioned, to count later mentions while cold."""
        if not names:
            return {}
        return {name: self._mentions.get(name, 0) for name in names}

    def _put(self, record: dict[str, Any]) -> None:
        """Write a record to the store and to the vector index if it is loaded."""
        self.store.put(record)
        if self._vectors is not None:
            self._vectors.put(record["id"], record.get("vector"), record["step_evicted"])

    def _store_oversized(self, item: Item) -> None:
        """Put an item larger than the budget straight into the cold store; a stub stays hot."""
        self._evictions += 1
        self._put(self._record(item))
        text = (f"({item.tokens} tokens, kept in the cold store: recall {item.id} or a name "
                f"it defines to bring back its start)")
        stub = Item(id=item.id, kind=item.kind, text=text, summary=item.summary,
                    tokens=self._count(text), pinned=False, step=item.step, symbols=item.symbols,
                    touched=self._step, origin_id=item.id, vector=item.vector)
        self._measure(stub)
        self._admit(stub)
        self._fit()

    def hot_items(self) -> list[Item]:
        """Hot items, highest score first (ties: the earlier added first)."""
        return sorted(self._hot.values(), key=self._score, reverse=True)

    def cold_manifest(self) -> list[dict[str, Any]]:
        """[{"id", "kind", "summary", "symbols", "step_evicted"}] of cold items not recalled."""
        return [e for e in self.store.manifest() if e["id"] not in self._restored]

    def stats(self) -> dict[str, int]:
        """Counts: hot and cold items, hot tokens (as rendered), evictions so far, the step."""
        return {"hot": len(self._hot), "cold": self.store.count() - len(self._restored),
                "tokens": self._hot_cost, "evictions": self._evictions, "step": self._step}

    def explain(self, item_id: str) -> dict[str, float]:
        """The terms of an item's score now: kind, refs, goal, recency, size (subtracted), total."""
        item = self._hot.get(item_id)
        if item is None:
            record = self.store.get(item_id)
            if record is None:
                raise KeyError(f"no memory item {item_id!r}")
            item = self._view(record)
            item.kind, item.touched, item.tokens = record["kind"], record["touched"], record["tokens"]
            self._rescore(item)
        return scoring.explain(item.kind, item.refs, item.goal, self._step - item.touched,
                               item.tokens)

    def assemble(self) -> Context:
        """Hot items by importance, each under a header, then the list of what is cold.

        Should the joins merge into more tokens than the budget, the weakest items are left out
        of this render, the latest edits last of all.
        """
        items = self.hot_items()
        pieces = [item.render() for item in items]
        footer = self._footer()
        tail = [footer] if footer else []
        text = "\n".join(pieces + tail)
        count = self._count(text)
        while count > self.max_tokens and items:  # joins can merge tokens; never exceed the budget
            drop = self._left_out(items)
            del items[drop], pieces[drop]
            text = "\n".join(pieces + tail)
            count = self._count(text)
        return Context(text=text, tokens=count, items=items)

    def _left_out(self, items: list[Item]) -> int:
        """The index in `items` (best first) of the next one to leave out of a render.

        The weakest that is not one of the latest edits; the weakest of all if only they are left.
        """
        for at in range(len(items) - 1, -1, -1):
            if items[at].id not in self._protected:
                return at
        return len(items) - 1

    def _footer(self) -> str:
        """A line of the most recently evicted cold items, within FOOTER_TOKENS."""
        cold = self.store.count() - len(self._restored)
        if cold <= 0:
            return ""
        recent = self.store.recent(FOOTER_ENTRIES + len(self._restored))
        entries = [f"{e['id']} {e['summary'][:40]}" for e in recent
                   if e["id"] not in self._restored][:FOOTER_ENTRIES]
        while True:
            more = cold - len(entries)
            line = "available with recall: " + "; ".join(entries)
            line += f"{'; ' if entries else ''}{more} more" if more else ""
            if self._count(line) <= FOOTER_TOKENS - SEPARATOR_TOKENS or not entries:
                return line
            entries.pop()

    def export_state(self) -> dict[str, Any]:
        """The hot zone and counters as JSON-compatible data; import_state() restores them."""
        return {"format": STATE_FORMAT, "goal": self._goal,
                "goal_vector": list(self._goal_vector) if self._goal_vector else None,
                "step": self._step, "next": self._next, "evictions": self._evictions,
                "mentions": dict(self._mentions), "restored": sorted(self._restored),
                "recent_edits": list(self._protected),
                "items": [item.to_dict() for item in self._hot.values()]}

    def import_state(self, state: dict[str, Any]) -> None:
        """Replace the hot zone and counters with an exported state."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unknown working-memory state format {state.get('format')!r}")
        self._reset()
        self._goal = state["goal"]
        vector = state.get("goal_vector")
        self._goal_vector = tuple(vector) if vector else None
        self._step = state["step"]
        self._next = max(state["next"], self.store.max_number() + 1)
        self._evictions = state["evictions"]
        self._mentions = dict(state["mentions"])
        self._restored = set(state["restored"])
        for data in state["items"]:
            item = Item.from_dict(data)
            self._rescore(item)
            self._admit(item)
        recent = state.get("recent_edits")
        for item_id in self._hot_edits() if recent is None else recent:
            if item_id in self._hot:
                self._protect(item_id)
        self._fit()  # a state saved under a larger budget

    def _hot_edits(self) -> list[str]:
        """Ids of the hot edits, oldest first: the latest edits of a state saved without them."""
        return sorted((i.id for i in self._hot.values() if i.kind == "edit"), key=id_number)
