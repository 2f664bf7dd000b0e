"""The agent's own branches and worktrees: where each is checked out, merged or not, moved back.

Only branches under `agent/` are ever moved or deleted here, each with the tip it was seen
at (`update-ref NEW OLD`), so a commit made meanwhile makes the change fail instead of
being lost. Every git process goes through `handle.RepoHandle` (the safe environment).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.handle import RepoHandle

AGENT_PREFIX = "agent/"


@dataclass(frozen=True)
class Worktree:
    """One work tree of the repository as `git worktree list` shows it."""

    path: Path
    head: str
    branch: str | None  # short name; None when detached
    main: bool  # the repository's main work tree (the user's checkout)
    locked: bool = False  # `git worktree lock`: git itself never prunes it


class AgentBranches:
    """The `agent/*` branches and the work trees of one repository."""

    def __init__(self, root: Path, secrets: tuple[str, ...] = ()) -> None:
        self.root = root
        self.secrets = secrets
        self._handle = RepoHandle(root, secrets)

    def close(self) -> None:
        """Release what GitPython holds."""
        self._handle.close()

    def worktrees(self) -> list[Worktree]:
        """Every work tree, the main one first."""
        out = self._run("worktree", "list", "--porcelain", "-z")
        trees: list[Worktree] = []
        for block in out.split("\0\0"):
            fields = dict(
                (line.split(" ", 1) + [""])[:2] for line in block.split("\0") if line.strip()
            )
            if "worktree" not in fields:
                continue
            branch = fields.get("branch", "").removeprefix("refs/heads/") or None
            trees.append(
                Worktree(
                    path=Path(os.path.realpath(fields["worktree"])),
                    head=fields.get("HEAD", ""),
                    branch=branch,
                    main=not trees,
                    locked="locked" in fields,
                )
            )
        return trees

    def checked_out(self, branch: str) -> Worktree | None:
        """The work tree that has `branch` checked out, or None."""
        return next((t for t in self.worktrees() if t.branch == branch), None)

    def tip(self, branch: str) -> str | None:
        """The commit local `branch` points at; None when there is no such branch."""
        code, out, _ = self._handle.run(
            ["rev-parse", "--verify", "-q", f"refs/heads/{branch}^{{commit}}"]
        )
        return out.strip() if code == 0 else None

    def agent_branches(self) -> dict[str, str]:
        """Every local `agent/*` branch and its tip."""
        out = self._run(
            "for-each-ref", "--format=%(refname:short) %(objectname)", "refs/heads/agent/"
        )
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)

    def is_ancestor(self, commit: str, of: str) -> bool:
        """Whether `commit` is reachable from `of` (a commit or a branch)."""
        return self._handle.run(["merge-base", "--is-ancestor", commit, of])[0] == 0

    def foreign_commits(
        self, branch: str, since: str, trailer: str, own: Collection[str]
    ) -> list[tuple[str, str]]:
        """The commits on `branch` after `since` that are not the run's (one of `own` whose
        message has the line `trailer`; a commit amended by hand keeps the line, not the sha)
        and that no other branch, tag or remote has: (sha, subject) of each, newest first.
        Moving `branch` back to `since` would leave them reachable from nothing but the reflog."""
        out = self._run("log", "--format=%H%x1f%s%x1f%B%x1e", f"{since}..refs/heads/{branch}", "--")
        found = []
        for entry in out.split("\x1e"):
            fields = entry.strip("\n").split("\x1f")
            if len(fields) == 3 and (fields[0] not in own or trailer not in fields[2].splitlines()):
                holders = self._run(
                    "for-each-ref",
                    "--format=%(refname)",
                    "--contains",
                    fields[0],
                    "refs/heads/",
                    "refs/tags/",
                    "refs/remotes/",
                )
                if set(holders.split()) <= {f"refs/heads/{branch}"}:
                    found.append((fields[0], fields[1]))
        return found

    def on_a_ref(self, commit: str) -> bool:
        """Whether a branch, tag or remote has `commit` (a work tree's detached HEAD that none
        has holds commits only that tree's HEAD keeps)."""
        held = self._run(
            "for-each-ref",
            "--count=1",
            "--format=%(refname)",
            "--contains",
            commit,
            "refs/heads/",
            "refs/tags/",
            "refs/remotes/",
        )
        return bool(held.strip())

    def resolve(self, rev: str) -> str | None:
        """The commit `rev` names, or None."""
        code, out, _ = self._handle.run(["rev-parse", "--verify", "-q", f"{rev}^{{commit}}"])
        return out.strip() if code == 0 else None

    def clean(self, tree: Path) -> bool:
        """Whether work tree `tree` has no change git sees (untracked files count)."""
        code, out, _ = RepoHandle(tree, self.secrets).run(
            ["status", "--porcelain", "--untracked-files=all", "--ignore-submodules=all"]
        )
        return code == 0 and not out.strip()

    def move(self, branch: str, to: str, seen: str) -> None:
        """Point the agent's `branch`, not checked out anywhere, at `to` (if it is still at `seen`)."""
        _only_agent(branch)
        self._run(
            "update-ref", "-m", f"agent rewind: back to {to}", f"refs/heads/{branch}", to, seen
        )

    def reset_worktree(self, tree: Path, branch: str, to: str, seen: str) -> None:
        """Move the agent's `branch`, checked out in its own clean work tree `tree`, to `to`."""
        _only_agent(branch)
        handle = RepoHandle(tree, self.secrets)
        try:
            here = handle.current_branch()
            head = handle.head()
            if here != branch or head != seen:
                raise GitError(
                    f"{tree} is not on {branch} at {seen[:12]} any more; nothing was moved",
                    "look at it with git -C <worktree> status and run again",
                )
            code, _, err = handle.run(["reset", "-q", "--hard", to])
        finally:
            handle.close()
        if code != 0:
            raise GitError(
                f"git reset failed in {tree}: {' '.join(err.split()) or code}",
                f"look at it with git -C {shlex.quote(str(tree))} status",
            )

    def delete(self, branch: str, seen: str) -> None:
        """Delete the agent's `branch` if it is still at `seen`."""
        _only_agent(branch)
        self._run("update-ref", "-d", f"refs/heads/{branch}", seen)

    def remove_worktree(self, tree: Path, force: bool = False) -> None:
        """Remove work tree `tree`; `force` also drops its uncommitted changes."""
        self._run("worktree", "remove", *(["--force"] if force else []), "--", str(tree))

    def forget_missing(self, within: Path) -> None:
        """Forget the work trees directly under `within` whose directories are gone.

        Not `git worktree prune`: that forgets every missing work tree of the repository,
        the user's own too (one on a drive not mounted now loses its index)."""
        for tree in self.worktrees():
            if tree.main or tree.locked or tree.path.parent != within:
                continue  # a locked tree may be on a drive not mounted now: git keeps it too
            if not tree.path.exists():
                self._run("worktree", "remove", "--force", "--", str(tree.path))

    def _run(self, *args: str) -> str:
        code, out, err = self._handle.run(list(args))
        if code != 0:
            raise GitError(
                f"git {args[0]} failed: {' '.join(err.split()) or f'exit code {code}'}",
                "check the repository with git status",
            )
        return out


def _only_agent(branch: str) -> None:
    """Refuse to change a branch the agent did not create."""
    if not branch.startswith(AGENT_PREFIX) or branch == AGENT_PREFIX:
        raise GitError(
            f"{branch} is not a branch the agent created; the agent changes only agent/* branches",
            "move your own branches with git itself",
        )


def linked_worktrees(root: Path, secrets: tuple[str, ...] = ()) -> dict[str, Path]:
    """Each branch checked out in a linked work tree of `root`'s repository, and that tree (one
    whose folder was deleted by hand is none: git lists it until it is pruned)."""
    branches = AgentBranches(root, secrets)
    try:
        return {
            t.branch: t.path
            for t in branches.worktrees()
            if t.branch and not t.main and t.path.is_dir()
        }
    finally:
        branches.close()
