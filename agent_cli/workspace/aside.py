"""Paths moved out of the work tree for the length of a block, then put back as they were.

A check is run again without the files the commit cannot hold (`agent/judge/hidden.py`):
each path is renamed into one hidden folder inside the work tree (a rename on the same file
system: nothing is copied, and pytest's default `norecursedirs` skips a dot folder), and
renamed back when the block ends, however it ends. Whatever the block made where a path was
(the check writing into a folder that was moved) is removed first, so that the path comes
back whole.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = ".agent-aside-"


@contextmanager
def set_aside(root: Path, paths: list[str]) -> Iterator[None]:
    """Move each of `paths` (relative to `root`) away while the block runs."""
    holder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    moved: list[tuple[Path, Path]] = []
    try:
        for n, path in enumerate(paths):
            source = root / path.rstrip("/")
            kept = holder / str(n)
            os.rename(source, kept)
            moved.append((source, kept))
        yield
    finally:
        for source, kept in reversed(moved):
            if source.is_dir() and not source.is_symlink():
                shutil.rmtree(source)  # made by the block while the path was away
            elif os.path.lexists(source):
                source.unlink()
            source.parent.mkdir(parents=True, exist_ok=True)
            os.rename(kept, source)
        holder.rmdir()
