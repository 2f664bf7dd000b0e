"""The rule that keeps the API key out of git: not in a file, a path, nor a symlink's target."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from agent_cli.core.errors import WorkspaceError

_CHUNK = 1 << 20


def where_secret(root: Path, path: str, secrets: tuple[str, ...]) -> str | None:
    """How `path` (relative to `root`) carries a secret: "name", "link" or "content"; else None."""
    if not secrets:
        return None
    if any(s in path for s in secrets):
        return "name"
    full = root / path
    if full.is_symlink():
        try:
            target = os.readlink(full)
        except OSError:
            return None
        return "link" if any(s in target for s in secrets) else None
    if not full.is_file():
        return None
    return "content" if _holds(full, [x.encode() for x in secrets]) else None


def _holds(path: Path, needles: list[bytes]) -> bool:
    """Whether the file holds any of `needles`, read a chunk at a time (memory stays bounded
    whatever its size); a chunk keeps the end of the one before, so none is missed at a seam."""
    keep = max(len(n) for n in needles) - 1
    tail = b""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO never blocks
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return False
            while chunk := f.read(_CHUNK):
                window = tail + chunk
                if any(n in window for n in needles):
                    return True
                tail = window[-keep:] if keep > 0 else b""
    except OSError:
        return False
    return False


def refuse_secrets(root: Path, paths: list[str], secrets: tuple[str, ...]) -> None:
    """Raise WorkspaceError before a commit that would carry a secret in any of `paths`."""
    for path in paths:
        how = where_secret(root, path, secrets)
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
