"""The user's own uncommitted files, kept as they were through every command a run executes.

With `--allow-dirty` the paths holding the user's changes (`RepoWorkspace.protected`) are
never staged, committed or reverted by the harness, and the file tools refuse to write them;
a command is another matter (`cp x README.md`, a formatter run over the tree). So their bytes
are read before each command and compared after it: whatever the command changed is put back
as it was (a file it deleted is written again, one the user had deleted and it made again is
removed), and the command's output says so, for the model to read. A file too large to keep
in memory is only watched (size and modification time), and a change to it is said, not undone.

What is kept is written to disk too (a `vault`, in the work tree's git directory: each file's
bytes once, by their SHA-256, and the list of what was kept) for as long as the command runs,
so that a run killed in the middle (SIGKILL, a power cut) loses none of it: the next run in
that work tree finds the list (`recover`), and copies each file the command left changed, as
it was before the command, into `recovered-<time>/` there, for the user to take back. It puts
nothing back itself: the user may have edited the file since.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from agent_cli.core.atomic import write_atomic
from agent_cli.workspace import aside

MAX_FILE_BYTES = 16 * 1024 * 1024  # kept in memory up to this; larger files are only watched
MAX_FILES = 2000  # under the user's untracked directories
LISTED = "kept.json"  # in the vault while a command runs: {path: sha256 of its bytes, or null}
BLOBS = "blobs"


@dataclass
class Kept:
    """The protected paths as they were: bytes (None: absent), or the (size, mtime) of a file
    too large to keep."""

    root: Path
    content: dict[Path, bytes | None] = field(default_factory=dict)
    watched: dict[Path, tuple[int, int]] = field(default_factory=dict)
    vault: Path | None = None  # where the bytes are on disk while the command runs

    def name(self, path: Path) -> str:
        """`path` as the user knows it: relative to the repository."""
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)


def keep(root: Path, paths: Iterable[str], vault: Path | None = None) -> Kept:
    """What the user's changed `paths` (relative to `root`; a directory: its files) hold now,
    written into `vault` too when one is given (until `release`)."""
    kept = Kept(root, vault=vault)
    for rel in paths:
        path = root / rel
        files = _files_under(path) if path.is_dir() and not path.is_symlink() else [path]
        for file in files:
            _keep_one(file, kept)
    if vault is not None and kept.content:
        try:
            (vault / BLOBS).mkdir(parents=True, exist_ok=True)
            listed: dict[str, str | None] = {}
            for path, data in kept.content.items():
                listed[kept.name(path)] = None if data is None else _blob(vault, data)
            write_atomic(vault / LISTED, json.dumps(listed))
        except OSError:  # a git directory that cannot be written: kept in memory only
            kept.vault = None
    return kept


def release(kept: Kept) -> None:
    """The command is over and `put_back` has run: the list of what was kept goes."""
    if kept.vault is not None:
        (kept.vault / LISTED).unlink(missing_ok=True)


def _blob(vault: Path, data: bytes) -> str:
    """Write `data` into the vault once, by its SHA-256; the digest."""
    digest = hashlib.sha256(data).hexdigest()
    path = vault / BLOBS / digest
    if not path.exists():
        write_atomic(path, data)
    return digest


def recover(root: Path, vault: Path) -> tuple[Path | None, list[str]]:
    """After a run killed while a command ran: copy each kept file that differs now from what
    was kept into `vault/recovered-<time>/`; that folder (None when nothing was copied) and
    one line per path the command may have left changed. The vault's list and blobs are
    removed either way; earlier recoveries stay."""
    said: list[str] = []
    copied = False
    into = vault / time.strftime("recovered-%Y%m%d-%H%M%S")
    for rel, digest in _listed(root, vault).items():
        now = _read(root / rel)
        if digest is None:  # the user had deleted it
            if now is not None:
                said.append(f"{rel} (you had deleted it; it is there again)")
            continue
        was = _read(vault / BLOBS / digest)
        if was is None or now == was:
            continue  # its bytes were never all written, or the command left it as it was
        target = into / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(was)
        except OSError as e:  # the list and blobs stay, for the next run to try again
            said.append(f"{rel} (its earlier bytes could not be copied: {e.strerror or e})")
            return (into if copied else None), said
        copied = True
        said.append(rel)
    (vault / LISTED).unlink(missing_ok=True)
    shutil.rmtree(vault / BLOBS, ignore_errors=True)
    return (into if copied else None), said


def forget(vault: Path) -> None:
    """At the run's end: the blobs go (the list is gone: no command is running)."""
    if not (vault / LISTED).exists():
        shutil.rmtree(vault / BLOBS, ignore_errors=True)


def _listed(root: Path, vault: Path) -> dict[str, str | None]:
    """The vault's list of kept paths: relative paths inside the work tree `root` (as
    `aside.inside` has them), with a digest."""
    try:
        data = json.loads((vault / LISTED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {
        rel: digest
        for rel, digest in data.items()
        if aside.inside(root, rel)
        and (digest is None or (isinstance(digest, str) and digest.isalnum()))
    }


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
