"""Paths moved out of the work tree for the length of a block, then put back as they were.

A check is run again without the files the commit cannot hold (`agent/judge/hidden.py`):
each path is renamed into one hidden folder inside the work tree (a rename on the same file
system: nothing is copied, and pytest's default `norecursedirs` skips a dot folder), and
renamed back when the block ends, however it ends. Whatever the block made where a path was
(the check writing into a folder that was moved) is removed first, so that the path comes
back whole. The folder holds a list of where each path came from, written before anything is
moved: a process killed inside the block leaves them there, and the next run's preflight
puts them back (`put_back_leftovers`), before anything could commit them.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

PREFIX = ".agent-aside-"
LIST = "paths.json"  # the paths set aside, in order: path n is kept as `n`


@contextmanager
def set_aside(root: Path, paths: list[str]) -> Iterator[None]:
    """Move each of `paths` (relative to `root`) away while the block runs."""
    holder = Path(tempfile.mkdtemp(prefix=PREFIX, dir=root))
    moved: list[tuple[Path, Path]] = []
    (holder / LIST).write_text(json.dumps(paths))
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
        (holder / LIST).unlink()
        holder.rmdir()


def put_back_leftovers(root: Path) -> list[str]:
    """Put back what a killed process left set aside under `root`, each path where it came
    from unless that path exists again; the paths put back. A folder without a readable
    list, or a listed path that is not a plain path inside `root`, is left alone."""
    restored: list[str] = []
    for holder in sorted(root.glob(PREFIX + "*")):
        try:
            paths = json.loads((holder / LIST).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(paths, list):
            continue
        for n, path in enumerate(paths):
            if not inside(root, path):
                continue
            kept, source = holder / str(n), root / path.rstrip("/")
            if os.path.lexists(kept) and not os.path.lexists(source):
                source.parent.mkdir(parents=True, exist_ok=True)
                os.rename(kept, source)
                restored.append(path)
        if not [p for p in holder.iterdir() if p.name != LIST]:
            shutil.rmtree(holder)
    return restored


def inside(root: Path, path: object) -> bool:
    """Whether `path` is a relative path that stays inside `root` (no `..`, no link out)."""
    if not isinstance(path, str) or not path.strip("/") or os.path.isabs(path):
        return False
    parts = Path(path).parts
    if ".." in parts or ".git" in parts:
        return False
    parent = (root / path.rstrip("/")).parent.resolve()
    return parent == root.resolve() or root.resolve() in parent.parents
