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
