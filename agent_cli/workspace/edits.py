"""Where an edit's old text is, and what a change did: matches counted (with a bound), old
text matched as read_file shows it (no line end's CRs, a last line that has no newline alike),
a near miss that differs only in whitespace, the file's own line ends kept on what the model
writes and named when only they change, and a unified diff within bounds, its lines numbered
as read_file numbers them."""

from __future__ import annotations

import collections
import difflib
import itertools
import re
import sys
from collections.abc import Iterable, Iterator

import regex

from agent_cli.workspace import textread

_MAX_DIFF_LINES = 300
_MAX_DIFF_INPUT_CHARS = 2_000_000  # past this, a diff costs more than it tells
# Line pairs in the changed region (between the common head and tail) that difflib may
# compare: its matching grows with their product (4M pairs is about a second).
_MAX_DIFF_PAIRS = 4_000_000
MAX_MATCHES_COUNTED = 1000
_BARE_LF = regex.compile(r"(?<!\r)\n")  # a line end the model wrote: it stands for the file's
_LINE_END = re.compile(r"\r*\n")  # a line's end: read_file shows the LF, never the CRs before it
_HIDDEN_CRS = re.compile(r"\r+(?=\n)|\r+\Z")  # the CRs that end a line, which read_file hides


def positions(text: str, sub: str) -> Iterator[int]:
    """Start of every occurrence of `sub`, overlapping ones included."""
    i = text.find(sub)
    while i != -1:
        yield i
        i = text.find(sub, i + 1)


def count(text: str, sub: str) -> int:
    """Occurrences of `sub`, counted up to one past MAX_MATCHES_COUNTED."""
    return sum(1 for _ in itertools.islice(positions(text, sub), MAX_MATCHES_COUNTED + 1))


def shown(text: str) -> str:
    """`text` as read_file shows it: without the CRs that end its lines (CRLF, CR CR LF, a last
    line's CR), the CRs inside a line left as they are."""
    for _ in range(4):  # each pass takes one CR off each run of them before an LF
        if "\r\n" not in text:
            return text.rstrip("\r")
        text = text.replace("\r\n", "\n")
    return _HIDDEN_CRS.sub("", text)  # longer runs (rare): a pattern, slower than replace


def with_line_ends(text: str, old: str) -> list[tuple[int, int]]:
    """Where (start, end) `old`, text without CRs, is in `text` as read_file shows it (at most
    MAX_MATCHES_COUNTED + 1 times): each LF of `old` may be a line end with CRs before it, and
    an LF that ends `old` the end of a last line that has no newline, as read_file shows such a
    line like any other. Found with str.find in the text as shown, whose worst case is linear
    (a backtracking pattern is not, on repetitive text), then mapped back."""
    flat = shown(text)
    if old.endswith("\n") and not text.endswith("\n"):
        flat += "\n"
    starts = list(itertools.islice(positions(flat, old), MAX_MATCHES_COUNTED + 1))
    if not starts:
        return []
    # line L starts after breaks[L - 1]
    breaks = [-1] + [m.start() for m in re.finditer("\n", text)]
    lines = line_numbers(flat, starts)  # 1-based, counted in one pass
    ends = line_numbers(flat, [at + len(old) for at in starts])

    def original(at: int, line: int) -> int:
        if line > len(breaks):  # after the newline a last line has only as shown
            return len(text)
        return breaks[line - 1] + 1 + at - (flat.rfind("\n", 0, at) + 1)

    return [
        (original(at, line), original(at + len(old), end_line))
        for at, line, end_line in zip(starts, lines, ends, strict=True)
    ]


def ends_within(text: str, start: int, end: int, old: str) -> list[str]:
    """The line end in `text` that each line end of `old`, found at start..end, stands for:
    its CRs and LF, or what follows a last line that has no newline (its CRs, or nothing)."""
    kinds = _end_counts(text, start, end)
    if len(kinds) == 1:  # one kind (most files): a list of one string, made at once
        found = list(kinds.elements())
    else:
        found = [sys.intern(m.group()) for m in _LINE_END.finditer(text, start, end)]
    if old.endswith("\n") and end == len(text) and not text.endswith("\n"):
        found.append(text[len(text.rstrip("\r")) :])
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


