"""The bytes that decide a work tree's own git config: a fingerprint of what `git config`
would list in a repository's scopes.

`safe.overrides` lists the repository's config with a `git config` process before each harness
git call, to empty every key off its allow-list: a model's command may have written
`.git/config` since the last call. What git lists in the repository's scopes follows from
which git directory git finds from the work tree and from the bytes of the config files in it,
and from nothing else when no file includes another. So the fingerprint is those bytes and
what git's discovery checks, read before and after the listing; a listing is kept only when
the two are equal, and reused only while the fingerprint read before each call equals them:

- `.git` itself (a folder, or a file whose `gitdir:` line points elsewhere: a linked work tree),
  the git directory's `commondir` file and `HEAD`, and the mode of the common directory's
  `objects` and `refs` (git takes a folder for a git directory only when those are sound; when
  one is not, it looks in the folders above, whose config would then apply);
- the common directory's `config` and the git directory's `config.worktree`, whole.

Nothing stands for the listing (None: list again every time) when the environment names a git
directory, when `.git` or `HEAD` is a link, when a file is not a regular one or is larger than
`MAX_BYTES`, or when it cannot be read. Contents are compared, not times or sizes: a file
rewritten within one tick of the clock with the same size is still seen as changed. Included
files are not followed here: `safe.overrides` reuses no listing that holds an include.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path

MAX_BYTES = 1 << 20
# Variables that move git's discovery or its git directory away from the work tree's `.git`.
PLACING = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE", "GIT_OBJECT_DIRECTORY")

Fingerprint = tuple[str | bytes | int | None, ...]


class _Unusable(Exception):
    """Something about the files that the fingerprint cannot stand for."""


def fingerprint(cwd: Path, env: Mapping[str, str]) -> Fingerprint | None:
    """The fingerprint of the repository config git would list in `cwd` under `env`, or None."""
    if any(name in env for name in PLACING):
        return None
    try:
        return _read_all(os.path.abspath(cwd))
    except _Unusable:
        return None


def _read_all(work_tree: str) -> Fingerprint:
    dot_git = os.path.join(work_tree, ".git")
    mode = _lmode(dot_git)
    if stat.S_ISDIR(mode):
        git_dir, pointer = dot_git, None
    elif stat.S_ISREG(mode):
        pointer = _read(dot_git)
        if pointer is None or not pointer.startswith(b"gitdir:"):
            raise _Unusable
        git_dir = os.path.join(work_tree, os.fsdecode(pointer[len(b"gitdir:") :].strip()))
    else:
        raise _Unusable  # a link, or missing: git would look elsewhere
    if not stat.S_ISREG(_lmode(os.path.join(git_dir, "HEAD"))):
        raise _Unusable
    common_file = _read(os.path.join(git_dir, "commondir"), missing_ok=True)
    common = git_dir
    if common_file is not None:
        common = os.path.join(git_dir, os.fsdecode(common_file.strip()))
    return (
        work_tree,
        pointer,
        git_dir,
        _read(os.path.join(git_dir, "HEAD")),
        common_file,
        _mode(os.path.join(common, "objects")),
        _mode(os.path.join(common, "refs")),
        _read(os.path.join(common, "config"), missing_ok=True),
        _read(os.path.join(git_dir, "config.worktree"), missing_ok=True),
    )


def _lmode(path: str) -> int:
    try:
        return os.lstat(path).st_mode
    except OSError:
        raise _Unusable from None


def _mode(path: str) -> int:
    """The mode of `path`, links followed (as git's own check does); 0 when there is none."""
    try:
        return os.stat(path).st_mode
    except FileNotFoundError:
        return 0
    except OSError:
        raise _Unusable from None


def _read(path: str, missing_ok: bool = False) -> bytes | None:
    """The whole of the regular file at `path` (links followed, as git reads it); None when
    there is none and `missing_ok`. Opened without blocking: a FIFO is refused, not read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise _Unusable from None
    except OSError:
        raise _Unusable from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
            raise _Unusable
        chunks = []
        while chunk := os.read(fd, MAX_BYTES + 1):
            chunks.append(chunk)
            if sum(map(len, chunks)) > MAX_BYTES:
                raise _Unusable
        return b"".join(chunks)
    except OSError:
        raise _Unusable from None
    finally:
        os.close(fd)
