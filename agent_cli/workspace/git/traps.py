"""Files git reads on its own that would make it wait for ever: FIFOs, sockets, devices.

Git opens `.gitignore` and `.gitattributes` (in every directory it looks at), `.mailmap`,
`.gitmodules` and its own config, index and info files with a plain blocking `open`: a FIFO
in one of those places (`mkfifo .gitignore`, from a model's command) stops every git
process until it is killed. The harness looks first and refuses with the file's name:
`quick` checks the fixed places before every harness git process, `tree` walks the work
tree (within a bound) before the commands that read it.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from agent_cli.core.errors import GitError

PER_DIRECTORY = (".gitignore", ".gitattributes")
AT_ROOT = (*PER_DIRECTORY, ".mailmap", ".gitmodules")
IN_GIT_DIR = (
    "config",
    "config.worktree",
    "HEAD",
    "index",
    "packed-refs",
    "commondir",
    "shallow",
    "info/exclude",
    "info/attributes",
    "info/grafts",
    "objects/info/alternates",
)
MAX_ENTRIES = 100_000
MAX_S = 2.0
_MAX_UP = 64  # directories climbed looking for the repository's root


def quick(cwd: Path) -> None:
    """Refuse when a file git reads at the work tree's root or in its git directory is not a
    regular file; GitError naming it."""
    root = _root_of(Path(cwd))
    if root is None:
        return
    places = [root / name for name in (*AT_ROOT, ".git")]
    for git_dir in _git_dirs(root):
        places += [git_dir / name for name in IN_GIT_DIR]
    _refuse(root, [p for p in places if blocks(p)])


def tree(root: Path) -> bool:
    """Refuse when any `.gitignore` or `.gitattributes` in the work tree is not a regular file;
    False when the tree was too large to look through within the bound (nothing refused).
    Directories `info/exclude` names literally (the state directory) are left out: git does
    not look inside them."""
    deadline = time.monotonic() + MAX_S
    real_root = os.path.realpath(root)
    skipped = _excluded_dirs(Path(real_root))
    seen, traps, pending = 0, [], [real_root]
    while pending:
        directory = pending.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    seen += 1
                    if seen > MAX_ENTRIES or (seen % 1024 == 0 and time.monotonic() > deadline):
                        return False
                    name = entry.name
                    if name in PER_DIRECTORY:
                        if blocks(Path(entry.path)):
                            traps.append(Path(entry.path))
                    elif name != ".git" and _is_real_dir(entry) and entry.path not in skipped:
                        pending.append(entry.path)  # links are not followed: the path is real
        except OSError:
            continue
    _refuse(Path(real_root), traps)
    return True


def _excluded_dirs(root: Path) -> set[str]:
    """The paths under `root` (a real path) of the directories `info/exclude` names as plain
    `NAME/` lines."""
    found = set()
    for git_dir in _git_dirs(root):
        exclude = git_dir / "info" / "exclude"
        if blocks(exclude):
            continue
        try:
            with open(exclude, encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 20)
        except OSError:
            continue
        for line in text.splitlines():
            name = line.strip().strip("/")
            if line.strip().endswith("/") and name and not any(c in name for c in "*?[!#\\"):
                found.add(os.path.join(root, name))
    return found


def check(root: Path, paths: list[Path]) -> None:
    """Refuse, naming it, the first of `paths` git (or the harness) would wait on when read."""
    _refuse(Path(root), [p for p in paths if blocks(p)])


def _refuse(root: Path, traps: list[Path]) -> None:
    if not traps:
        return
    named = ", ".join(_shown(root, p) for p in traps[:5])
    raise GitError(
        f"{named} {'is not a regular file' if len(traps) == 1 else 'are not regular files'} "
        f"({_kind(traps[0])}): git reads {'it' if len(traps) == 1 else 'them'} and would "
        "wait for ever, so no git command was run",
        "remove it or make it a regular file (a command made it), then `agent run --resume`",
    )


def blocks(path: Path) -> bool:
    """Whether git opening `path` could block: it exists (links followed) and is not a
    regular file or a directory."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _kind(path: Path) -> str:
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return "gone"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _is_real_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


def _shown(root: Path, path: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _root_of(cwd: Path) -> Path | None:
    """The work tree holding `cwd` (the nearest directory with a `.git`), or None."""
    here = Path(os.path.abspath(cwd))
    for _ in range(_MAX_UP):
        if os.path.lexists(here / ".git"):
            return here
        if here.parent == here:
            return None
        here = here.parent
    return None


def _git_dirs(root: Path) -> list[Path]:
    """The git directory of the work tree at `root` and, for a linked work tree, the common one."""
    dot_git = root / ".git"
    if dot_git.is_dir():
        return [dot_git]
    if blocks(dot_git):
        return []  # named itself among the traps
    try:
        text = dot_git.read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return []
    if not text.startswith("gitdir:"):
        return []
    git_dir = Path(os.path.join(root, text[len("gitdir:") :].strip()))
    found = [git_dir]
    if blocks(git_dir / "commondir"):
        return found  # named among the traps, never read
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8", errors="replace")[:4096]
    except OSError:
        return found
    return [*found, Path(os.path.join(git_dir, common.strip()))]
