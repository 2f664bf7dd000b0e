"""The repository through git: preflight checks, the agent's branch, commits of exactly its files.

What a run checks before its first model request (finding the repository, the preflight,
the file list) runs as `git` commands (safe.run_git): GitPython's import would delay that
request. Everything after goes through GitPython (handle.RepoHandle). Failures become
GitError with a how-to-fix hint.
"""

from __future__ import annotations

import os
import re
import shlex
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agent_cli.core.errors import GitError
from agent_cli.core.text import readable, some, unusable
from agent_cli.workspace.git import traps
from agent_cli.workspace.git.exclude import add_line, state_patterns
from agent_cli.workspace.git.handle import (
    LogEntry,
    RepoHandle,
    check_object_format,
    check_ref_names,
)
from agent_cli.workspace.git.identity import RepoIdentity, repo_identity
from agent_cli.workspace.git.safe import run_git, unrun_filters
from agent_cli.workspace.git.secrets import where_secret

_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
RUN_BRANCHES = "agent/"  # each run's branch is agent/<run-id>
_NOT_A_REPO_HINT = "run inside a git repository or pass --repo DIR"
_IDENTITY_HINT = (
    'set it: git config user.email "you@example.com" && git config user.name "Your Name"'
)
# Marker in the git directory, what it means, and how the user gets out of it.
_OPERATIONS = [
    ("MERGE_HEAD", "a merge", "git commit to finish it, or git merge --abort"),
    ("rebase-merge", "a rebase", "git rebase --continue, or git rebase --abort"),
    (
        "rebase-apply",
        "a rebase (or git am)",
        "git rebase --continue, or git rebase --abort / git am --abort",
    ),
    ("CHERRY_PICK_HEAD", "a cherry-pick", "git cherry-pick --continue, or git cherry-pick --abort"),
    ("REVERT_HEAD", "a revert", "git revert --continue, or git revert --abort"),
    ("BISECT_LOG", "a bisect", "git bisect reset"),
]
_STATUS = (
    "status",
    "--porcelain=v1",
    "-z",
    "--untracked-files=all",
    "--ignore-submodules=all",
)
# Commands that read the work tree, and with it every .gitignore and .gitattributes.
_READS_TREE = {"status", "add", "diff", "ls-files", "check-ignore", "stash", "checkout", "grep"}
_IN_HEAD = " MTD"  # the first letter of `git status` for a path HEAD holds
_CACHE_FOLDERS = {"__pycache__", ".pytest_cache"}  # what running code writes there (cache_file)
_TEMP_INDEX = "agent-index-"  # + pid-uuid: whose it is, so a dead run's one can be removed
_CONFLICT_CODES = {"DD", "AU", "UD", "UA", "DU", "AA", "UU"}
_LOCK_HINT = (
    "if no other git command is running, delete .git/index.lock, then continue with "
    "`agent run --resume`"
)


def _discover(path: Path, secrets: tuple[str, ...]) -> tuple[Path, Path, Path, str]:
    """(work tree root, git directory, common git directory, object format) of the
    repository holding `path`."""
    if not path.exists():
        raise GitError(f"{path} does not exist", _NOT_A_REPO_HINT)
    cwd = path if path.is_dir() else path.parent
    try:
        code, out, err = run_git(
            [
                "rev-parse",
                "--is-bare-repository",
                "--absolute-git-dir",
                "--git-common-dir",
                "--show-toplevel",
                "--show-object-format",  # last: a git too old to know it echoes it
            ],
            cwd,
            secrets,
        )
    except OSError:
        raise GitError("git is not installed or not on PATH", "install git and run again") from None
    lines = out.decode("utf-8", "surrogateescape").splitlines()
    if len(lines) < 3:
        _refused(path, code, err)
        raise GitError(f"{path} is not inside a git repository", _NOT_A_REPO_HINT)
    if lines[0] == "true":
        raise GitError(f"{path} is a bare repository with no work tree", _NOT_A_REPO_HINT)
    if code != 0 or len(lines) < 4:
        raise GitError(f"{path} is inside a git directory, not a work tree", _NOT_A_REPO_HINT)
    return (
        Path(os.path.realpath(lines[3])),
        Path(lines[1]),
        Path(os.path.realpath(cwd / lines[2])),
        lines[4] if len(lines) > 4 and not lines[4].startswith("-") else "sha1",
    )


