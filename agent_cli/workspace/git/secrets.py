"""The rule that keeps the API key out of git: not in a file, a path, nor a symlink's target.

A commit is refused when it would add a configured secret to git: a new path whose name holds
one, or a file or symlink target holding one more often than the same path at the base commit
did (`before(path)`, its bytes there, None when it had no such path). What the base already
held is in git already, and a value that is also an ordinary word of the repository (a local
database's `postgres` password) would otherwise refuse every change to a file that says it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from agent_cli.core.errors import WorkspaceError

_CHUNK = 1 << 20


Before = Callable[[str], bytes | None]  # a path's bytes at the base commit (None: no such path)


def _nothing(path: str) -> bytes | None:
    return None


def where_secret(
    root: Path, path: str, secrets: tuple[str, ...], before: Before = _nothing
) -> str | None:
    """How `path` (relative to `root`) would add a secret to git: "name", "link" or
    "content"; else None."""
    if not secrets:
        return None
    if any(s in path for s in secrets) and before(path) is None:
        return "name"
    needles = [x.encode() for x in secrets]
    full = root / path
    if full.is_symlink():
        try:
            target = os.fsencode(os.readlink(full))
        except OSError:
            return None
        return "link" if _more(before, path, needles, [target.count(n) for n in needles]) else None
    if not full.is_file():
        return None
    return "content" if _more(before, path, needles, _counts(full, needles)) else None


def _more(before: Before, path: str, needles: list[bytes], counts: list[int]) -> bool:
    """Whether a needle occurs more often (`counts`) than in `path` at the base commit (read
    only when one occurs at all)."""
    if not any(counts):
        return False
    base = before(path) or b""
    return any(count > base.count(n) for n, count in zip(needles, counts, strict=True))


def _counts(path: Path, needles: list[bytes]) -> list[int]:
    """How often the file holds each of `needles`, read a chunk at a time (memory stays bounded
    whatever its size). Each needle keeps the end of the chunk before, one byte shorter than
    itself, so an occurrence across a seam is counted once, in the chunk where it ends."""
    counts = [0] * len(needles)
    tails = [b""] * len(needles)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO never blocks
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return counts
            while chunk := f.read(_CHUNK):
                for i, needle in enumerate(needles):
                    window = tails[i] + chunk
                    counts[i] += window.count(needle)
                    keep = len(needle) - 1
                    tails[i] = window[-keep:] if keep > 0 else b""
    except OSError:
        return counts
    return counts


def refuse_secrets(
    root: Path, paths: list[str], secrets: tuple[str, ...], before: Before = _nothing
) -> None:
    """Raise WorkspaceError before a commit that would add a secret in any of `paths`."""
    for path in paths:
        how = where_secret(root, path, secrets, before)
        if how is None:
            continue
        shown = path
        for s in secrets:
            shown = shown.replace(s, "[REDACTED]")
        what = {
            "name": ": its name holds",
            "link": ": its symlink target holds",
            "content": " holds",
        }[how]
        raise WorkspaceError(
            f"{shown}{what} the API key, so it was not committed",
            "remove the key from it (or delete it), then continue with `agent run --resume`",
        )
