"""Whether a hook's matcher can match a tool name at all.

A tool's name, as the model calls it and a hook is given it, holds only letters, digits, `_`
and `-` (an MCP tool's `git.push` is `mcp__git__git_push`). A matcher that needs any other
character (`mcp__git__git\\.push`, `mcp__fs__read/file`) matches no tool, and a guard hook
written with it would never run, unseen. The answer is conservative: a part of the
expression this cannot judge (a class such as `\\w`, a lookaround) counts as able to match.
"""

from __future__ import annotations

import importlib
import re
import string
from typing import Any

NAME_CHARS = frozenset(string.ascii_letters + string.digits + "_-")
_CODES = frozenset(map(ord, NAME_CHARS))


def needs_other(matcher: str) -> str | None:
    """A character the matcher needs that no tool name holds (the first found), or None when
    it can match some tool name, or cannot be judged."""
    try:
        # the parser `re` compiles with: the expression's own structure, not a guess at it
        parsed = importlib.import_module("re._parser").parse(matcher)
        return _sequence(list(parsed.data))
    except Exception:  # another Python's parser: judged able to match
        return None


def _sequence(items: list[Any]) -> str | None:
    """What keeps a run of items from matching a name: the first item that cannot."""
    for op, arg in items:
        why = _item(str(op), arg)
        if why is not None:
            return why
    return None


def _item(op: str, arg: Any) -> str | None:
    if op == "LITERAL":
        return None if _in_names(arg) else chr(arg)
    if op == "IN":
        return _set(arg)
    if op == "BRANCH":
        whys = [_sequence(list(branch.data)) for branch in arg[1]]
        return None if None in whys else whys[0]
    if op == "SUBPATTERN":
        return _sequence(list(arg[3].data))
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        return None if arg[0] == 0 else _sequence(list(arg[2].data))
    if op == "ATOMIC_GROUP":
        return _sequence(list(arg.data))
    return None  # any character, an anchor, a lookaround, a back-reference: not judged


def _set(items: list[Any]) -> str | None:
    """A class of characters (`[./]`) none of which a name holds: its first; else None."""
    first: str | None = None
    for op, arg in items:
        kind = str(op)
        if kind == "LITERAL":
            if _in_names(arg):
                return None
            first = first or chr(arg)
        elif kind == "RANGE" and arg[1] < 128:
            if any(arg[0] <= code <= arg[1] for code in _CODES):
                return None
            first = first or chr(arg[0])
        else:  # a negated class, `\w` inside, a range past ASCII: not judged
            return None
    return first


def _in_names(code: int) -> bool:
    """Whether the character may match one a name holds: one of them, or one that `(?i)`
    folds onto one (the Kelvin sign onto `k`)."""
    if code in _CODES:
        return True
    char = re.escape(chr(code))
    return code >= 128 and any(re.fullmatch(char, c, re.IGNORECASE) for c in NAME_CHARS)
