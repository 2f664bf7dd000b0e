"""What assemble() renders: the pinned notes, the memory block and the list of what is cold.

Pinned notes take at most their share of the context. When they are over it, the most recently
taken (or recalled) are shown in full, the next ones as one line each (id and first words), and
the rest as one line of ids; all of them stay pinned in the hot zone.

That choice is kept from one context to the next while it fits (`kept()`), because the pinned
section comes before the memory block: a section that changed would make a prompt cache re-read
the whole block. A note taken since the choice waits at the end of the memory block, shown there
in full when it fits beside the notes chosen, else as its one line.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any

from agent_cli.core.text import shorten
from agent_cli.memory.working.store import Item, Store, id_number

FOOTER_TOKENS = 64  # reserved for the "available with recall" line
FOOTER_ENTRIES = 8
MORE_TOKENS = 48  # reserved for the "N more pinned notes" line
BRIEF_CHARS = 60


@dataclass(slots=True)
class Context:
    """What assemble() packed: the pinned notes and the memory block, and the items in them, in
    order. `tokens` is the exact count of the two parts as they are sent (each on its own), plus
    one for the newline that joins them in render()."""

    pinned: str
    memory: str
    tokens: int
    items: list[Item]
    text: str = field(init=False)

    def __post_init__(self) -> None:
        self.text = "\n".join(part for part in (self.pinned, self.memory) if part)

    def render(self) -> str:
        """The pinned notes then the memory block, as one string."""
        return self.text


@dataclass(frozen=True, slots=True)
class Listed:
    """What a cold list showed: the ids it listed, oldest first, and the ids of the most
    recently evicted items then (those not among them went cold since)."""

    ids: tuple[str, ...] = ()
    latest: frozenset[str] = frozenset()


def footer(
    store: Store, shown: Collection[str], count: Callable[[str], int], before: Listed = Listed()
) -> tuple[str, Listed]:
    """The line that lists cold items, within FOOTER_TOKENS and FOOTER_ENTRIES, and what it
    lists; the cold items of `shown`, which the memory block shows as a view or a stub, are
    left out.

    The items the last line listed (`before`) keep their place, and those evicted since come
    after them, so that from one context to the next the line grows at its end, which is all
    a prompt cache reads anew. When they no longer fit, the line starts again with the items
    evicted since (the most recent of them, if not all fit)."""
    cold = store.count() - len(shown)
    if cold <= 0:
        return "", Listed()
    latest = [e for e in store.recent(FOOTER_ENTRIES + len(shown)) if e["id"] not in shown]
    latest = latest[:FOOTER_ENTRIES]  # the most recently evicted first
    now = frozenset(entry["id"] for entry in latest)
    records = (store.get(item_id) for item_id in before.ids if item_id not in shown)
    listed = [record for record in records if record is not None]
    ids = {record["id"] for record in listed} | before.latest
    new = [entry for entry in latest if entry["id"] not in ids]
    if listed:
        entries = listed + new[::-1]
        line = _cold_line(entries, cold)
        if len(entries) <= FOOTER_ENTRIES and count(line) <= FOOTER_TOKENS - 2:
            return line, Listed(tuple(entry["id"] for entry in entries), now)
    fresh = new or latest
    while True:
        line = _cold_line(fresh[::-1], cold)
        if count(line) <= FOOTER_TOKENS - 2 or not fresh:
            return line, Listed(tuple(entry["id"] for entry in fresh[::-1]), now)
        fresh.pop()  # the oldest of them


def _cold_line(entries: list[dict[str, Any]], cold: int) -> str:
    """`available with recall: m12 summary; ...; N more` for these entries of `cold` items."""
    line = "available with recall: " + "; ".join(f"{e['id']} {e['summary'][:40]}" for e in entries)
    more = cold - len(entries)
    return line + (f"{'; ' if entries else ''}{more} more" if more else "")


@dataclass(frozen=True, slots=True)
class Shown:
    """How the pinned notes are shown: `chosen` maps each note the choice was made for to its
    cost then; `full` are those shown in full, `lines` the lines that stand for the others in
    the pinned section (`lines_tokens` tokens). `short` are the notes taken since, shown in the
    memory block as their one line (`short_line()`)."""

    chosen: dict[str, int]
    full: frozenset[str]
    lines: str = ""
    lines_tokens: int = 0
    short: frozenset[str] = frozenset()


def short_line(item: Item) -> str:
    """A pinned note as one line: its id and first words."""
    return f"[note {item.id} pinned, shortened] {shorten(item.text, BRIEF_CHARS)}"


def kept(
    before: Shown | None, notes: list[Item], share: int, count: Callable[[str], int]
) -> Shown | None:
    """`before` with the notes taken since added, oldest first, each in full while it fits in
    `share` beside the notes chosen, else as its line; None when it no longer holds (a note it
    chose is gone or has changed, or the notes do not fit) and the choice must be made anew."""
    if before is None:
        return None
    chosen = before.chosen
    if sum(1 for item in notes if chosen.get(item.id) == item.cost) != len(chosen):
        return None
    full = {item_id for item_id in before.full if item_id in chosen}  # as chosen
    used = before.lines_tokens + sum(chosen[item_id] for item_id in full)
    short: set[str] = set()
    for item in notes:
        if item.id in chosen:
            continue
        if used + item.cost <= share:
            full.add(item.id)
            used += item.cost
            continue
        used += count(short_line(item)) + 1
        short.add(item.id)
    if used > share:
        return None
    return Shown(chosen, frozenset(full), before.lines, before.lines_tokens, frozenset(short))


def within_share(
    notes: list[Item],
    share: int,
    count: Callable[[str], int],
    rank: Callable[[Item], tuple[int, ...]],
) -> Shown:
    """The pinned notes shown in full within `share` tokens (the highest `rank` first), and
    the lines that stand for the others: one line each while they fit, then one line of the
    ids of the rest."""
    chosen = {item.id: item.cost for item in notes}
    if sum(chosen.values()) <= share:
        return Shown(chosen, frozenset(chosen))
    ranked = sorted(notes, key=rank, reverse=True)
    room = share - MORE_TOKENS
    full: set[str] = set()
    used = 0
    for item in ranked:
        if used + item.cost > room:
            break
        full.add(item.id)
        used += item.cost
    rest = ranked[len(full) :]
    lines: list[str] = []
    for item in rest:
        line = short_line(item)
        cost = count(line) + 1
        if used + cost > room:
            break
        lines.append(line)
        used += cost
    more = sorted((item.id for item in rest[len(lines) :]), key=id_number)
    if more:
        lines.append(more_line(more, count))
    text = "\n".join(lines) + "\n"
    return Shown(chosen, frozenset(full), text, count(text) + 1)


def more_line(ids: list[str], count: Callable[[str], int]) -> str:
    """ "N more pinned notes: m12, m15, … (`recall` brings one back)", within MORE_TOKENS."""
    shown = ids[: MORE_TOKENS // 2]  # an id and its comma take two tokens or more
    while True:
        listed = ", ".join(shown) + (", …" if len(shown) < len(ids) else "")
        line = f"{len(ids)} more pinned notes: {listed} (`recall` brings one back)"
        if count(line) <= MORE_TOKENS - 2 or not shown:
            return line
        shown.pop()


def pack(
    pinned: list[Item],
    memory: list[Item],
    footer: tuple[str, str],
    max_tokens: int,
    count: Callable[[str], int],
    leave_out: Callable[[list[Item]], int],
    brief: str = "",
    short: Collection[str] = (),
) -> Context:
    """Render the two parts and count them exactly; should the joins merge into more tokens than
    `max_tokens`, leave memory items out of this render, `leave_out(items)` choosing which.

    `footer` is the cold list and the id of the memory item it follows (at the end if absent);
    `brief` the lines that stand for the pinned notes not shown in full; the notes of `short`
    are shown in the memory block as their one line."""
    pinned_text = "\n".join([item.render() for item in pinned] + ([brief] if brief else []))
    pinned_tokens = count(pinned_text) if pinned_text else 0
    items = list(memory)
    tail, after = footer
    while True:
        parts = [short_line(item) + "\n" if item.id in short else item.render() for item in items]
        if tail:
            at = next((i + 1 for i, item in enumerate(items) if item.id == after), len(items))
            parts.insert(at, tail)
        text = "\n".join(parts)
        total = pinned_tokens + (count(text) if text else 0) + (1 if pinned_text and text else 0)
        if total <= max_tokens or not items:
            return Context(pinned=pinned_text, memory=text, tokens=total, items=pinned + items)
        del items[leave_out(items)]
