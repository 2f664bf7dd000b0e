"""How large a regular expression's counted repeats make it once compiled.

The regex engine builds the copies a counted repeat asks for when it compiles a pattern,
before any search timeout applies: `((a{1000}){1000}){1000}`, 24 characters, asks for a
billion, and compiling it takes every byte of memory there is. `expanded()` counts what the
pattern's repeats would build, nested ones multiplied, so that a search can refuse a pattern
too large to compile before compiling it. The pattern is read with Python's own regular
expression parser; one it cannot read (the regex engine knows more syntax, `\\p{L}`, say) is
judged by the product of every count it holds, which is never less.
"""

from __future__ import annotations

import importlib
import math
import re
from typing import Any

MAX_EXPANDED = 100_000  # ((a{50}){50}){40} is 100,000: compiled in well under a second

_COUNT = re.compile(r"\{(\d+)(?:,(\d*))?\}")


def expanded(pattern: str) -> int:
    """How many items the pattern's counted repeats build (at least its length in items)."""
    # Python's own pattern reader (re._parser, in the standard library since 3.11): it gives
    # the structure and builds nothing
    parser: Any = importlib.import_module("re._parser")
    try:
        return _size(list(parser.parse(pattern)), importlib.import_module("re._constants"))
    except (re.error, RecursionError, OverflowError, ValueError):
        return _product(pattern)


def _size(items: list[tuple[Any, Any]], c: Any) -> int:
    """The items a parsed pattern builds: each repeat's body times its count, nested ones
    multiplied (an unbounded repeat builds its least count)."""
    total = 0
    for op, av in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, getattr(c, "POSSESSIVE_REPEAT", None)):
            low, high, inner = av
            times = low if high == c.MAXREPEAT else high
            total += max(times, 1) * _size(list(inner), c)
        elif op in (c.SUBPATTERN,):
            total += _size(list(av[-1]), c)
        elif op == c.BRANCH:
            total += sum(_size(list(branch), c) for branch in av[1])
        elif op in (c.ASSERT, c.ASSERT_NOT):
            total += _size(list(av[1]), c)
        elif op == getattr(c, "ATOMIC_GROUP", None):
            total += _size(list(av), c)
        else:
            total += 1
    return total


def _product(pattern: str) -> int:
    """Every count in the pattern multiplied (the largest a nesting of them could be)."""
    counts = [int(high or low) for low, high in _COUNT.findall(pattern)]
    return max(len(pattern), math.prod(max(c, 1) for c in counts)) if counts else len(pattern)
