"""Working memory: typed items scored against the goal, packed into a token budget.

What is in context is chosen by score; where it sits is kept stable, so that providers' prompt
caches can reuse each request's prefix: new items go at the end of the memory block, and the hot
zone is re-ranked only when it overflows, in one batch that evicts the weakest items down to a
low-water mark (`low_water` of the budget); what stays keeps its order. What does not fit moves
to a cold store (see store.py) and comes back with recall() (recall.py finds it).

Sizes are booked at add() from a cheap estimate and counted exactly, once per item, when an item
is assembled into a context (meter.py). The step advances only with tick() (the run loop calls
it once per tool call); add() does not, so items added within one step are equally recent.
Recency counts steps since an item was added or last touched; recall() touches what it brings
back. A mention by a later item raises the item's references term instead: touching it too would
let old, much-mentioned items look as new as the latest edits. The latest edits are kept hot
whatever their score (see HotZone.weakest()). An add() of the very kind and text of a hot item
merges into it: one item, its count shown in its header, moved to the end as the newest.
"""

from __future__ import annotations

import posixpath
from collections.abc import Collection, Mapping, Sequence
from typing import Any, TypedDict

from agent_cli.core.protocols import Embedder
from agent_cli.core.text import shorten
from agent_cli.memory.working import assembly, recall, scoring
from agent_cli.memory.working.assembly import FOOTER_TOKENS, Context
from agent_cli.memory.working.hot import HotZone
from agent_cli.memory.working.layout import Layout
from agent_cli.memory.working.meter import SEPARATOR_TOKENS, Meter
from agent_cli.memory.working.names.mentions import Mentions
from agent_cli.memory.working.names.symbols import definitions
from agent_cli.memory.working.recall import ColdSearch
from agent_cli.memory.working.revise import Revisions
from agent_cli.memory.working.store import InMemStore, Item, Store, id_number

__all__ = ["FOOTER_TOKENS", "SEPARATOR_TOKENS", "Context", "WorkingMemory", "WorkingState"]

SUMMARY_CHARS = 80
MIN_TOKENS = 256
LOW_WATER = 0.5  # a batch frees half the room, so that many steps follow it before the next
STATE_FORMAT = 1


class WorkingState(TypedDict):
    """What export_state() returns: the hot zone in order, the counters and the layout."""

    format: int
    goal: str
    goal_vector: list[float] | None
    step: int
    next: int
    evictions: int
    mentions: dict[str, int]
    restored: list[str]
    recent_edits: list[str]
    pinned_section: list[str]
    cold_list: list[str]
    file_views: dict[str, list[str]]
    items: list[dict[str, Any]]  # Item.to_dict() of each hot item


# The types of a saved state's fields, and of each of its items', that import_state relies on
# (None: the field may be missing or null, as in states saved before it existed).
_STATE_TYPES: dict[str, tuple[type, ...]] = {
    "goal": (str,),
    "step": (int,),
    "next": (int,),
    "evictions": (int,),
    "mentions": (dict,),
    "restored": (list,),
    "items": (list,),
    "goal_vector": (list, type(None)),
    "recent_edits": (list, type(None)),
    "pinned_section": (list, type(None)),
    "cold_list": (list, type(None)),
    "file_views": (dict, type(None)),
}
_ITEM_TYPES: dict[str, tuple[type, ...]] = {
    "id": (str,),
    "kind": (str,),
    "text": (str,),
    "summary": (str,),
    "tokens": (int,),
    "pinned": (bool,),
    "step": (int,),
    "symbols": (list,),
    "touched": (int,),
    "refs": (int,),
    "origin_id": (str, type(None)),
    "cost": (int, type(None)),
    "repeats": (int, type(None)),
    "exact": (bool, type(None)),
    "vector": (list, type(None)),
}


