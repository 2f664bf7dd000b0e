"""Linked work trees of the user's repository, where a run works beside the user's checkout.

A worktree run's tree is added detached at the user's HEAD, and the run then starts its own
branch in it, as in the user's checkout; nothing here touches the user's HEAD, index, work
tree or stash. Every git command goes through `handle.RepoHandle` (the safe environment).
"""

from __future__ import annotations

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

    Read from files, so that it costs no git process (the state directory is looked up
    often): a linked tree's `.git` file names its admin directory `<git dir>/worktrees/<name>`,
    and a git dir named `.git` sits in the main work tree. Any other case is `repo`'s own: a
    submodule (its `.git` file names `<git dir>/modules/<name>`), and a linked tree of a
    repository whose git dir lives elsewhere (`--separate-git-dir`), for which git itself
    cannot tell (`git worktree list` names the git dir, where no state belongs)."""
    admin = _linked_admin_dir(repo)
    if admin is None or admin.parent.parent.name != ".git":
        return repo
    return admin.parent.parent.parent


def _linked_admin_dir(repo: Path) -> Path | None:
    """The admin directory `<git dir>/worktrees/<name>` that `repo`'s `.git` file names, when
    `repo` is a linked work tree; else None."""
    dot_git = repo / ".git"
    if not dot_git.is_file():
        return None
    try:
        with dot_git.open("r", encoding="utf-8", errors="replace") as f:
            line = f.read(4096).strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    gitdir = Path(line.removeprefix("gitdir:").strip())
    gitdir = gitdir if gitdir.is_absolute() else repo / gitdir
    return gitdir if gitdir.parent.name == "worktrees" else None