def _refused(path: Path, code: int, err: str) -> None:
    """GitError with git's own reason when git refused the repository holding `path` for
    something other than there being none (dubious ownership, an unknown repository format),
    and with the fix git names."""
    said = [line.strip() for line in err.splitlines() if line.strip()]
    fatal = next((line[len("fatal:") :].strip() for line in said if line.startswith("fatal:")), "")
    if code == 0 or not fatal or fatal.startswith("not a git repository"):
        return
    fix = next((line for line in said if line.startswith("git config ")), "")
    if "dubious ownership" in fatal:
        raise GitError(
            f"git refuses this repository: {fatal} (it is owned by another user)",
            f"if you trust it, tell git so: {fix or 'git config --global --add safe.directory DIR'}"
            ", and run again",
        )
    raise GitError(
        f"git refuses the repository holding {path}: {fatal}",
        fix or "check the repository with git status",
    )


class GitRepo:
    """One git work tree: checked with git commands, then used through GitPython."""

    def __init__(self, path: str | Path, secrets: tuple[str, ...] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)
        self.run_branch: str | None = None  # commits go only to this branch once it is set
        self.root, self.git_dir, self._common_dir, self._format = _discover(
            Path(path), self.secrets
        )
        self._handle = RepoHandle(self.root, self.secrets)
        self._tree_checked = True  # False once the tree was too large to look through
        self._sparse_args: list[str] | None = None  # `git add`'s, known once asked (_sparse)

    def close(self) -> None:
        """Release what GitPython holds (nothing when it was never used)."""
        self._handle.close()

    @property
    def common_dir(self) -> Path:
        """The git directory all work trees share (the main one's `.git`)."""
        return self._common_dir

    def preflight(self, allow_dirty: bool, resuming: str | None = None) -> set[str]:
        """Refuse states the agent must not work in; return the paths holding the user's
        changes. `resuming`: the branch of the run to resume (see check_state), refused first
        when it is gone: without it no change in the work tree can be told to be the run's."""
        self.remove_stale_indexes()
        if resuming is not None and not self.branch_exists(resuming):
            raise GitError(
                f"the run's branch {resuming} no longer exists (deleted or renamed); nothing "
                "was changed",
                f"give the branch its name back (git branch -m NAME {resuming}), or start a new "
                "run with `agent run GOAL`",
            )
        self.check_state(resuming)
        self._check_run_branches()
        check_identity(self.root, self.secrets)
        self._check_filters()
        entries = parse_status(self._probe_out(*_STATUS))
        conflicts = sorted(path for code, path, _ in entries if code in _CONFLICT_CODES)
        if conflicts:
            raise GitError(
                f"the work tree has unresolved conflicts ({some(conflicts)})",
                "resolve them and commit, then run again",
            )
        dirty = {p for _, path, orig in entries for p in (path, orig) if p}
        if dirty and not allow_dirty:
            raise GitError(
                f"the work tree has uncommitted changes ({some(sorted(dirty))})",
                "commit or stash them first, or pass --allow-dirty to let the agent work around them",
            )
        return dirty

    def changed_now(self) -> set[str]:
        """The paths `git status` shows changed in the work tree (both names of a rename),
        asked without GitPython: a check before the first model request."""
        entries = parse_status(self._probe_out(*_STATUS))
        return {p for _, path, orig in entries for p in (path, orig) if p}

    def _check_filters(self) -> None:
        """Refuse a filter the repository's attributes use that harness git never runs (only
        `.git/config` defines it, see safe.py): the run's commits would store those files
        unfiltered, and `git status` would call some of them changed."""
        unrun = unrun_filters(self.root, self._common_dir, self.secrets)
        if not unrun:
            return
        names = "|".join(re.sub(r"([][.^$*+?(){}|\\])", r"\\\1", name) for name in unrun)
        keys = shlex.quote(f"^filter\\.({names})\\.")
        raise GitError(
            f"the repository's attributes send files through the filter {' and '.join(unrun)}, "
            "which only its own config (.git/config) defines; the agent's git runs no filter "
            "from there, so its commits would store those files unfiltered",
            f"define it in your own config: copy what `git config --get-regexp {keys}` shows "
            "into ~/.gitconfig with git config --global (for git-lfs: git lfs install), "
            "then run again",
        )

    def check_state(self, resuming: str | None = None) -> None:
        """Refuse a state no run works in whatever its flags: an operation in progress, no
        commit yet, a detached HEAD, objects or refs GitPython cannot read (SHA-256, a packed
        ref named in bytes that are not UTF-8), a path or a checked-out branch whose name is
        not UTF-8 text (the run's record names them; `agent doctor` asks this too). For a
        run to resume, a detached HEAD is named with its work tree (a worktree run's, which
        the user may not be in) and the run's branch `resuming` to switch back to: the resume
        does not switch itself, as the detached HEAD may hold commits of the user's."""
        try:
            str(self.root).encode("utf-8")
        except UnicodeEncodeError:
            raise GitError(
                f"the repository's path {str(self.root)!r} is not valid UTF-8 text",
                "rename the folder, or work in a clone at a path in UTF-8",
            ) from None
        check_object_format(self._format)  # before a branch, a log or a commit would fail
        check_ref_names(self._common_dir)  # the same, for a ref named in bytes not UTF-8
        for marker, what, way_out in _OPERATIONS:
            if (self.git_dir / marker).exists():
                raise GitError(
                    f"{what} is in progress in this repository", f"finish it first: {way_out}"
                )
        if self._probe("rev-parse", "--verify", "-q", "HEAD^{commit}")[0] != 0:
            raise GitError(
                "the repository has no commits yet",
                "make a first commit (git commit --allow-empty -m 'initial commit') and run again",
            )
        code, ref, _ = self._probe("symbolic-ref", "-q", "HEAD")
        detached = code != 0
        if detached and resuming:
            raise GitError(
                f"HEAD of {self.root} is detached (not on a branch)",
                f"switch it back to the run's branch "
                f"(git -C {shlex.quote(str(self.root))} switch {resuming}) "
                "and resume",
            )
        if detached:
            raise GitError(
                "HEAD is detached (not on a branch)",
                "check out a branch (git switch <branch>) and run again",
            )
        name = ref.strip().removeprefix("refs/heads/")
        if unusable(name):  # the run records it, GitPython reads it as UTF-8 (shown: errors.py)
            raise GitError(
                f"the name of the checked-out branch {name} is not UTF-8 text",
                "rename it (git branch -m NEW-NAME) and run again",
            )

    def remove_stale_indexes(self) -> list[str]:
        """Delete the temporary indexes (and their locks) of agent processes no longer alive."""
        removed = []
        for path in self.git_dir.glob(f"{_TEMP_INDEX}*"):
            pid = path.name[len(_TEMP_INDEX) :].split("-", 1)[0]
            if pid.isdigit() and _alive(int(pid)) and int(pid) != 0:
                continue
            path.unlink(missing_ok=True)
            removed.append(path.name)
        return removed

    def exclude(self, pattern: str = ".agent/") -> bool:
        """Add `pattern` to .git/info/exclude unless it is there; True when it was added."""
        traps.check(self.root, [self._common_dir / "info" / "exclude"])
        return add_line(self._common_dir / "info" / "exclude", pattern)

    def exclude_state(self, state_dir: str | Path) -> bool:
        """Exclude the state directory from git where the work tree holds it (its folder, a
        link of the user's to it: `exclude.state_patterns`); True when a line was added."""
        added = [self.exclude(pattern) for pattern in state_patterns(self.root, state_dir)]
        return any(added)

    def start_branch(self, name: str) -> None:
        """Create branch `name` at HEAD and switch to it; uncommitted changes stay in place."""
        self._check_branch_name(name)
        if self.branch_exists(name):
            raise GitError(
                f"branch {name} already exists", f"delete it (git branch -D {name}) or use --resume"
            )
        parts = name.split("/")
        for prefix in ("/".join(parts[:i]) for i in range(1, len(parts))):
            if self.branch_exists(prefix):  # git keeps refs as files: agent and agent/x clash
                raise _blocked(name, prefix)
        self._handle.switch_to_new_branch(name)
        self.run_branch = name

    def _check_run_branches(self) -> None:
        """Refuse, before the model is asked, a branch that blocks every run's branch
        (`agent/<run-id>`: a branch named `agent` leaves git no room for one)."""
        ref = f"refs/heads/{RUN_BRANCHES.rstrip('/')}"
        if self._probe("show-ref", "--verify", "-q", ref)[0] == 0:
            raise _blocked(f"{RUN_BRANCHES}<run-id>", RUN_BRANCHES.rstrip("/"))

    def checkout(self, name: str) -> None:
        """Switch to the existing branch `name`."""
        if not self.branch_exists(name):
            raise GitError(f"there is no branch {name}", "list the branches with git branch")
        self._run(
            "checkout",
            "-q",
            name,
            "--",
            hint="commit or stash the changes that conflict, then run again",
        )

    def ensure_on(self, name: str, protected: Iterable[str] = frozenset()) -> None:
        """Be on branch `name` (a resumed run's branch); the user's `protected` paths travel along."""
        self.run_branch = name
        if self.current_branch() == name:
            return
        if not self.branch_exists(name):
            raise GitError(
                f"the run's branch {name} no longer exists", "start a new run with agent run GOAL"
            )
        try:
            self.checkout(name)
        except GitError as exc:
            held = sorted(protected)
            if held:
                exc.hint = f"your uncommitted changes ({some(held)}) conflict with {name}; commit or stash them"
            raise

    def current_branch(self) -> str | None:
        """The checked-out branch's short name, or None when HEAD is detached."""
        return self._handle.current_branch()

    def identity(self) -> RepoIdentity:
        """Which repository this is (root commit, remote), whatever its folder is called."""
        return repo_identity(self.root, self.secrets)

    def head(self) -> str:
        """The sha of the commit HEAD points at."""
        sha = self._handle.head()
        if sha is None:
            raise GitError("the repository has no commits yet", "make a first commit and run again")
        return sha

    def blob_at(self, commit: str, path: str) -> str | None:
        """The blob id of the regular file `path` in `commit`; None when it holds no such
        file (none there, a link, a submodule) or git cannot say; `commit` is a full id (read
        from a state file: never an option to git)."""
        if not _FULL_SHA.fullmatch(commit):
            return None
        code, out, _ = self._probe("ls-tree", "-z", commit, "--", path)
        mode, kind, rest = (out.split(" ", 2) + ["", ""])[:3] if code == 0 else ("", "", "")
        blob, _, name = rest.partition("\t")
        wanted = mode in ("100644", "100755") and kind == "blob" and name.rstrip("\0") == path
        return blob if wanted else None

    def branch_exists(self, name: str) -> bool:
        """Whether a local branch `name` exists."""
        return self._handle.branch_exists(name)

    def log(self, rev: str = "HEAD", max_count: int = 20) -> list[LogEntry]:
        """The newest `max_count` commits reachable from `rev`, newest first."""
        return self._handle.log(rev, max_count)

    def add_worktree(self, path: Path, branch: str, start: str = "HEAD") -> Path:
        """A linked work tree at `path` on the new branch `branch` from `start`; its real path."""
        self._check_branch_name(name=branch)
        if self.branch_exists(branch):
            raise GitError(
                f"branch {branch} already exists",
                f"delete it (git branch -D {branch}) or pick another",
            )
        self._run("worktree", "add", "-q", "-b", branch, "--", str(path), start)
        return Path(os.path.realpath(path))

    def remove_worktree(self, path: Path, force: bool = False) -> None:
        """Remove the linked work tree at `path`; `force` also drops its uncommitted changes."""
        self._run(
            "worktree",
            "remove",
            *(["--force"] if force else []),
            "--",
            str(path),
            hint="commit or discard its changes, or remove it with force",
        )

    def changed_files(self, protected: Iterable[str] = frozenset()) -> list[str]:
        """Paths changed in the work tree (not ignored), leaving out the protected ones and
        the bytecode and test caches HEAD does not hold (`cache_file`): running code writes
        those, no task does."""
        held = {p.rstrip("/") for p in protected}
        entries = parse_status(self._run(*_STATUS))
        # the new name of a rename or copy, and an added or untracked path, are not in HEAD
        paths = {path for code, path, _ in entries if code[0] in _IN_HEAD or not cache_file(path)}
        paths |= {orig for _, _, orig in entries if orig}
        return sorted(p for p in paths if not any(p == h or p.startswith(h + "/") for h in held))

    def uncommittable(self) -> list[str]:
        """What the work tree holds that no commit of the agent's takes: ignored files and
        folders (a folder ignored whole is one entry, as `git status --ignored` gives it),
        untracked folders that are repositories of their own, each ending in `/`, and
        untracked bytecode outside `__pycache__` (`cache_file`)."""
        raw = self._run(
            "status",
            "--porcelain=v1",
            "-z",
            "--ignored=traditional",
            "--untracked-files=normal",
            "--ignore-submodules=all",
        )
        # bytecode outside a cache folder (`cache_file`: no commit takes it) that Python
        # imports as a module when no source is beside it
        loose = self._run("ls-files", "-z", "--others", "--exclude-standard", "*.pyc", "*.pyo")
        return sorted(
            {
                path
                for code, path, _ in parse_status(raw)
                if code == "!!"
                or (code == "??" and path.endswith("/") and (self.root / path / ".git").exists())
            }
            | {p for p in loose.split("\0") if p and not set(p.split("/")) & _CACHE_FOLDERS}
        )

    def commit_paths(self, paths: Iterable[str], message: str) -> str | None:
        """Commit exactly `paths` (deletions too) as they are in the work tree; None if nothing changed.

        A temporary index built from HEAD keeps whatever the user has staged out of the commit.
        The commit object is written first, then the real index takes those paths from it,
        and moving the branch is the last step: killed at any instant, the branch and the
        index never disagree about the committed paths (at worst the index already holds the
        task's files staged on the old commit, the work tree's own content).
        """
        wanted = self._known_paths(committable(self.root, sorted(set(paths))))
        if not wanted:
            return None
        self._check_can_commit()
        before = self.head()
        with self._temporary_index() as env:
            self._run("add", "-A", *self._sparse(), "--", *wanted, env=env)
            self._drop_new_gitlinks(env)
            if self._try("diff-index", "--cached", "--quiet", "HEAD", env=env)[0] == 0:
                return None
            tree = self._run("write-tree", env=env).strip()
        try:
            commit = self._run(
                "commit-tree", tree, "-p", before, "-m", clean_message(message), hint=_IDENTITY_HINT
            ).strip()
        except GitError as exc:
            said = exc.message.replace("git commit-tree failed", "git commit failed", 1)
            raise GitError(said, exc.hint) from None
        # The real index takes these paths from the new commit, so they never show as staged
        # reversals of it.
        code, _, err = self._try(
            "reset", "-q", commit, "--", *wanted, env={"GIT_LITERAL_PATHSPECS": "1"}
        )
        if code != 0:
            raise GitError(
                f"git could not update the index for the commit "
                f"({' '.join(err.split()) or f'exit code {code}'}); nothing was committed, "
                "the branch is as it was",
                _LOCK_HINT,
            )
        branch = self.current_branch()
        summary = clean_message(message).split("\n", 1)[0]
        ref = f"refs/heads/{branch}" if branch else "HEAD"
        self._run("update-ref", "-m", f"commit: {summary}", ref, commit, before)
        return commit

    def _stageable(self, paths: list[str]) -> list[str]:
        """Paths that may enter even a temporary index: git keeps their objects, so none that
        would add a secret (secrets.py)."""
        return [
            p
            for p in committable(self.root, paths)
            if not where_secret(self.root, p, self.secrets, self.head_blob)
        ]

    def head_blob(self, path: str) -> bytes | None:
        """The bytes of `path` (a file, or a symlink's target) at HEAD; None when HEAD has no
        such path, or no HEAD."""
        code, out, _ = run_git(["cat-file", "blob", f"HEAD:{path}"], self.root, self.secrets)
        return out if code == 0 else None

    def _sparse(self) -> list[str]:
        """`--sparse` for `git add` in a sparse checkout: a file the run wrote outside its cone
        is committed like any other, where git would refuse to add it. Asked of git once:
        every diff, tree and commit of the run adds files."""
        if self._sparse_args is None:
            code, out, _ = self._try("config", "--bool", "core.sparseCheckout")
            self._sparse_args = ["--sparse"] if code == 0 and out.strip() == "true" else []
        return self._sparse_args

    def _check_can_commit(self) -> None:
        """Refuse to commit off the run's branch or while git's index is locked."""
        branch = self.current_branch()
        if self.run_branch and branch != self.run_branch:
            raise GitError(
                f"HEAD is on {branch or 'a detached commit'}, not on the run's branch "
                f"{self.run_branch}; nothing was committed",
                f"a command moved HEAD: check with git status, switch back with "
                f"git switch {self.run_branch}, then `agent run --resume`",
            )
        if (self.git_dir / "index.lock").exists():
            raise GitError(
                "git's index is locked (.git/index.lock exists); nothing was committed", _LOCK_HINT
            )

    def _drop_new_gitlinks(self, env: dict[str, str]) -> None:
        """Take out of the temporary index every nested repository `git add` made a gitlink."""
        staged = self._run("ls-files", "-s", "-z", env=env).split("\0")
        links = [e.split("\t", 1)[1] for e in staged if e.startswith("160000 ") and "\t" in e]
        in_head = set(self._run("ls-tree", "-r", "-z", "--name-only", "HEAD", env=env).split("\0"))
        new = [p for p in links if p not in in_head]
        if new:
            self._run("update-index", "--force-remove", "--", *new, env=env)

    def list_files(self) -> list[str]:
        """Tracked and untracked files in the work tree that git does not ignore, for the model
        to read (a name that is not UTF-8 shown with escapes: no request could carry it)."""
        out = self._probe_out("ls-files", "-z", "--cached", "--others", "--exclude-standard")
        names = (p for p in set(out.split("\0")) if p and os.path.lexists(self.root / p))
        return sorted(readable(p) for p in names)

    def diff(self, protected: Iterable[str] = frozenset()) -> str:
        """Unified diff from HEAD of the changed paths (new files included), protected ones left out."""
        wanted = self._known_paths(self._stageable(self.changed_files(protected)))
        if not wanted:
            return ""
        with self._temporary_index() as env:
            self._run("add", "-A", *self._sparse(), "--", *wanted, env=env)
            return self._run("diff", "--no-ext-diff", "--no-textconv", "--cached", "HEAD", env=env)

    def tree(self, protected: Iterable[str] = frozenset()) -> str:
        """The id of the tree the work tree holds now (HEAD plus its changed, unprotected paths)."""
        wanted = self._known_paths(self._stageable(self.changed_files(protected)))
        with self._temporary_index() as env:
            if wanted:
                self._run("add", "-A", *self._sparse(), "--", *wanted, env=env)
            return self._run("write-tree", env=env).strip()

    def changed_since(self, tree: str, branch: str) -> set[str]:
        """The changed paths of the work tree that are not as they were in `tree` (a state
        the work tree was once in) and were not changes `tree` held against `branch`: what
        someone else changed since, leaving out the changes left uncommitted then. Every
        changed path when `tree` is gone (pruned) or `branch` is."""
        changed = set(self.changed_files())
        if not _FULL_SHA.fullmatch(tree):  # read from a state file: never an option to git
            return changed
        now = self.tree()
        differ = self._tree_diff(tree, now)
        held = self._tree_diff(f"refs/heads/{branch}^{{tree}}", tree)
        if differ is None or held is None:
            return changed
        return {p for p in changed if p in differ and p not in held}

    def _tree_diff(self, old: str, new: str) -> set[str] | None:
        """The paths that differ between two trees; None when one cannot be read."""
        code, out, _ = self._try("diff-tree", "-r", "--name-only", "-z", "--no-renames", old, new)
        return {p for p in out.split("\0") if p} if code == 0 else None

    def commit_stat(self, commit: str) -> str:
        """`git diff --stat` of one commit against its parent (empty for a root commit)."""
        code, out, _ = self._try("diff", "--stat", f"{commit}^", commit, "--")
        return out.rstrip("\n") if code == 0 else ""

    def has_commit_on(self, commit: str, branch: str, trailer: str) -> bool:
        """Whether `commit` (a full sha) is on local `branch` and its message has the line `trailer`."""
        return self._run_commit(commit, trailer) and self._ancestor(commit, f"refs/heads/{branch}")

    def has_commit_ahead_of(self, commit: str, branch: str, trailer: str) -> bool:
        """Whether `commit` (a full sha), whose message has the line `trailer`, is ahead of
        local `branch`: the branch's tip is behind it, as once the branch was moved back."""
        return self._run_commit(commit, trailer) and self._ancestor(f"refs/heads/{branch}", commit)

    def _run_commit(self, commit: str, trailer: str) -> bool:
        """Whether `commit` is a full sha of a commit whose message has the line `trailer`."""
        if not _FULL_SHA.fullmatch(commit):
            return False
        code, out, _ = self._try("show", "-s", "--format=%B", commit, "--")
        return code == 0 and trailer in out.splitlines()

    def _ancestor(self, ancestor: str, rev: str) -> bool:
        return self._try("merge-base", "--is-ancestor", ancestor, rev)[0] == 0

    @contextmanager
    def _temporary_index(self) -> Iterator[dict[str, str]]:
        """Environment for git commands working on a private index that starts as HEAD."""
        index = self.git_dir / f"{_TEMP_INDEX}{os.getpid()}-{uuid.uuid4().hex}"
        env = {"GIT_INDEX_FILE": str(index), "GIT_LITERAL_PATHSPECS": "1"}
        try:
            self._run("read-tree", "HEAD", env=env)
            yield env
        finally:
            for leftover in (index, index.with_name(index.name + ".lock")):
                leftover.unlink(missing_ok=True)

    def _check_branch_name(self, name: str) -> None:
        if not name or self._try("check-ref-format", "--branch", name)[0] != 0:
            raise GitError(
                f"{name!r} is not a valid branch name", "use letters, digits, '-', '_', '.' and '/'"
            )

    def _known_paths(self, paths: list[str]) -> list[str]:
        """The paths that exist in the work tree or in HEAD (what `git add -A` can stage),
        but no bytecode or test cache that HEAD does not hold: no diff or commit takes one."""
        if not paths:
            return []
        listed = self._run(
            "ls-tree",
            "-r",
            "-z",
            "--name-only",
            "HEAD",
            "--",
            *paths,
            env={"GIT_LITERAL_PATHSPECS": "1"},
        )
        in_head = set(listed.split("\0"))
        return [
            p
            for p in paths
            if p in in_head or (os.path.lexists(self.root / p) and not cache_file(p))
        ]

    def _probe(self, *args: str) -> tuple[int, str, str]:
        """Run one git command without GitPython (the checks before the first model request)."""
        self._look(args)
        try:
            code, out, err = run_git(list(args), self.root, self.secrets)
        except OSError as exc:
            raise GitError(
                f"git {args[0]} could not run: {exc}", "check that git is installed"
            ) from exc
        return code, out.decode("utf-8", "surrogateescape"), err

    def _probe_out(self, *args: str) -> str:
        """`_probe`'s stdout; a failure becomes GitError carrying git's own message."""
        code, out, err = self._probe(*args)
        if code != 0:
            raise GitError(
                f"git {args[0]} failed: {' '.join(err.split()) or f'exit code {code}'}",
                "check the repository with git status",
            )
        return out

    def _try(self, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
        """Run git through GitPython; (exit code, stdout, stderr) without raising on an exit code."""
        self._look(args)
        return self._handle.run(list(args), env)

    def _look(self, args: tuple[str, ...]) -> None:
        """Before a command that reads the work tree: refuse a FIFO git would wait on (traps.py)."""
        if args and args[0] in _READS_TREE and self._tree_checked:
            self._tree_checked = traps.tree(self.root)

    def _run(self, *args: str, env: dict[str, str] | None = None, hint: str = "") -> str:
        """Run git and return stdout; a failure becomes GitError carrying git's own message."""
        code, out, err = self._try(*args, env=env)
        if code != 0:
            detail = " ".join(err.split()) or f"exit code {code}"
            if "tell me who you are" in err or "empty ident" in err:
                hint = _IDENTITY_HINT
            raise GitError(
                f"git {args[0]} failed: {detail}", hint or "check the repository with git status"
            )
        return out


def _blocked(name: str, prefix: str) -> GitError:
    """Why branch `name` cannot be made: the branch `prefix` holds the place of its folder."""
    return GitError(
        f"branch {name} cannot be created: a branch named {prefix} already exists",
        f"rename that branch (git branch -m {prefix} <new-name>) and run again",
    )


def check_identity(root: Path, secrets: tuple[str, ...] = ()) -> str:
    """The identity git commits under in `root`; a GitError with the fix when it has none."""
    # Author and committer come from the same config; only the environment can set one apart
    # (each check is a git process before the first model request).
    apart = any(k.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_")) for k in os.environ)
    for var in ("GIT_AUTHOR_IDENT", "GIT_COMMITTER_IDENT")[: 2 if apart else 1]:
        try:
            code, out, _ = run_git(["var", var], root, secrets)
        except OSError as exc:
            raise GitError(f"git var could not run: {exc}", "check that git is installed") from exc
        if code != 0:
            raise GitError(
                "git has no identity to commit the agent's work under "
                "(user.name and user.email are not set)",
                _IDENTITY_HINT,
            )
    # "Name <email> timestamp zone": the name and email are what the user sees
    return out.decode("utf-8", "replace").strip().rsplit(" ", 2)[0]


def clean_message(message: str) -> str:
    """`message` as `git commit -m` stores it: trailing spaces and runs of blank lines gone."""
    lines = [line.rstrip() for line in message.split("\n")]
    kept: list[str] = []
    for line in lines:
        if line or (kept and kept[-1]):
            kept.append(line)
    return "\n".join(kept).strip("\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def parse_status(raw: str) -> list[tuple[str, str, str | None]]:
    """(XY code, path, original path of a rename) for each entry of `git status -z` output."""
    items = raw.split("\0")
    entries: list[tuple[str, str, str | None]] = []
    i = 0
    while i < len(items):
        item, i = items[i], i + 1
        if len(item) < 4:
            continue
        code, path, orig = item[:2], item[3:], None
        if "R" in code or "C" in code:
            orig, i = items[i], i + 1
        entries.append((code, path, orig))
    return entries


def cache_file(path: str) -> bool:
    """Whether `path` is Python bytecode or a test cache, which running code writes: a `.pyc`
    or `.pyo`, or a file in a `__pycache__` or `.pytest_cache` folder."""
    *folders, name = path.split("/")
    return name.endswith((".pyc", ".pyo")) or any(f in _CACHE_FOLDERS for f in folders)


def committable(root: Path, paths: list[str]) -> list[str]:
    """The paths the agent may commit: never a nested repository or anything named .git."""
    keep = []
    for path in paths:
        if any(part.lower() == ".git" for part in Path(path).parts):
            continue
        full = root / path
        if full.is_dir() and not full.is_symlink():
            continue  # git lists an untracked nested repository as its directory
        keep.append(path)
    return keep


def tracked_state(root: Path, state_dir: Path) -> list[str]:
    """Files under `state_dir` that the repository at `root` tracks, or a submodule of it
    when the state directory lies in one, named from `root` (none
    when the state directory is outside the work tree or not there, or git cannot say: a
    directory that is not there holds nothing to read, and asks no git process).

    The state directory is excluded from git when a command first uses it, so nothing of the
    user's own is tracked there: what is came with the repository (a clone of one that
    committed its `.agent/`), and a run record there could name an endpoint to resume
    against, which would then be sent the user's code and key."""
    real_root, real = Path(os.path.realpath(root)), Path(os.path.realpath(state_dir))
    if real == real_root or real_root not in real.parents or not real.is_dir():
        return []
    where = real.relative_to(real_root).as_posix()
    # asked of the repository that holds the directory: one in a submodule (through a link)
    # holds what the submodule tracks, which the superproject's index does not list
    code, out, _ = run_git(["ls-files", "-z", "--", "."], real)
    if code != 0:
        return []
    names = out.decode("utf-8", "surrogateescape").split("\0")
    return [f"{where}/{name}" for name in names if name]


def tracks(root: Path, name: str) -> bool:
    """Whether the repository at `root` tracks the path `name` itself (a file or a symbolic
    link, not something under it); False when git cannot say."""
    code, out, _ = run_git(["ls-files", "-z", "--", f":(literal){name}"], root)
    wanted = name.encode("utf-8", "surrogateescape")
    return code == 0 and wanted in out.split(b"\0")
