"""The user's own uncommitted files, kept as they were through every command a run executes.

With `--allow-dirty` the paths holding the user's changes (`RepoWorkspace.protected`) are
never staged, committed or reverted by the harness, and the file tools refuse to write them;
a command is another matter (`cp x README.md`, a formatter run over the tree). So their bytes
are read before each command and compared after it: whatever the command changed is put back
as it was (a file it deleted is written again, one the user had deleted and it made again is
removed), and the command's output says so, for the model to read. A file too large to keep
in memory is only watched (size and modification time), and a change to it is said, not undone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_BYTES = 16 * 1024 * 1024  # kept in memory up to this; larger files are only watched
MAX_FILES = 2000  # under the user's untracked directories


@dataclass
class Kept:
    """The protected paths as they were: bytes (None: absent), or the (size, mtime) of a file
    too large to keep."""

    root: Path
    content: dict[Path, bytes | None] = field(default_factory=dict)
    watched: dict[Path, tuple[int, int]] = field(default_factory=dict)

    def name(self, path: Path) -> str:
        """`path` as the user knows it: relative to the repository."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def keep(root: Path, paths: Iterable[str]) -> Kept:
    """What the user's changed `paths` (relative to `root`; a directory: its files) hold now."""
    kept = Kept(root)
    for rel in paths:
        path = root / rel
        files = _files_under(path) if path.is_dir() and not path.is_symlink() else [path]
        for file in files:
            _keep_one(file, kept)
    return kept


def put_back(kept: Kept) -> list[str]:
    """Undo what a command changed in `kept`; one line per path it changed."""
    said = []
    for path, was in kept.content.items():
        now = _read(path)
        if now == was:
            continue
        try:
            if was is None:
                path.unlink()
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                if path.is_symlink() or path.is_dir():
                    said.append(f"{kept.name(path)} (changed, and could not be put back)")
                    continue
                path.write_bytes(was)
        except OSError as e:
            why = e.strerror or e
            said.append(f"{kept.name(path)} (changed, and could not be put back: {why})")
            continue
        said.append(kept.name(path))
    for path, stamp in kept.watched.items():
        if _stamp(path) != stamp:
            said.append(f"{kept.name(path)} (changed; too large to have been kept, not put back)")
    return said


def _keep_one(path: Path, kept: Kept) -> None:
    try:
        size = path.lstat().st_size if path.exists() else 0
    except OSError:
        return
    if size > MAX_FILE_BYTES:
        stamp = _stamp(path)
        if stamp is not None:
            kept.watched[path] = stamp
        return
    kept.content[path] = _read(path)


def _read(path: Path) -> bytes | None:
    if path.is_symlink() or not path.is_file():
        return None
    try:
        return path.read_bytes()
    except OSError:
        return None


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _files_under(root: Path) -> list[Path]:
    found: list[Path] = []
    for where, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        found += [Path(where) / name for name in files]
        if len(found) >= MAX_FILES:
            break
    return found[:MAX_FILES]