def malformed(state: Mapping[str, Any]) -> str | None:
    """Why a saved working-memory state (JSON read back, maybe edited by hand) cannot be
    imported, or None: a field of the wrong type, an item that is not an object."""
    why = _wrong_types(state, _STATE_TYPES, "")
    if why:
        return why
    if isinstance(state.get("cold_list"), list) and len(state["cold_list"]) not in (0, 2):
        return "cold_list: expected two strings"
    for n, item in enumerate(state["items"]):
        why = _wrong_types(item, _ITEM_TYPES, f"items.{n}.") if isinstance(item, dict) else None
        if not isinstance(item, dict) or why:
            return why or f"items.{n}: expected an object"
        if item["kind"] not in scoring.KIND_WEIGHTS:
            return f"items.{n}.kind: unknown kind {item['kind']!r}"
    return None


def _wrong_types(
    data: Mapping[str, Any], types: dict[str, tuple[type, ...]], at: str
) -> str | None:
    """The first field of `data` whose value is not of its `types` (a bool is no int), or is
    a negative int (every int of a saved state is a count or a step)."""
    for key, allowed in types.items():
        value = data.get(key)
        if value is None and type(None) in allowed:
            continue
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            got = "missing" if key not in data else type(value).__name__
            names = " or ".join(t.__name__ for t in allowed if t is not type(None))
            return f"{at}{key}: expected {names}, got {got}"
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            return f"{at}{key}: expected 0 or more, got {value}"
    return None


def _summary(summary: str, text: str) -> str:
    """One short line: the given summary, or the first non-blank line of the text."""
    return shorten(summary.strip() or text.lstrip().split("\n", 1)[0], SUMMARY_CHARS)


