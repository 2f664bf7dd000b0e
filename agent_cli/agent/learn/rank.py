"""The order in which a large store's items enter the digest: rankings fused, repeats dropped.

Two rankings say what a goal is about: the embedding's (cosine to the goal) and the names'
(BM25, lexical.py). Neither is reliable alone with a small offline embedder, so they are fused
by reciprocal rank (an item's score is the sum of 1 / (K + its rank) over the rankings it is
in): an item near the top of either comes early, one near the top of both comes first.

A store that grew over many runs says the same thing several times in other words ("f is
defined in a.py", "a.py holds f"): an item whose words are mostly those of one already taken
adds little, so it waits until everything else has had its turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from agent_cli.agent.learn import lexical

T = TypeVar("T")
K = 60  # the usual constant of reciprocal rank fusion: damps the gap between the top ranks
SAME_WORDS = 0.6  # Jaccard of two items' words above which the later one repeats the earlier


def fuse(rankings: Sequence[Sequence[str]]) -> dict[str, float]:
    """The reciprocal-rank-fusion score of every id in `rankings` (each best first)."""
    out: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            out[key] = out.get(key, 0.0) + 1.0 / (K + rank)
    return out


def distinct_first(items: Sequence[T], text_of: Callable[[T], str], head: int = 80) -> list[T]:
    """`items` in their order, except that one whose words repeat an earlier kept item's
    (Jaccard above `SAME_WORDS`) moves behind the first `head` distinct ones (more than a
    digest holds; past them the order is left as it is)."""
    kept: list[T] = []
    kept_words: list[frozenset[str]] = []
    repeats: list[T] = []
    for n, item in enumerate(items):
        if len(kept) >= head:
            return kept + repeats + list(items[n:])
        mine = frozenset(lexical.words(text_of(item)))
        if mine and any(_jaccard(mine, other) > SAME_WORDS for other in kept_words):
            repeats.append(item)
            continue
        kept.append(item)
        kept_words.append(mine)
    return kept + repeats


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0
