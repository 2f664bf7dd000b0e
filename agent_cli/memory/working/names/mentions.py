"""Mention counts: how often each name defined so far has been mentioned, and which names a text
mentions.

A mention is a whole word: a maximal run of ASCII letters, digits and underscores equal to a
name, so a name glued after digits is not mentioned (`456ms` does not mention `ms`). An ASCII
text is cut into words by mapping every other byte to a space and splitting the bytes (about
half the time of a regex; bytes.translate with a table is a third of the time of
str.translate), and its words are looked up as bytes, among the names' UTF-8 forms: no word
becomes a str, which was a fifth of what finding the mentions cost. Any other text is cut by a
regex. A name with other characters (Python allows them) is never a run of ASCII word
characters, so it is never mentioned, in either kind of text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_WORD_CHARS = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
_TO_SPACES = bytes(code if code in _WORD_CHARS else 32 for code in range(256))
_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")


class Mentions:
    """`counts`: name -> mentions since it was first defined; `define()` adds a name at 0."""

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        self.counts: dict[str, int] = dict(counts or {})
        self._ascii = {name.encode("ascii"): name for name in self.counts if name.isascii()}

    def define(self, name: str) -> None:
        """Count mentions of `name` from now on (a name already known keeps its count)."""
        if name not in self.counts:
            self.counts[name] = 0
            if name.isascii():
                self._ascii[name.encode("ascii")] = name

    def found_in(self, text: str) -> set[str]:
        """The known names `text` has as whole words (each once)."""
        if text.isascii():
            words = text.encode("ascii").translate(_TO_SPACES).split()
            ascii_names = self._ascii
            return {ascii_names[word] for word in ascii_names.keys() & words}
        return self.counts.keys() & _WORD_RUN.findall(text)  # looks each word up; copies no key
