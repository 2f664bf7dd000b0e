"""The repository's memory digest: what every plan and every task's first request carries of
its long-term memory, within a token share.

When the repository's facts, notes and procedures fit the share, all of them are sent, the
most trusted first, then the most used, then the newest: a store that small costs little,
and nothing the next goal needs can be missed by a wording the embedder does not connect.
Beyond the share, the items `associate` finds for the goal and those that share the most
names with it (lexical.py: an embedding misses `bump_major` beside `bump_minor`) come first,
taken in turn, then those recalled before, the most used first, and one line says how many more there are and how to
recall them. The run's closest
episodes come before either, within a third of the share. Each line is costed as it is
rendered (`format_for_context`), at three characters a token: the digest is built before
the first request, when the tokenizer is not loaded yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_cli.agent.learn import lexical
from agent_cli.core.protocols import LongTermStore, Recalled

SCAN = 2000  # items read to choose from: beyond this the store is searched, not listed
EPISODES = 3
LINE_OVERHEAD_CHARS = 90  # kind, id, trust, source, date and score around an item's text
ITEM_CHARS = 300  # an item's text is cut to this on its line
HEADER_TOKENS = 40


@dataclass(frozen=True)
class Digest:
    """The items to send, and how many of the repository's items were left out."""

    items: list[Recalled]
    left_out: int

    def more_line(self) -> str:
        """The line that names what was left out ("" when nothing was)."""
        if not self.left_out:
            return ""
        return (
            f"- {self.left_out} more facts, notes and procedures of this repository are not "
            "shown: the recall tool (or `agent recall QUERY`) finds them by meaning"
        )


def cost(item: Recalled) -> int:
    """The tokens `item` takes on its line of the fenced block, at three characters a token:
    its id is hexadecimal, which tokenizers cut finer than words."""
    return (min(len(item.gist or item.text), ITEM_CHARS) + LINE_OVERHEAD_CHARS) // 3 + 1


def build(
    longterm: LongTermStore,
    goal: str,
    topics: list[str],
    budget_tokens: int,
    *,
    min_score: float,
) -> Digest:
    """The digest of the repositories `topics` (its identity first; "" for items of no
    repository) for `goal`."""
    budget = max(0, budget_tokens - HEADER_TOKENS)
    episodes = _fitting(longterm.recall(goal, k=EPISODES, kind="episode", topics=topics[:1]),
                        budget // 3)  # fmt: skip
    budget -= sum(cost(e) for e in episodes)
    items = list(longterm.listing(topics, min_trust=0.5, limit=SCAN))
    if len(items) < SCAN and sum(cost(i) for i in items) <= budget:
        return Digest(episodes + items, 0)
    related = longterm.associate(
        goal,
        k=10,
        threshold=min_score,
        min_trust=0.5,
        kinds=("fact", "note", "procedure"),
        topics=topics,
        count=False,
    )
    named = lexical.scores(goal, [_words_of(r) for r in items])
    ranked = sorted(zip(named, items, strict=True), key=lambda pair: -pair[0])
    by_name = [r for score, r in ranked if score > 0]
    used = [r for r in items if r.hit_count > 0]  # never recalled: left to the count line
    most_used = sorted(used, key=lambda r: (r.hit_count, r.trust, r.date), reverse=True)
    chosen = _fitting(_unique([*_alternate(related, by_name), *most_used]), budget)
    total = max(len(items), len(_unique([*related, *items])))
    return Digest(episodes + chosen, total - len(chosen))


def _words_of(item: Recalled) -> str:
    """What an item is matched on by name: its text, and the task a procedure checked."""
    return f"{item.text} {item.metadata.get('task', '')}"


def _alternate(first: Sequence[Recalled], second: Sequence[Recalled]) -> list[Recalled]:
    """`first[0], second[0], first[1], second[1], ...`, the longer one's rest at the end."""
    out: list[Recalled] = []
    for a, b in zip(first, second, strict=False):
        out += [a, b]
    shorter = min(len(first), len(second))
    return out + list(first[shorter:]) + list(second[shorter:])


def _fitting(items: Sequence[Recalled], budget: int) -> list[Recalled]:
    """The leading `items` whose lines fit `budget` tokens, in order."""
    chosen, used = [], 0
    for item in items:
        if used + cost(item) > budget:
            break
        chosen.append(item)
        used += cost(item)
    return chosen


def _unique(items: Sequence[Recalled]) -> list[Recalled]:
    """`items` without repeats of an id, first occurrence kept."""
    seen: set[str] = set()
    out = []
    for item in items:
        if item.id not in seen:
            seen.add(item.id)
            out.append(item)
    return out
