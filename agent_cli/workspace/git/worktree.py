"""Linked work trees of the user's repository, where a run works beside the user's checkout.

A worktree run's tree is added detached at the user's HEAD, and the run then starts its own
branch in it, as in the user's checkout; nothing here touches the user's HEAD, index, work
tree or stash. Every git command goes through `handle.RepoHandle` (the safe environment).
"""

from __future__ import annotations

import os
from pathlib import Path

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.handle import RepoHandle

_STATUS = ["status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=all"]


class Worktrees:
    """The linked work trees of the repository whose main work tree is `root`."""

    def __init__(self, root: Path, secrets: tuple[str, ...] = ()) -> None:
        self.root = root
        self.secrets = secrets
        self._handle = RepoHandle(root, secrets)

    def add(self, path: Path, commit: str) -> Path:
        """A new work tree at `path`, detached at `commit`; its path."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self._git("worktree", "add", "-q", "--detach", "--", str(path), commit)
        return path

    def restore(self, path: Path, branch: str) -> Path:
        """The work tree at `path` again, on the existing `branch` (after it was removed)."""
        code, _, _ = self._handle.run(["rev-parse", "--verify", "-q", f"refs/heads/{branch}"])
        if code != 0:  # before anything is changed: git's own refusal names no cause
            raise GitError(
                f"the run's branch {branch} no longer exists (deleted or renamed), so its "
                f"worktree {path} cannot be made again; nothing was changed",
                f"give the branch its name back (git branch -m NAME {branch}), or start a new "
                "run with `agent run GOAL`",
            )
        if not path.exists():  # git forgets the tree whose directory is gone (this one only)
            self._handle.run(["worktree", "remove", "--force", "--", str(path)])
        path.parent.mkdir(parents=True, exist_ok=True)
        self._git(
            "worktree",
            "add",
            "-q",
            "--",
            str(path),
            branch,
            hint=f"check where {branch} is checked out with git worktree list",
        )
        return path

    def relink(self, path: Path, was: Path) -> None:
        """Tell git that the work tree it knows at `was` is now at `path` (a folder moved with
        the repository it is in, which git cannot follow: each side names the other by an
        absolute path); when none is at `path`, forget the one at `was` if it is gone too (not
        locked), so that its branch can be checked out again."""
        if path.is_dir():
            self._handle.run(["worktree", "repair", "--", str(path)])
        elif not was.exists():
            self._handle.run(["worktree", "remove", "--force", "--", str(was)])

    def listed(self, path: Path) -> bool:
        """Whether git knows a work tree at `path` whose directory exists."""
        out = self._git("worktree", "list", "--porcelain", "-z")
        known = {f[len("worktree ") :] for f in out.split("\0") if f.startswith("worktree ")}
        return path.is_dir() and str(path) in known

    def is_clean(self, path: Path) -> bool:
        """Whether the work tree at `path` has no uncommitted change (untracked files count)."""
        handle = RepoHandle(path, self.secrets)
        try:
            code, out, _ = handle.run(_STATUS)
        finally:
            handle.close()
        return code == 0 and not out.strip("\0")

    def remove(self, path: Path, force: bool = False) -> None:
        """Remove the clean work tree at `path` (its branch stays); `force`: changes and all."""
        self._git(
            "worktree",
            "remove",
            *(["--force"] if force else []),
            "--",
            str(path),
            hint="commit or discard its changes",
        )

    def close(self) -> None:
        """Release what GitPython holds."""
        self._handle.close()

    def _git(self, *args: str, hint: str = "check the repository with git worktree list") -> str:
        code, out, err = self._handle.run(list(args))
        if code != 0:
            detail = " ".join(err.split()) or f"exit code {code}"
            raise GitError(f"git {args[0]} {args[1]} failed: {detail}", hint)
        return out


def main_work_tree(repo: Path) -> Path:
    """The main work tree of the repository `repo` is a work tree of: `repo` itself, or the
    user's checkout when `repo` is one of its linked work trees (`git worktree add`, a
    worktree run's tree).

    Read from files, as git reads them, so that it costs no git process (the state directory
    is looked up often). A linked tree's `.git` file names its admin directory, whose
    `commondir` file names the repository's git directory; the main work tree of that is
    where its `core.worktree` says (a submodule's checkout), or the folder holding it when it
    is named `.git`. When git names none (a bare repository, or one made with
    `--separate-git-dir`), a linked tree inside another work tree of the same repository (a
    worktree run's, in that checkout's state directory) is that checkout's. Any other tree
    is its own: a submodule's checkout, and a user's linked tree of such a repository."""
    common = _common_dir(repo)
    if common is None:
        return repo
    named = _named_main(common)
    if named is not None and _of(named, common):
        return named
    return _holding(repo, common) or repo


def is_linked_tree(folder: Path, root: Path) -> bool:
    """Whether the folder `folder` is a linked work tree of the repository whose main work tree
    is `root`, as git checks one before it removes it: its `.git` file names an admin directory
    of that repository, which names this folder back. A folder emptied by hand, its files
    replaced, or holding a repository of its own or a copy of another tree is not, though git
    may still list it (as prunable): git run inside it works on some other repository."""
    gitdir, common = _gitdir(folder), _repository_dir(root)
    if gitdir is None or common is None:
        return False
    linked, back = _read_line(gitdir / "commondir"), _read_line(gitdir / "gitdir")
    return (
        bool(linked and back)
        and os.path.realpath(gitdir / linked) == str(common)
        and os.path.realpath(gitdir / back) == os.path.realpath(folder / ".git")
    )


def moved_with(folder: Path, root: Path) -> bool:
    """Whether `folder` is a linked work tree of the repository at `root` that moved with it
    (the checkout was renamed): its `.git` file names an admin directory `worktrees/NAME`
    where the repository was, which is gone, and the repository has one of that name now.
    Git's links are stale until a resume, rewind or clean tells git; it is no stray."""
    gitdir, common = _gitdir(folder), _repository_dir(root)
    if gitdir is None or common is None or gitdir.exists() or gitdir.parent.name != "worktrees":
        return False
    return (common / "worktrees" / gitdir.name).is_dir()


def _repository_dir(tree: Path) -> Path | None:
    """The git directory of the repository whose work tree `tree` is (its common one)."""
    dot_git = tree / ".git"
    if dot_git.is_dir():
        return Path(os.path.realpath(dot_git))
    return _common_dir(tree) or _gitdir(tree)


def _holding(tree: Path, common: Path) -> Path | None:
    """The work tree of the repository `common` that `tree` lies in (the first folder above it
    with a `.git`, as git looks), when that is a checkout: one of its linked trees, or its main
    tree when the repository is not bare; else None."""
    for above in Path(os.path.abspath(tree)).parents:
        if not os.path.lexists(above / ".git"):
            continue
        if _common_dir(above) == common:
            return above
        bare = _core(common / "config", "bare").lower() in ("true", "yes", "on", "1")
        return above if not bare and _of(above, common) else None
    return None


def _common_dir(repo: Path) -> Path | None:
    """The repository's own git directory (its `commondir`) when `repo` is a linked work tree;
    else None."""
    gitdir = _gitdir(repo)
    if gitdir is None:
        return None
    common = _read_line(gitdir / "commondir")
    if not common:
        return None  # a submodule's checkout, or a separate git dir's: a main work tree
    return Path(os.path.realpath(gitdir / common))


def _gitdir(tree: Path) -> Path | None:
    """The git directory that `tree`'s `.git` file names (None when it is no such file)."""
    dot_git = tree / ".git"
    if not dot_git.is_file():
        return None
    line = _read_line(dot_git)
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line.removeprefix("gitdir:").strip())
    return Path(os.path.realpath(gitdir if gitdir.is_absolute() else tree / gitdir))