class WorkingMemory:
    """Hot items within `max_tokens`, the rest in `store`; see docs/working_memory.md."""

    def __init__(
        self,
        store: Store | None = None,
        embedder: Embedder | None = None,
        max_tokens: int = 4000,
        recall_cooldown_steps: int = 0,
        pinned_share: float = 1 / 3,
        protect_recent_edits: int = 10,
        low_water: float = LOW_WATER,
    ) -> None:
        if max_tokens < MIN_TOKENS:
            raise ValueError(f"max_tokens must be at least {MIN_TOKENS}, not {max_tokens}")
        if not 0 < pinned_share <= 1:
            raise ValueError(f"pinned_share must be in (0, 1], not {pinned_share}")
        if recall_cooldown_steps < 0:
            raise ValueError("recall_cooldown_steps cannot be negative")
        if protect_recent_edits < 0:
            raise ValueError("protect_recent_edits cannot be negative")
        if not 0 < low_water <= 1:
            raise ValueError(f"low_water must be in (0, 1], not {low_water}")
        self.store = store if store is not None else InMemStore()
        self.embedder = embedder
        self.max_tokens = max_tokens
        self.recall_cooldown_steps = recall_cooldown_steps
        self.pinned_share = pinned_share
        self.protect_recent_edits = protect_recent_edits
        self.low_water = low_water
        self._meter = Meter()
        self._room = max_tokens - FOOTER_TOKENS
        self._pinned_cap = int(self._room * pinned_share)
        self._search = ColdSearch(
            self.store, self._embed if embedder else None, recall_cooldown_steps
        )
        self._revisions = Revisions(self.store, self._meter, self._rescore, self._fit)
        self._reset()
        self._next = self.store.max_number() + 1

    def set_budget(self, max_tokens: int) -> None:
        """Keep the hot zone within `max_tokens` from now on (the model's window turned out
        smaller than the one the budget was made for), evicting a batch at once when it is over."""
        if max_tokens < MIN_TOKENS:
            raise ValueError(f"max_tokens must be at least {MIN_TOKENS}, not {max_tokens}")
        self.max_tokens = max_tokens
        self._room = max_tokens - FOOTER_TOKENS
        self._pinned_cap = int(self._room * self.pinned_share)
        self._fit()

    def _reset(self) -> None:
        """Empty hot zone, step 0, no goal."""
        self._hot = HotZone(self._score, self.protect_recent_edits)
        self._layout = Layout()
        self._mentions = Mentions()  # defined name -> items that mentioned it since
        self._restored: set[str] = set()  # cold records whose recalled view is hot
        self._step = 0
        self._goal = ""
        self._goal_vector: tuple[float, ...] | None = None
        self._evictions = 0
        self._note_recalls: dict[str, int] = {}  # pinned note -> order of its last recall
        self._file_views: dict[str, list[str]] = {}  # path -> items showing it since its last edit
        self._shown: assembly.Shown | None = None  # how the last context showed the pinned notes
        self._listed = assembly.Listed()  # what the last cold list showed (a resume starts anew)

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
        for item in self._hot:
            self._rescore(item)

    def note(self, text: str, summary: str = "") -> str:
        """Add a pinned note; returns its id."""
        return self.add("note", text, summary)

    def add(self, kind: str, text: str, summary: str = "", path: str = "") -> str:
        """Add an item at the end of the memory block, evicting a batch when over budget.

        The very kind and text of a hot item merge into it instead; returns the item's id.
        `path` names the file a `file` (a read) or an `edit` (a write) item shows: an edit
        supersedes the earlier reads and writes of that file (see _supersede_views).
        """
        item_id = self._add(kind, text, summary)
        if path and kind in ("file", "edit"):
            # one file however it is spelt: `./a.py`, `a/../a.py` and `a.py` are one
            self._supersede_views(kind, posixpath.normpath(path), item_id)
        return item_id

    def _supersede_views(self, kind: str, path: str, item_id: str) -> None:
        """After an edit of `path`, its earlier reads and writes become one-line stubs, hot and
        cold, so that no superseded content is sent again; a read is only tracked."""
        views = self._file_views.setdefault(path, [])
        if kind == "edit":
            stub = f"{path}, superseded by {item_id}"
            for old in views:
                if old != item_id:
                    self._revisions.supersede(self._hot, self._step, old, stub, summary=stub)
            views.clear()
        if item_id not in views:
            views.append(item_id)

    def _add(self, kind: str, text: str, summary: str) -> str:
        """add() without the file it shows."""
        scoring.check_kind(kind)
        text = str(text)
        same = self._hot.identical(kind, text)
        if same is not None:
            return self._merge(same)
        item = self._make(kind, text, summary)
        self._reference(item)
        if kind == "edit":
            self._hot.protect(item.id, self._step)
        if item.cost > self._room:
            self._resize(item, self._meter.exact(item))  # an estimate too high must not decide
        if item.cost > self._room:
            self._store_oversized(item)
        else:
            self._hot.admit(item, self._step)
            self._fit(admitted=item.id)
        return item.id

    def _make(self, kind: str, text: str, summary: str) -> Item:
        """A new item with the next id, booked at its estimated size."""
        item = Item(
            id=f"m{self._next}",
            kind=kind,
            text=text,
            summary=_summary(summary, text),
            tokens=0,
            pinned=kind == "note",
            step=self._step,
            symbols=definitions(text),
            touched=self._step,
            vector=self._embed(text) if self.embedder is not None else None,
        )
        self._next += 1
        self._meter.estimated(item)
        if item.vector is not None:
            item.goal = scoring.goal_term(item.vector, self._goal_vector)
        item.static = scoring.static_score(kind, 0, item.goal, item.tokens)
        return item

    def _merge(self, item: Item) -> str:
        """Count one more identical result in `item`, touched now.

        The item keeps its place and its rendering: a prompt cache keeps the memory block's
        prefix, and the tool message of the repeat (`Request`) points to the item and says how
        many times it came."""
        item.repeats += 1
        item.touched = self._step
        if item.kind == "edit":
            self._hot.protect(item.id, self._step)
        self._rescore(item)
        return item.id

    def _resize(self, item: Item, change: int) -> None:
        """Book a change in an item's cost and rescore it (its size term)."""
        if self._hot.get(item.id) is item:
            self._hot.resized(item, change)
        self._rescore(item)

    def _embed(self, text: str) -> tuple[float, ...] | None:
        """The unit vector of `text`, or None without an embedder."""
        if self.embedder is None:
            return None
        return scoring.normalise(self.embedder.embed([text])[0])

    def _rescore(self, item: Item) -> None:
        """Recompute the parts of the score that do not change with the step."""
        item.goal = scoring.goal_term(item.vector, self._goal_vector)
        item.static = scoring.static_score(item.kind, item.refs, item.goal, item.tokens)
        self._hot.rescored(item, self._step)

    def _score(self, item: Item) -> float:
        """The item's score now."""
        age = self._step - item.touched
        recent = scoring.RECENT
        return item.static + (recent[age] if 0 <= age < len(recent) else scoring.recency(age))

    def _reference(self, item: Item) -> None:
        """Count `item`'s mentions of names defined earlier, once per defining hot item."""
        mentions, hot_defs = self._mentions, self._hot.defs
        names = mentions.found_in(item.text)
        if names:
            counts = mentions.counts
            for name in names:
                counts[name] += 1
            bumped: set[str] = set()
            for name in names & hot_defs.keys():
                bumped.update(hot_defs[name])
            for item_id in bumped:
                target = self._hot.items[item_id]
                target.refs += 1
                self._rescore(target)
        for name in item.symbols:
            mentions.define(name)

    def _fit(self, need: int = 0, admitted: str | None = None) -> None:
        """Past the budget (with `need` more tokens to come), evict the weakest down to the
        low-water mark; pinned notes past their share stay (revise.py). The item just
        `admitted` is not taken on the way down to the mark, only if the budget itself needs
        it: what the agent just got is not gone before any request shows it. What stays
        before the first item taken out keeps its place; what stays after it is re-ordered
        (layout.py)."""
        hot = self._hot
        if hot.cost + need <= self._room or self._load() + need <= self._room:
            return  # the first test spares the pinned notes' share when nothing is over
        first: int | None = None  # where the first item taken out of the memory block sat

        def take(item: Item) -> None:
            nonlocal first
            if not self._layout.in_section(item):
                at = hot.position(item.id)
                first = at if first is None else min(first, at)
            self._evict(item)

        low = int(self._room * self.low_water)
        # This pass takes neither a pinned note nor one of the latest edits: what the notes
        # take beyond their share stays the same while it runs.
        beyond = hot.pinned_cost - min(hot.pinned_cost, self._pinned_room())
        while hot.cost - beyond + need > low and (
            (item := hot.weakest(self._step, spare=admitted)) is not None
        ):
            take(item)
        if self._load() + need > self._room:
            self._count_latest_edits()  # an estimate too high must not evict one of them
        while (
            self._load() + need > self._room
            and (item := hot.weakest(self._step, spare_latest=False)) is not None
        ):
            take(item)  # the latest edits alone overflow: they go by score
        while self._load() + need > self._room and hot.pinned_cost:
            take(hot.oldest_pinned())
        self._layout.after_batch(hot, first, self._step)

    def _count_latest_edits(self) -> None:
        """Count the latest edits exactly."""
        for item_id in list(self._hot.protected):
            item = self._hot.get(item_id)
            if item is not None and not item.exact:
                self._resize(item, self._meter.exact(item))

    def _load(self) -> int:
        """The tokens the hot zone takes in a context: pinned notes count up to their share, the
        ones past it being shown shortened (assembly.within_share)."""
        pinned = self._hot.pinned_cost
        return self._hot.cost - pinned + min(pinned, self._pinned_room())

    def _pinned_room(self) -> int:
        """The pinned notes' share, less what the latest edits need of it to fit beside them
        (but never less than the one line that lists the notes)."""
        edits = self._hot.protected_cost
        return max(assembly.MORE_TOKENS, min(self._pinned_cap, self._room - edits))

    def _evict(self, item: Item) -> None:
        """Move an item to the cold store; a view only refreshes the record it came from."""
        self._hot.unlink(item)
        self._evictions += 1
        if item.pinned:
            self._revisions.evicting(item)  # a pinned note is reported as a demotion
        if item.origin_id is not None:
            self._restored.discard(item.origin_id)
            record = self.store.get(item.origin_id)
            if record is not None:
                record.update(
                    refs=item.refs,
                    touched=item.touched,
                    step_evicted=self._step,
                    seen=self._seen(item.symbols),
                )
                self._put(record)
                return
        self._put(self._record(item))

    def _record(self, item: Item) -> dict[str, Any]:
        """The cold record of an item evicted now."""
        record = item.to_dict()
        record["step_evicted"] = self._step
        record["seen"] = self._seen(item.symbols)
        return record

    def _seen(self, names: Sequence[str]) -> dict[str, int]:
        """How often each name had been mentioned, to count later mentions while cold."""
        if not names:
            return {}
        counts = self._mentions.counts
        return {name: counts.get(name, 0) for name in names}

    def _put(self, record: dict[str, Any]) -> None:
        """Write a record to the store and to the vector index if it is loaded."""
        self.store.put(record)
        self._search.indexed(record)

    def _store_oversized(self, item: Item) -> None:
        """Put an item larger than the budget straight into the cold store; a stub stays hot."""
        self._evictions += 1
        self._put(self._record(item))
        text = (
            f"({item.tokens} tokens, kept in the cold store: recall {item.id} or a name "
            f"it defines to bring back its start)"
        )
        stub = Item(
            id=item.id,
            kind=item.kind,
            text=text,
            summary=item.summary,
            tokens=0,
            pinned=False,
            step=item.step,
            symbols=item.symbols,
            touched=self._step,
            origin_id=item.id,
            vector=item.vector,
        )
        self._meter.estimated(stub)
        self._rescore(stub)
        self._hot.admit(stub, self._step)
        self._fit()

    def recall(self, query: str, k: int = 3) -> list[str]:
        """Bring back up to `k` cold items matching `query`; returns their ids, now hot."""
        note = self._hot.get(query.strip())
        if note is not None and note.pinned:
            note.touched = self._step  # the most recently touched notes are shown in full
            self._note_recalls[note.id] = len(self._note_recalls) + 1
            self._shown = None  # chosen anew, this note first
            return [note.id]
        self._search.cooldown_steps = self.recall_cooldown_steps
        return self._restore(self._search.find(query, k, self._restored, self._step))

    def cooling(self, query: str, k: int = 3) -> list[tuple[str, int]]:
        """Cold items matching `query` that only their cooldown holds back: (id, steps left)."""
        self._search.cooldown_steps = self.recall_cooldown_steps
        return self._search.cooling(query, k, self._restored, self._step)

    def supersede(self, item_id: str, text: str) -> bool:
        """Replace what item `item_id` says, hot and cold, by `text`; False if there is no such item."""
        return self._revisions.supersede(self._hot, self._step, item_id, text)

    def pinned_over(self) -> list[str]:
        """The oldest pinned notes whose unpinning would bring pinned notes within their share."""
        return self._revisions.pinned_over(self._hot, self._pinned_cap)

    def unpin(self, item_id: str) -> None:
        """Make pinned note `item_id` an ordinary note, scored like any item; ValueError if it is not one."""
        self._revisions.unpin(self._hot, self._step, item_id)

    def demote(self, item_id: str) -> None:
        """Unpin `item_id` for the model, and queue the demotion to be reported."""
        self._revisions.demote(self._hot, self._step, item_id)

    def take_demoted(self) -> list[str]:
        """The demotions since the last call (oldest first), forgotten once taken."""
        return self._revisions.take_demoted()

    def _restore(self, ids: list[str]) -> list[str]:
        """Make room for the whole batch first, then append it as `recalled` views."""
        space = self._room - min(self._hot.pinned_cost, self._pinned_room())
        batch: list[Item] = []
        used = 0
        for item_id in ids:
            record = self.store.get(item_id)
            if record is not None:
                view = self._view(record)
                if view.cost <= space - used:
                    batch.append(view)
                    used += view.cost
        for view in batch:
            stub = self._hot.get(view.id)
            if stub is not None:
                view.refs = max(view.refs, stub.refs)
                self._hot.unlink(stub)
        self._fit(need=used)
        for view in batch:
            self._rescore(view)
            self._hot.admit(view, self._step)
            self._restored.add(view.id)
        return [v.id for v in batch]

    def _view(self, record: dict[str, Any]) -> Item:
        """A hot `recalled` copy of a cold record, cut to half the budget, counted exactly."""
        view = recall.view(record, self._room // 2 - 32, self._mentions.counts, self._step)
        self._meter.exact(view)
        self._rescore(view)
        return view

    def lay_out(self) -> None:
        """Move the notes taken since the last call into the pinned section (layout.py), and
        choose anew which of them are shown in full (the prefix changes here anyway)."""
        self._layout.settle(self._hot)
        self._shown = None

    def hot_item(self, item_id: str) -> Item | None:
        """The hot item with this id, or None when it is cold or unknown."""
        return self._hot.get(item_id)

    def hot_items(self) -> list[Item]:
        """Hot items, highest score first (ties: the older first)."""
        return sorted(self._hot, key=lambda i: (-self._score(i), id_number(i.id)))

    def cold_manifest(self) -> list[dict[str, Any]]:
        """[{"id", "kind", "summary", "symbols", "step_evicted"}] of cold items not recalled."""
        return [e for e in self.store.manifest() if e["id"] not in self._restored]

    def stats(self) -> dict[str, int]:
        """Counts: hot and cold items, hot tokens (as booked, pinned notes up to their share),
        evictions so far, the step."""
        return {
            "hot": len(self._hot),
            "cold": self.store.count() - len(self._restored),
            "tokens": self._load(),
            "evictions": self._evictions,
            "step": self._step,
        }

    def explain(self, item_id: str) -> dict[str, float]:
        """The terms of an item's score now: kind, refs, goal, recency, size (subtracted), total."""
        item = self._hot.get(item_id)
        if item is None:
            record = self.store.get(item_id)
            if record is None:
                raise KeyError(f"no memory item {item_id!r}")
            item = recall.view(record, record["tokens"], self._mentions.counts, self._step)
            item.kind, item.touched, item.tokens = (
                record["kind"],
                record["touched"],
                record["tokens"],
            )
            item.goal = scoring.goal_term(item.vector, self._goal_vector)
        return scoring.explain(
            item.kind, item.refs, item.goal, self._step - item.touched, item.tokens
        )

    def assemble(self, max_tokens: int | None = None, keep: Collection[str] = ()) -> Context:
        """The pinned notes, then the memory block in its stable order and the list of what is
        cold; every item in it counted exactly, the whole never over `max_tokens` (the
        memory's own budget; a smaller one, for a request that must fit a model's window,
        leaves the weakest items out of this render, the latest edits and then the items of
        `keep` last, and evicts nothing)."""
        budget = self.max_tokens if max_tokens is None else min(max_tokens, self.max_tokens)
        self._settle()
        shown = self._shown_notes()
        pinned, memory = self._layout.split(
            item
            for item in self._hot
            if not item.pinned or item.id in shown.full or item.id in shown.short
        )
        # A cold item shown hot (a recalled view, the stub of one too large for the budget)
        # is not listed: the stub says how to recall it, and the list, left as it was, keeps
        # its place in the cached prefix when such an item comes.
        shown_hot = self._restored.union(i.origin_id for i in self._hot if i.origin_id)
        tail, self._listed = assembly.footer(self.store, shown_hot, self._meter.count, self._listed)
        after = self._layout.footer_after(memory, tail)
        return assembly.pack(
            pinned,
            memory,
            (tail, after),
            budget,
            self._meter.count,
            lambda items: self._left_out(items, keep),
            shown.lines,
            shown.short,
        )

    def _shown_notes(self) -> assembly.Shown:
        """How the pinned notes are shown within their share: as in the last context while that
        holds, else chosen anew, the most recently taken or recalled in full first."""
        notes = [item for item in self._hot if item.pinned]
        share = self._pinned_room()
        shown = assembly.kept(self._shown, notes, share, self._meter.count)
        if shown is None:
            shown = assembly.within_share(notes, share, self._meter.count, self._note_rank)
        self._shown = shown
        return shown

    def _note_rank(self, item: Item) -> tuple[int, int, int]:
        """Which pinned notes are shown in full first: the last touched, recalled ones first."""
        return (item.touched, self._note_recalls.get(item.id, 0), id_number(item.id))

    def _settle(self) -> None:
        """Count every hot item exactly; evict a batch if the exact counts overflow."""
        for item in self._hot:
            if not item.exact:
                self._resize(item, self._meter.exact(item))
        self._fit()

    def _left_out(self, items: list[Item], keep: Collection[str] = ()) -> int:
        """The index in `items` of the next one to leave out of a render that overflows.

        The weakest that is neither one of the latest edits, a pinned note nor in `keep`; then
        the weakest that is not in `keep`; the weakest of all if only those are left.
        """
        kept = [at for at, item in enumerate(items) if item.id not in keep]
        free = [
            at for at in kept if items[at].id not in self._hot.protected and not items[at].pinned
        ]
        return min(
            free or kept or range(len(items)),
            key=lambda at: (self._score(items[at]), id_number(items[at].id)),
        )

    def export_state(self) -> WorkingState:
        """The hot zone in order and the counters as JSON-compatible data; see import_state()."""
        layout = self._layout.dump()
        return {
            "format": STATE_FORMAT,
            "goal": self._goal,
            "goal_vector": list(self._goal_vector) if self._goal_vector else None,
            "step": self._step,
            "next": self._next,
            "evictions": self._evictions,
            "mentions": dict(self._mentions.counts),
            "restored": sorted(self._restored),
            "recent_edits": list(self._hot.protected),
            "pinned_section": layout["pinned_section"],
            "cold_list": layout["cold_list"],
            "file_views": {path: list(ids) for path, ids in self._file_views.items()},
            "items": [item.to_dict() for item in self._hot],
        }

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Replace the hot zone and counters with an exported state (as read back from JSON)."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unknown working-memory state format {state.get('format')!r}")
        why = malformed(state)
        if why:
            raise ValueError(why)
        self._reset()
        self._goal = state["goal"]
        vector = state.get("goal_vector")
        self._goal_vector = tuple(vector) if vector else None
        self._step = state["step"]
        self._next = max(state["next"], self.store.max_number() + 1)
        self._evictions = state["evictions"]
        self._mentions = Mentions(state["mentions"])
        self._restored = set(state["restored"])
        self._file_views = {p: list(ids) for p, ids in state.get("file_views", {}).items()}
        for data in state["items"]:
            item = Item.from_dict(data)
            self._rescore(item)
            self._hot.admit(item, self._step)
        recent = state.get("recent_edits")
        for item_id in self._hot_edits() if recent is None else recent:
            if item_id in self._hot.items:
                self._hot.protect(item_id, self._step)
        self._layout.load(self._hot, state)
        self._fit()  # a state saved under a larger budget

    def _hot_edits(self) -> list[str]:
        """Ids of the hot edits, oldest first: the latest edits of a state saved without them."""
        return sorted((i.id for i in self._hot if i.kind == "edit"), key=id_number)
