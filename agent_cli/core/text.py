"""Text for display: cut between words and marked with "…", free of terminal control codes."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from typing import TypeVar, cast

from pydantic import BaseModel

T = TypeVar("T")
ELLIPSIS = "…"
_TRAILING = " ,;:-"
# CSI sequences; OSC sequences with their payload (a title, a hyperlink's address), ended by
# BEL or ST or not at all; other escapes; C0 and C1 controls (0x9b is CSI on an 8-bit
# terminal); the bidirectional overrides and isolates, which can show text in an order
# other than the one it has (a command that reads unlike what runs); and lone surrogates (a
# model's JSON may escape one, `"\\ud800"`), which no UTF-8 terminal or file can be written.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def shorten(text: object, width: int) -> str:
    """`text` on one line of at most `width` characters, cut between words and ended with "…".

    A single word longer than half the width (a path, a URL) is cut inside it rather than
    leaving almost nothing.
    """
    line = " ".join(str(text).split())
    if len(line) <= width:
        return line
    if width <= 1:
        return ELLIPSIS[: max(width, 0)]
    cut = line[: width - 1]
    if line[width - 1] != " ":
        space = cut.rfind(" ")
        if space >= width // 2:
            cut = cut[:space]
    return cut.rstrip(_TRAILING) + ELLIPSIS


def clean(text: object) -> str:
    """Text with terminal escape sequences and control characters removed."""
    return _CONTROL.sub("", str(text)).replace("\t", "    ")


def some(items: Sequence[str], limit: int = 5) -> str:
    """The first `limit` of `items` for a message, then how many more: `a, b and 3 more`."""
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more


def short(text: object, limit: int = 80) -> str:
    """One cleaned line of at most `limit` characters, cut between words."""
    return shorten(clean(text), limit)


def unusable(text: str) -> str:
    """Why `text`, given on a command line or in a file, cannot be sent or stored as text
    ("" when it can): a NUL character, or bytes that are not UTF-8 (lone surrogates once
    decoded, as Python gives undecodable command-line bytes)."""
    if "\x00" in text:
        return "holds a NUL character"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 text"
    return ""


def typed(text: str) -> tuple[str, str]:
    """Words a human gave (a line typed at a prompt, a hint or note on the command line) as
    they show them: the escape sequences keys send (an arrow, Home, Esc) and other control
    characters taken out (`clean`), and the characters that show nothing (`blank`: a
    zero-width space) before the first and after the last that shows, so what is saved and
    sent is what was seen (`r` then a zero-width space is `r`); and why they cannot be used
    ("" when they can): `unusable`, or nothing left but such keys or characters."""
    why = unusable(text)
    words = _shown(clean(text))
    if not why and text.strip() and not words.strip():
        why = "holds only keys that type no text (an arrow, Esc)"
    elif not why and text.strip() and blank(words):
        why = "holds only characters that show nothing (a zero-width space)"
    return words, why


def _shown(words: str) -> str:
    """`words` without the invisible characters around what shows (their whitespace kept)."""
    seen = [i for i, char in enumerate(words) if not blank(char)]
    if not seen:
        return words
    first, last = seen[0], seen[-1] + 1
    before, after = words[:first], words[last:]
    return (
        "".join(c for c in before if c.isspace())
        + words[first:last]
        + "".join(c for c in after if c.isspace())
    )


def readable(text: str) -> str:
    """`text` as UTF-8 can carry it: bytes that were not UTF-8 (a file name git or the OS gave,
    decoded to lone surrogates) shown as `\\xNN` escapes, so no request or record fails on it."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def readable_all(value: T) -> T:
    """`value` with every string it holds `readable` (`each_string`): what a record or an event
    carries of git's output (a diff, a changed file's name) written as UTF-8 whatever the
    names were."""
    return each_string(value, readable)


def each_string(value: T, change: Callable[[str], str]) -> T:
    """`value` with `change` made to every string it holds: in lists, tuples, dict keys and
    values and pydantic models' fields, at any depth (a model copied, not validated again)."""
    if isinstance(value, str):
        return cast(T, change(value))
    if isinstance(value, list):
        return cast(T, [each_string(v, change) for v in value])
    if isinstance(value, tuple):
        return cast(T, tuple(each_string(v, change) for v in value))
    if isinstance(value, dict):
        return cast(T, {each_string(k, change): each_string(v, change) for k, v in value.items()})
    if isinstance(value, BaseModel):
        fields = type(value).model_fields
        return cast(
            T, value.model_copy(update={n: each_string(getattr(value, n), change) for n in fields})
        )
    return value


# letters no font draws (Hangul fillers, the braille blank), which str.isspace() does not know
_INVISIBLE_LETTERS = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def blank(text: str) -> bool:
    """Whether `text` shows nothing: only whitespace, format characters (a zero-width space or
    joiner, a BOM, a direction mark), control characters and letters no font draws."""
    return all(
        char.isspace() or char in _INVISIBLE_LETTERS or unicodedata.category(char) in ("Cc", "Cf")
        for char in text
    )
