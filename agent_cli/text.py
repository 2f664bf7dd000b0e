"""Text cut for display and for commit subjects: at a word boundary, marked with "…"."""

from __future__ import annotations

ELLIPSIS = "…"
_TRAILING = " ,;:-"


def shorten(text: object, width: int) -> str:
    """`text` on one line of at most `width` characters, cut between words and ended with "…".

    A single word longer than half the width (a path, a URL) is cut inside it rather than
    leaving almost nothing.
    """
    line = " ".join(str(text).split())
    if len(line) <= width:
        return line
    if width <= 1:
        return ELLIPSIS[:max(width, 0)]
    cut = line[: width - 1]
    if line[width - 1] != " ":
        space = cut.rfind(" ")
        if space >= width // 2:
            cut = cut[:space]
    return cut.rstrip(_TRAILING) + ELLIPSIS
