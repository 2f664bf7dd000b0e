"""Git blob hashes of files in the work tree, computed without git: what a fact saw of a file."""

from __future__ import annotations

import hashlib
from pathlib import Path

MAX_BYTES = 32_000_000


def blob_hash(root: Path, path: str) -> str | None:
    """The git blob id of the regular file `path` inside `root` as it is now; None if there is none."""
    base = Path(root).resolve()
    try:
        real = (base / path).resolve()
        if not real.is_relative_to(base) or not real.is_file() or real.stat().st_size > MAX_BYTES:
            return None
        data = real.read_bytes()
    except (OSError, ValueError):
        return None
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def seen(root: Path, paths: list[str]) -> dict[str, str]:
    """{path: blob id} of those `paths` that are files inside `root` now."""
    out: dict[str, str] = {}
    for path in paths:
        digest = blob_hash(root, path)
        if digest is not None:
            out[path] = digest
    return out
