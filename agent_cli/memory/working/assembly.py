"""What assemble() renders: the pinned notes, the memory block and the list of what is cold."""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field

from agent_cli.memory.working.store import Item, Store

FOOTER_TOKENS = 64  # reserved for the "available with recall" line
FOOTER_ENTRIES = 8


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


def footer(store: Store, restored: Collection[str], count: Callable[[str], int]) -> str:
    """A line of the most recently evicted cold items, within FOOTER_TOKENS."""
    cold = store.count() - len(restored)
    if cold <= 0:
        return ""
    recent = store.recent(FOOTER_ENTRIES + len(restored))
    entries = [f"{e['id']} {e['summary'][:40]}" for e in recent if e["id"] not in restored][
        :FOOTER_ENTRIES
    ]
    while True:
        more = cold - len(entries)
        line = "available with recall: " + "; ".join(entries)
        line += f"{'; ' if entries else ''}{more} more" if more else ""
        if count(line) <= FOOTER_TOKENS - 2 or not entries:
            return line
        entries.pop()


def pack(
    pinned: list[Item],
    memory: list[Item],
    footer: tuple[str, str],
    max_tokens: int,
    count: Callable[[str], int],
    leave_out: Callable[[list[Item]], int],
) -> Context:
    """Render the two parts and count them exactly; should the joins merge into more tokens than
    `max_tokens`, leave memory items out of this render, `leave_out(items)` choosing which.

    `footer` is the cold list and the id of the memory item it follows (at the end if absent)."""
    pinned_text = "\n".join(item.render() for item in pinned)
    pinned_tokens = count(pinned_text) if pinned_text else 0
    items = list(memory)
    tail, after = footer
    while True:
        parts = [item.render() for item in items]
        if tail:
            at = next((i + 1 for i, item in enumerate(items) if item.id == after), len(items))
            parts.insert(at, tail)
        text = "\n".join(parts)
        total = pinned_tokens + (count(text) if text else 0) + (1 if pinned_text and text else 0)
        if total <= max_tokens or not items:
            return Context(pinned=pinned_text, memory=text, tokens=total, items=pinned + items)
        del items[leave_out(items)]
