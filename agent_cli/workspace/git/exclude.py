"""The state directory kept out of git: the lines of `info/exclude` that match it where a
work tree holds it, each added once.

Without running git (`exclude_state_dir`), so that the memory commands and a batch exclude it
before anything is written into it; `GitRepo.exclude_state` writes the same lines.
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_cli.core.atomic import write_atomic
from agent_cli.core.errors import GitError
from agent_cli.workspace.git import traps


def exclude_state_dir(root: str | Path, state_dir: str | Path) -> bool:
    """`GitRepo.exclude_state` without running git (for the memory commands); True when added."""
    root = Path(os.path.realpath(root))
    patterns = state_patterns(root, state_dir)
    if not patterns:
        return False
    dot_git = root / ".git"
    git_dir = dot_git
    traps.check(root, [dot_git])
    if dot_git.is_file():  # a linked worktree or a submodule: "gitdir: PATH"
        text = dot_git.read_text(encoding="utf-8").strip()
        git_dir = (root / text.removeprefix("gitdir:").strip()).resolve()
    common = git_dir / "commondir"
    traps.check(root, [common])
    if common.is_file():
        git_dir = (git_dir / common.read_text(encoding="utf-8").strip()).resolve()
    path = git_dir / "info" / "exclude"
    traps.check(root, [path])
    added = [add_line(path, pattern) for pattern in patterns]
    return any(added)


def state_patterns(root: Path, state_dir: str | Path) -> list[str]:
    """The lines of `info/exclude` that keep the state directory `state_dir` out of git in the
    work tree at `root` (a real path): its real directory when that lies inside (`.agent/`),
    and its own entry when that is a symbolic link of the user's in the work tree (`/.agent`,
    anchored: git sees a link as a file, which a pattern ending in `/` never matches)."""
    named = os.path.abspath(state_dir)
    patterns = []
    real = Path(os.path.realpath(named))
    if real != root and root in real.parents:
        patterns.append(real.relative_to(root).as_posix() + "/")
    entry = Path(os.path.realpath(os.path.dirname(named))) / os.path.basename(named)
    if root in entry.parents and entry.is_symlink():
        patterns.append("/" + entry.relative_to(root).as_posix())
    return patterns


def add_line(path: Path, pattern: str) -> bool:
    """Append `pattern` to the exclude file at `path` unless it is there; True when added.

    Bytes, as git reads the file: a pattern of the user's may name a file in another encoding.
    A symlink (an exclude file the user shares between repositories) is written through, the
    link kept; one whose target is missing is refused rather than made a file of ours."""
    line = pattern.encode("utf-8", "surrogateescape")
    if path.is_symlink():
        if not path.exists():
            raise GitError(
                f"cannot add {pattern} to {path}: it is a symlink to "
                f"{os.readlink(path)}, which does not exist",
                f"create that file, or add the line {pattern} to it yourself",
            )
        path = path.resolve()
    try:
        data = path.read_bytes() if path.exists() else b""
        if line in (held.strip() for held in data.splitlines()):
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(
            path, data + (b"\n" if data and not data.endswith(b"\n") else b"") + line + b"\n"
        )
    except OSError as e:
        raise GitError(
            f"cannot add {pattern} to {path}: {e.strerror or e}",
            f"make {path} a file you can write, or add the line {pattern} to it yourself",
        ) from None
    return True
