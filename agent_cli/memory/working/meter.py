"""Token counts for working memory: a cheap estimate at add time, the exact count when assembled.

Counting every item exactly with the tokenizer was most of the cost of `add()`, and most items
are evicted before any request shows them. So `add()` books an estimate, and `assemble()` counts
exactly (once per item, cached on the item) only what goes into a context.

The estimate is characters times a ratio calibrated against o200k_base: on this repository's
Python and Markdown (1,500-character chunks) the ratio is 0.26 tokens per character on average,
0.30 at the 95th percentile, 0.35 at most; logs full of numbers reach 0.42. ASCII_RATIO sits above
nearly all code, so estimates of code err high (an eviction a little early, never a context over
budget). Text with other characters is estimated from its UTF-8 bytes: a token is at least one
byte, and CJK text runs near one token per three bytes.
"""

from __future__ import annotations

from collections.abc import Callable

from agent_cli.core import tokens as toks
from agent_cli.memory.working.store import Item

ASCII_RATIO = 0.34
BYTES_RATIO = 0.5
SEPARATOR_TOKENS = 2  # the newline after the header and the blank line after the text


def estimate(text: str) -> int:
    """A cheap, slightly high estimate of `text`'s token count."""
    if text.isascii():
        return int(len(text) * ASCII_RATIO) + 1
    return int(len(text.encode("utf-8", "surrogatepass")) * BYTES_RATIO) + 1


class Meter:
    """Estimates at add time; exact counts with the offline tokenizer, loaded on first use."""

    def __init__(self) -> None:
        self._encode: Callable[[str], list[int]] | None = None

    def count(self, text: str) -> int:
        """How many tokens `text` takes: agent_cli.core.tokens.count(text), exactly.

        count() encodes with no special token allowed, which is encode_ordinary(): the same ids,
        without count()'s model lookup and checks on each call.
        """
        if self._encode is None:
            self._encode = toks.get_encoding().encode_ordinary
        return len(self._encode(text))

    def estimated(self, item: Item) -> None:
        """Book an item at its estimated size."""
        item.tokens = estimate(item.text)
        item.cost = estimate(item.header()) + item.tokens + SEPARATOR_TOKENS
        item.exact = False

    def exact(self, item: Item) -> int:
        """Count an item exactly (cached on it); returns how its cost changed."""
        if item.exact:
            return 0
        before = item.cost
        item.tokens = self.count(item.text)
        item.cost = self.count(item.header()) + item.tokens + SEPARATOR_TOKENS
        item.exact = True
        return item.cost - before

    def header_changed(self, item: Item) -> int:
        """Re-book an item whose header changed; returns how its cost changed."""
        before = item.cost
        head = self.count(item.header()) if item.exact else estimate(item.header())
        item.cost = head + item.tokens + SEPARATOR_TOKENS
        return item.cost - before
