"""Where an edit's old text is, and what a change did: matches counted (with a bound), old
text whose line ends may be CRLF, a near miss that differs only in whitespace, line endings
kept and named, and a unified diff within bounds."""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Iterable, Iterator

import regex

from agent_cli.workspace import textread

_MAX_DIFF_LINES = 300
_MAX_DIFF_INPUT_CHARS = 2_000_000  # past this, a diff costs more than it tells
# Line pairs in the changed region (between the common head and tail) that difflib may
# compare: its matching grows with their product (4M pairs is about a second).
_MAX_DIFF_PAIRS = 4_000_000
MAX_MATCHES_COUNTED = 1000
_BARE_LF = regex.compile(r"(?<!\r)\n")


def positions(text: str, sub: str) -> Iterator[int]:
    """Start of every occurrence of `sub`, overlapping ones included."""
    i = text.find(sub)
    while i != -1:
        yield i
        i = text.find(sub, i + 1)


def count(text: str, sub: str) -> int:
    """Occurrences of `sub`, counted up to one past MAX_MATCHES_COUNTED."""
    return sum(1 for _ in itertools.islice(positions(text, sub), MAX_MATCHES_COUNTED + 1))


def with_line_ends(text: str, old: str) -> list[tuple[int, str]]:
    """Where and as what `old` is in `text` (at most MAX_MATCHES_COUNTED + 1 times) when each
    of its LFs may be a CRLF. Found with str.find in `text` with CRLF made LF, whose worst case
    is linear (a backtracking pattern is not, on repetitive text), then mapped back."""
    flat = text.replace("\r\n", "\n")
    starts = list(itertools.islice(positions(flat, old), MAX_MATCHES_COUNTED + 1))
    if not starts:
        return []
    breaks = [m.start() for m in re.finditer("\n", text)]  # line L starts after breaks[L - 1]
    lines = line_numbers(flat, starts)  # 1-based, counted in one pass
    ends = line_numbers(flat, [at + len(old) for at in starts])

    def original(at: int, line: int) -> int:
        column = at - (flat.rfind("\n", 0, at) + 1)
        return (breaks[line - 2] + 1 if line > 1 else 0) + column

    found = []
    for at, line, end_line in zip(starts, lines, ends, strict=True):
        begin, end = original(at, line), original(at + len(old), end_line)
        found.append((begin, text[begin:end]))
    return found


def loose_lines(text: str, old: str) -> list[int]:
    """The lines (at most 5) where `old` starts when the whitespace around and inside each of
    its lines may differ (tabs for spaces, other indentation, CRLF): where an edit that missed
    was aimed. Each line's whitespace is made one space, then str.find (linear) looks."""
    flat_old = _squeezed(old).strip("\n")
    if not flat_old.strip() or max(len(text), len(old)) > _MAX_DIFF_INPUT_CHARS:
        return []
    flat = _squeezed(text)
    found = itertools.islice(positions(flat, flat_old), 5)
    return sorted({flat.count("\n", 0, at) + 1 for at in found})


def _squeezed(text: str) -> str:
    """`text` line by line, each line's runs of whitespace one space and its ends stripped."""
    return "\n".join(" ".join(line.split()) for line in text.split("\n"))


def line_numbers(text: str, positions: Iterable[int]) -> list[int]:
    """1-based line numbers of ascending `positions`, counted in one pass."""
    numbers, line, at = [], 1, 0
    for pos in positions:
        line += text.count("\n", at, pos)
        at = pos
        numbers.append(line)
    return numbers


def diff(old: str, new: str, rel: str) -> str:
    """The unified diff, at most _MAX_DIFF_LINES lines of at most textread.MAX_LINE_CHARS characters;
    a summary instead when the files are too large or the rewrite too large to compare."""
    if max(len(old), len(new)) > _MAX_DIFF_INPUT_CHARS:
        return (
            f"{rel}: {len(old)} -> {len(new)} characters; the diff of a file this large is not "
            "shown (read a range of it to check the change)"
        )
    before, after = old.splitlines(), new.splitlines()
    head, tail = _common_ends(before, after)
    removed, added = len(before) - head - tail, len(after) - head - tail
    if removed * added > _MAX_DIFF_PAIRS:
        return (
            f"[diff omitted: {rel} lines {head + 1}-{len(before) - tail} ({removed:,} lines) "
            f"rewritten as {added:,} lines ({len(new):,} characters now), too many to compare "
            "line by line; read a range of the file to check the change]"
        )
    diff = difflib.unified_diff(before, after, f"a/{rel}", f"b/{rel}", lineterm="")
    lines = [
        textread.clip(line, textread.MAX_LINE_CHARS)
        for line in itertools.islice(diff, _MAX_DIFF_LINES)
    ]
    more = sum(1 for _ in diff)
    if more:
        lines.append(f"[... {more} more diff lines not shown]")
    return "\n".join(lines)


def crlf(text: str) -> bool:
    """Whether every line of `text` that ends, ends with CRLF (a file written on Windows)."""
    return "\r\n" in text and text.count("\n") == text.count("\r\n")


def as_crlf(text: str) -> str:
    """`text` with each line end that is a bare LF made CRLF."""
    return str(_BARE_LF.sub("\r\n", text))


def unseen_change(old: str, new: str, rel: str) -> str:
    """What changed when the lines did not (a diff compares lines, not how they end)."""
    changes = []
    if old.count("\r") != new.count("\r"):
        changes.append(f"its line endings ({_endings(old)} before, {_endings(new)} now)")
    if old.endswith(("\n", "\r")) != new.endswith(("\n", "\r")):
        changes.append(
            "the newline at its end " + ("added" if new.endswith(("\n", "\r")) else "removed")
        )
    what = " and ".join(changes) or "only how its lines end"
    return f"{rel}: the same lines; changed {what}"


def _endings(text: str) -> str:
    crlf = text.count("\r\n")
    lf, cr = text.count("\n") - crlf, text.count("\r") - crlf
    kinds = [name for name, n in (("CRLF", crlf), ("LF", lf), ("CR", cr)) if n]
    return " and ".join(kinds) or "none"


def _common_ends(before: list[str], after: list[str]) -> tuple[int, int]:
    """How many lines the two texts share at their start, and then at their end."""
    limit = min(len(before), len(after))
    head = 0
    while head < limit and before[head] == after[head]:
        head += 1
    tail = 0
    while tail < limit - head and before[-1 - tail] == after[-1 - tail]:
        tail += 1
    return head, tail
