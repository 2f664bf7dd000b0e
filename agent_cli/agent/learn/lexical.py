"""Words a goal shares with a remembered item: BM25 over identifiers and their parts.

An embedding connects sentences that say the same thing; a user's next request often shares
with the item it needs only a name: a function (`bump_major` beside `bump_minor`), a file, a
command's flag. Each text is cut into lower-case words, identifiers also into their parts
(`createparser`, `create_parser` and `createParser` give `create` and `parser` besides the
whole), the endings -ing, -ed and -s dropped (`bumping` and `bumps` are `bump`, `formatting`
is `format`), and English words that
name nothing left out; items are scored with BM25 against the goal's words.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence

K1, B = 1.2, 0.75
PART = 4  # the shortest word matched inside another
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
            stem = word[: -len(ending)]
            if ending != "s" and len(stem) >= 4 and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                return stem[:-1]  # formatting, formatted: format (but calling: call)
            return stem
    return word


def scores(query: str, texts: Sequence[str]) -> list[float]:
    """The BM25 score of each of `texts` against `query` (0.0: no word in common). A word of
    the text that holds a query word at its start or end (`naturalsize` for `size`), or that
    begins one (`lang` for `language`), counts as half an occurrence of it."""
    wanted = sorted(set(words(query)))  # one order of summing: equal items tie exactly
    docs = [_occurrences(Counter(words(t)), wanted) for t in texts]
    if not wanted or not docs:
        return [0.0] * len(texts)
    mean = sum(size for _, size in docs) / len(docs) or 1.0
    having = {w: sum(1 for d, _ in docs if w in d) for w in wanted}
    out = []
    for doc, size in docs:
        total = 0.0
        for w in wanted:
            tf = doc.get(w, 0.0)
            if tf:
                idf = math.log(1 + (len(docs) - having[w] + 0.5) / (having[w] + 0.5))
                total += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * size / mean))
        out.append(total)
    return out


def _occurrences(doc: Counter[str], wanted: Sequence[str]) -> tuple[dict[str, float], int]:
    """How often each of `wanted` occurs in `doc` (a part of a word at half), and its size."""
    found: dict[str, float] = {}
    for word, n in doc.items():
        for w in wanted:
            if word == w:
                found[w] = found.get(w, 0.0) + n
            elif _part_of(w, word):
                found[w] = found.get(w, 0.0) + n / 2
    return found, sum(doc.values())


@functools.lru_cache(maxsize=65536)
def _part_of(wanted: str, word: str) -> bool:
    """Whether `word` holds `wanted` at an end (a compound) or begins it (an abbreviation)."""
    if len(wanted) >= PART and len(word) > len(wanted):
        return word.startswith(wanted) or word.endswith(wanted)
    return len(word) >= PART and len(wanted) > len(word) and wanted.startswith(word)