def _named_main(common: Path) -> Path | None:
    """The main work tree the git directory `common` names: its `core.worktree`, else the
    folder holding it when it is named `.git`; None when it names none."""
    value = _core(common / "config", "worktree")
    if value:
        return Path(os.path.realpath(common / value))
    return common.parent if common.name == ".git" else None


def _of(tree: Path, common: Path) -> bool:
    """Whether `tree` is a work tree of the repository whose git directory is `common`."""
    dot_git = tree / ".git"
    if dot_git.is_dir():
        return os.path.realpath(dot_git) == str(common)
    gitdir = _gitdir(tree)
    if gitdir is None:
        return False
    if str(gitdir) == str(common):
        return True  # a submodule's checkout, a separate git dir's main tree
    linked = _read_line(gitdir / "commondir")
    return bool(linked) and os.path.realpath(gitdir / linked) == str(common)


def _core(config: Path, key: str) -> str:
    """`core.<key>` in the git config file `config` ("" when unset or unreadable); the last
    one set wins, as in git. Includes are not followed."""
    value, in_core = "", False
    for raw in _read_text(config).splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line[1 : line.find("]")] if "]" in line else ""
            in_core = section.strip().lower() == "core"
            continue
        name, eq, rest = line.partition("=")
        if in_core and eq and name.strip().lower() == key:
            value = _config_value(rest)
    return value


def _config_value(raw: str) -> str:
    """A git config value as git reads it: quotes removed, escapes undone, a comment cut."""
    out, quoted, i = [], False, 0
    raw = raw.strip()
    while i < len(raw):
        c = raw[i]
        if c == "\\" and i + 1 < len(raw):
            out.append({"n": "\n", "t": "\t", "b": "\b"}.get(raw[i + 1], raw[i + 1]))
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif c in "#;" and not quoted:
            break
        else:
            out.append(c)
        i += 1
    return "".join(out).strip() if not quoted else ""


def _read_line(path: Path) -> str:
    """The first line of the small file at `path` ("" when there is none)."""
    text = _read_text(path, 4096)
    return text.splitlines()[0].strip() if text.strip() else ""


def _read_text(path: Path, limit: int = 1 << 20) -> str:
    try:
        with path.open("r", encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return ""
