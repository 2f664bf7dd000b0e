"""Words a goal shares with a remembered item: BM25 over identifiers and their parts.

An embedding connects sentences that say the same thing; a user's next request often shares
with the item it needs only a name: a function (`bump_major` beside `bump_minor`), a file, a
command's flag. Each text is cut into lower-case words, identifiers also into their parts
(`createparser`, `create_parser` and `createParser` give `create` and `parser` besides the
whole), the endings -ing, -ed and -s dropped (`bumping` and `bumps` are `bump`), and English words that
name nothing left out; items are scored with BM25 against the goal's words.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence

K1, B = 1.2, 0.75
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_ENDINGS = ("ing", "ed", "s")
STOP = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "but",
        "if",
        "then",
        "else",
        "of",
        "to",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "onto",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "how",
        "why",
        "when",
        "where",
        "can",
        "could",
        "should",
        "would",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "do",
        "does",
        "did",
        "done",
        "not",
        "no",
        "yes",
        "my",
        "our",
        "your",
        "their",
        "his",
        "her",
        "we",
        "you",
        "they",
        "i",
        "me",
        "us",
        "them",
        "so",
        "than",
        "too",
        "very",
        "just",
        "only",
        "also",
        "all",
        "any",
        "some",
        "each",
        "every",
        "one",
        "two",
        "new",
        "use",
        "used",
        "using",
        "make",
        "makes",
        "made",
        "get",
        "gets",
        "got",
        "let",
        "lets",
        "want",
        "need",
        "needs",
        "please",
        "run",
        "runs",
        "ran",
        "add",
        "adds",
        "test",
        "tests",
        "file",
        "files",
        "code",
        "again",
        "still",
        "really",
        "right",
        "way",
        "like",
        "now",
        "same",
        "other",
        "about",
        "over",
        "under",
        "out",
        "up",
        "down",
        "off",
        "after",
        "before",
    ]
)


def words(text: str) -> list[str]:
    """The words of `text` that can name something, each identifier also by its parts."""
    out: list[str] = []
    for token in _WORD.findall(text):
        out += _token_words(token)
    return out


@functools.lru_cache(maxsize=65536)  # a store says the same names over and over
def _token_words(token: str) -> tuple[str, ...]:
    parts = [p for chunk in token.split("_") for p in _CAMEL.findall(chunk)]
    out = []
    for word in sorted({token.lower(), *(p.lower() for p in parts)}):
        stem = _stem(word)
        if len(stem) >= 3 and stem not in STOP and word not in STOP:
            out.append(stem)
    return tuple(out)


def _stem(word: str) -> str:
    for ending in _ENDINGS:
        if word.endswith(ending) and len(word) - len(ending) >= 3:
            return word[: -len(ending)]
    return word


def scores(query: str, texts: Sequence[str]) -> list[float]:
    """The BM25 score of each of `texts` against `query` (0.0: no word in common)."""
    wanted = sorted(set(words(query)))  # one order of summing: equal items tie exactly
    docs = [Counter(words(t)) for t in texts]
    if not wanted or not docs:
        return [0.0] * len(texts)
    mean = sum(sum(d.values()) for d in docs) / len(docs) or 1.0
    having = {w: sum(1 for d in docs if w in d) for w in wanted}
    out = []
    for doc in docs:
        size = sum(doc.values())
        total = 0.0
        for w in wanted:
            tf = doc.get(w, 0)
            if tf:
                idf = math.log(1 + (len(docs) - having[w] + 0.5) / (having[w] + 0.5))
                total += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * size / mean))
        out.append(total)
    return out
