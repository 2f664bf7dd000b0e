"""JSON from the model, parsed strictly: no NaN or Infinity, bounded nesting and integer size.

The standard parser accepts `Infinity` and `NaN` and lone surrogate escapes (`"\\udcff"`,
which no UTF-8 text can hold), recurses once per nesting level, and raises plain ValueError
on a 5,000-digit integer; here each of those is a ValueError that says what is wrong, so a
caller treats it as a malformed reply.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64
MAX_INT_DIGITS = 40
_STRUCTURE = re.compile(r'[\[\]{}"]')
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def loads(text: str | bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Parse `text`; ValueError (with the reason) for invalid JSON or values no tool can use."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if text.count("[") + text.count("{") > max_depth:  # else it cannot nest deeper: no scan
        depth = nesting(text)
        if depth > max_depth:
            raise ValueError(f"the JSON nests {depth} levels deep (at most {max_depth})")
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_int=_int, parse_float=_float)
    except json.JSONDecodeError as e:
        msg = e.msg.removesuffix(" at")  # "Unterminated string starting at": the char follows
        raise ValueError(f"not valid JSON ({msg} at char {e.pos})") from None
    except RecursionError:
        raise ValueError("the JSON nests too deeply") from None
    if _SURROGATE.search(text):  # a pair makes one character; a lone half is no text at all
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(
                "a string holds a lone surrogate (\\udXXX), which is no text"
            ) from None
    return value


def nesting(text: str) -> int:
    """The deepest nesting of arrays and objects in `text`, strings skipped (one linear scan)."""
    return _scan(text)[1]


def unfinished(text: str | bytes) -> bool:
    """Whether `text` breaks off inside JSON: it opens an array or object (or a string) that it
    never closes, as a body cut short does."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    depth, _, in_string = _scan(text)
    return in_string or depth > 0


def _scan(text: str) -> tuple[int, int, bool]:
    """The nesting of arrays and objects open at the end of `text`, the deepest it reached, and
    whether the text ends inside a string; strings skipped, in one linear scan."""
    depth = deepest = 0
    in_string = False
    for m in _STRUCTURE.finditer(text):
        ch, at = m.group(), m.start()
        if ch == '"':
            if not in_string or not _escaped(text, at):
                in_string = not in_string
        elif not in_string:
            depth += 1 if ch in "[{" else -1
            deepest = max(deepest, depth)
    return depth, deepest, in_string


def _escaped(text: str, at: int) -> bool:
    """Whether the quote at `at` follows an odd number of backslashes."""
    run = 0
    while at - run - 1 >= 0 and text[at - run - 1] == "\\":
        run += 1
    return run % 2 == 1


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows; send a finite number")


def _int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(digits.lstrip('-'))} digits is too large")
    return int(digits)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is out of range; send a finite number")
    return value
