"""Glob patterns matched against the file system within a bound: entries looked at, and time.

The command policy asks which paths a shell word may name; a word such as `'/*/*/*/*/x'`
would make `glob.glob` walk the whole file system. Here the walk stops at `max_entries`
directory entries or `max_s` seconds and says so (`GlobTooLarge`), and the caller refuses
what it could not check.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import time

MAX_ENTRIES = 50_000
MAX_S = 2.0


class GlobTooLarge(Exception):
    """A pattern whose matching went past its bound; `why` says which."""

    def __init__(self, pattern: str, why: str) -> None:
        super().__init__(f"{pattern[:80]!r}: {why}")
        self.pattern = pattern
        self.why = why


def bounded_glob(pattern: str, max_entries: int = MAX_ENTRIES, max_s: float = MAX_S) -> list[str]:
    """The paths `pattern` matches (as `glob.glob` without `recursive`), or GlobTooLarge once
    more than `max_entries` directory entries were looked at or `max_s` seconds went by."""
    deadline = time.monotonic() + max_s
    absolute = pattern.startswith("/")
    parts = [p for p in pattern.split("/") if p]
    current = ["/" if absolute else ""]
    seen = 0
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if not glob.has_magic(part):
            current = [os.path.join(d, part) for d in current]
            continue
        found: list[str] = []
        for directory in current:
            try:
                with os.scandir(directory or ".") as entries:
                    for entry in entries:
                        seen += 1
                        if seen > max_entries:
                            raise GlobTooLarge(
                                pattern, f"it names more than {max_entries:,} directory entries"
                            )
                        if time.monotonic() > deadline:
                            raise GlobTooLarge(pattern, f"matching it took over {max_s:g} s")
                        if _matches(entry.name, part) and (last or _is_dir(entry)):
                            found.append(os.path.join(directory, entry.name))
            except OSError:
                continue  # missing, not a directory, or unreadable: matches nothing there
        current = found
    return [p for p in current if os.path.lexists(p)]


def _matches(name: str, part: str) -> bool:
    """Whether a directory entry matches one component, hidden names only by a leading dot."""
    if name.startswith(".") and not part.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, part)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