def fit(new: str, old: str, ends: list[str], text: str) -> str:
    """`new`, which replaces `old` in `text`, with each line end the model wrote as an LF alone
    made one of the file's: `ends` are the line ends in `text` that old's line ends stood for
    (ends_within). A line of `new` that is a line of `old` kept (as a diff of the two pairs
    them), or that changed one in place, keeps that line's end; any other line ends as most of
    old's lines do, else as most of the file's. So no line end changes but those of the lines
    added."""
    if ends and not ends[-1].endswith("\n"):  # old's last LF stood for a last line's end
        # that has no LF (nothing, or CRs): an end only the last line can have, so it goes
        # where new's last LF is, if new has one there
        last = new.endswith("\n") and not new.endswith("\r\n")
        body = fit(new[:-1] if last else new, old[:-1], ends[:-1], text)
        return body + ends[-1] if last else body
    pieces = _BARE_LF.split(new) if "\r\n" in new else new.split("\n")
    added, had = len(pieces) - 1, len(ends)
    if not added:
        return new
    chosen: list[str | None] = [None] * added
    kinds = collections.Counter(ends)
    if len(kinds) > 1:  # else every line ends as old's lines do (most files: one kind)
        was = _LINE_END.split(old) if "\r\n" in old else old.split("\n")
        for at, to, lines in _aligned(was, pieces):  # a line's end is the one after it
            lines = min(lines, had - at, added - to)
            if lines > 0:
                chosen[to : to + lines] = ends[at : at + lines]
    style = ""
    if None in chosen:
        style = _commonest(kinds) or _style_of(text)
    done = [style if end is None else end for end in chosen]
    if len(set(done)) == 1:  # one kind of line end (most files): joined at once
        return done[0].join(pieces)
    return "".join(itertools.chain.from_iterable(zip(pieces, [*done, ""], strict=True)))


def fit_whole(content: str, text: str) -> str:
    """`content` written over all of `text`, its line ends fitted as `fit` fits an edit's
    (whether its last line ends is the content's to say)."""
    old = shown(text) + ("\n" if text.endswith("\r") else "")  # a last line's CR ends it too
    return fit(content, old, ends_within(text, 0, len(text), old), text)


def _aligned(before: list[str], after: list[str]) -> Iterator[tuple[int, int, int]]:
    """Runs of lines of `after` that stand where lines of `before` stood: (where in before,
    where in after, how many): the lines kept, and lines changed in place as many for as many.
    The lines between the common head and tail are matched by difflib when their pairs are few
    enough; else they stand in place only when there are as many on both sides."""
    head, tail = _common_ends(before, after)
    yield 0, 0, head
    mid_before, mid_after = before[head : len(before) - tail], after[head : len(after) - tail]
    if len(mid_before) * len(mid_after) <= _MAX_DIFF_PAIRS:
        matcher = difflib.SequenceMatcher(None, mid_before, mid_after)
        for _, i1, i2, j1, j2 in matcher.get_opcodes():
            if i2 - i1 == j2 - j1:  # kept, or changed in place
                yield head + i1, head + j1, i2 - i1
    elif len(mid_before) == len(mid_after):
        yield head, head, len(mid_before)
    yield len(before) - tail, len(after) - tail, tail


def _style_of(text: str) -> str:
    """The line end most of `text`'s lines have; CR for a file whose lines end in CR alone
    (an old Mac file); LF when there are none, or no one kind is the most."""
    if "\n" not in text:
        return "\r" if "\r" in text else "\n"
    return _commonest(_end_counts(text, 0, len(text))) or "\n"


def _end_counts(text: str, start: int, end: int) -> collections.Counter[str]:
    """How many of the line ends in text[start:end] are of each kind (LF, CRLF, CR CR LF...)."""
    if text.count("\r\r\r\n", start, end):  # rare: each end looked at
        return collections.Counter(m.group() for m in _LINE_END.finditer(text, start, end))
    lf, crlf, crcrlf = (text.count(e, start, end) for e in ("\n", "\r\n", "\r\r\n"))
    kinds = collections.Counter({"\n": lf - crlf, "\r\n": crlf - crcrlf, "\r\r\n": crcrlf})
    return +kinds  # the kinds there are


def _commonest(counts: collections.Counter[str]) -> str | None:
    """The key counted most; None when there is none, or two share the most."""
    top = counts.most_common(2)
    if not top or len(top) == 2 and top[0][1] == top[1][1]:
        return None
    return top[0][0]


def diff(old: str, new: str, rel: str) -> str:
    """The unified diff, at most _MAX_DIFF_LINES lines of at most textread.MAX_LINE_CHARS characters;
    a summary instead when the files are too large or the rewrite too large to compare."""
    if max(len(old), len(new)) > _MAX_DIFF_INPUT_CHARS:
        return (
            f"{rel}: {len(old)} -> {len(new)} characters; the diff of a file this large is not "
            "shown (read a range of it to check the change)"
        )
    before, after = _lines(old), _lines(new)
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


def _lines(text: str) -> list[str]:
    """The lines of `text` as read_file numbers and shows them: split at LF only (a form feed
    or a CR inside a line ends no line), without the CRs that end them."""
    lines = shown(text).split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


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
