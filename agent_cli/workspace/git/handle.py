"""The repository through GitPython: the only module that imports it, its errors made ours.

GitPython is imported on the first call, not with the package: a run's checks before its
first model request use `safe.run_git`, so neither importing `agent_cli` nor that request
waits for it. Every git process GitPython starts gets `safe.safe_env` (the scrubbed
environment, no system config, the harness's own global config, the repository's config
emptied but for an allow-list, no hooks, no fsmonitor, no submodule recursion), and no
process a command started outlives it. GitPython copies `os.environ` under whatever it is given, so each
variable the scrub removed is given as empty: its value never reaches git. The `git
cat-file` helpers GitPython keeps for reading objects start under the same environment and
run nothing a repository's config names; `close` ends them.
"""

from __future__ import annotations

import configparser
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent_cli.core.errors import GitError
from agent_cli.workspace.git.safe import TIMED_OUT, TIMEOUT_S, git_env, safe_env, timed_out
from agent_cli.workspace.shell import reaper

if TYPE_CHECKING:
    from git import Repo

_NO_GIT = ("git is not installed or not on PATH", "install git and run again")
_REFRESH = "GIT_PYTHON_REFRESH"


@dataclass(frozen=True)
class LogEntry:
    """One commit as a log shows it."""

    sha: str
    summary: str
    author: str


def _import_gitpython(secrets: tuple[str, ...] = ()) -> None:
    """Import GitPython without letting an unusable git fail the import; GitError if unusable.

    The import runs `git version` under this process's environment: the secrets and git
    config variables are out of it meanwhile, so that git process never holds the key.
    """
    previous = os.environ.get(_REFRESH)
    os.environ.setdefault(_REFRESH, "quiet")  # a missing git becomes our error, not ImportError
    kept = git_env(secrets)
    hidden = {name: os.environ.pop(name) for name in list(os.environ) if name not in kept}
    try:
        import git
    except ImportError as exc:
        raise GitError(f"GitPython cannot start: {exc}".splitlines()[0], _NO_GIT[1]) from None
    finally:
        os.environ.update(hidden)
        if previous is None:
            os.environ.pop(_REFRESH, None)
    if not git.GIT_OK:
        raise GitError(*_NO_GIT)


def check_object_format(name: str) -> None:
    """Refuse a repository whose objects are not named by SHA-1 (`name`, as git's
    `extensions.objectFormat` or `rev-parse --show-object-format` says): GitPython reads no
    other, and every branch, commit and log of a run goes through it."""
    named = name.strip().lower()
    if named not in ("", "sha1"):
        raise GitError(
            f"the repository names its objects by {named.upper().replace('SHA', 'SHA-')} "
            f"(extensions.objectFormat = {named}), which the agent cannot work in: GitPython, "
            "through which it commits, reads only SHA-1 repositories",
            "work in a repository with SHA-1 object names, git's default",
        )


def check_ref_names(common_dir: Path) -> None:
    """Refuse a repository whose packed refs (`packed-refs`, where `git gc` moves every
    branch and tag) name one in bytes that are not UTF-8: GitPython reads that file as UTF-8
    text, and could then read no branch and no commit of a run."""
    try:
        data = (common_dir / "packed-refs").read_bytes()
    except OSError:
        return  # none (no ref packed yet), or one git itself cannot read: its commands say so
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[data.rfind(b"\n", 0, exc.start) + 1 :].split(b"\n", 1)[0]
        name = line.rpartition(b" ")[2].decode("utf-8", "surrogateescape")  # shown: errors.py
        raise GitError(
            f"the repository has a ref whose name is not UTF-8 text ({name}), which GitPython, "
            "through which the agent commits, cannot read",
            "rename it (a branch: git branch -m OLD NEW; a tag: git tag NEW OLD, then "
            "git tag -d OLD) and run again",
        ) from None


class RepoHandle:
    """A GitPython `Repo` on one work tree, opened on first use, every process kept safe."""

    def __init__(self, root: Path, secrets: tuple[str, ...] = ()) -> None:
        self.root = root
        self.secrets = secrets
        self._repo: Repo | None = None

    def _open(self) -> Repo:
        if self._repo is None:
            _import_gitpython(self.secrets)
            from git import Repo
            from git.exc import GitError as GitPythonError

            try:
                repo = Repo(self.root)
            except (GitPythonError, OSError) as exc:
                raise GitError(
                    f"{self.root} cannot be opened as a repository: {exc}",
                    "check the repository with git status",
                ) from exc
            try:
                named = repo.config_reader("repository").get_value(
                    "extensions", "objectformat", "sha1"
                )
                check_object_format(str(named))
            except GitError:
                repo.close()
                raise
            except (configparser.Error, OSError, ValueError):
                pass  # a config git itself cannot read: its commands say so
            try:
                check_ref_names(Path(repo.common_dir))
            except GitError:
                repo.close()
                raise
            self._repo = repo
        return self._repo

    @contextmanager
    def _safe(self) -> Iterator[Repo]:
        """The Repo, its git processes under the safe environment computed now; afterwards no
        process they started is left (GitPython's `cat-file` helpers included)."""
        spared = reaper.adopt_orphans()
        try:
            env = safe_env(self.root, self.secrets)  # first: it refuses files git would wait on
            repo = self._open()
            blanks = {name: "" for name in os.environ if name not in env}
            with repo.git.custom_environment(**env, **blanks):
                yield repo
        finally:
            if self._repo is not None:
                self._repo.git.clear_cache()
            reaper.kill_leftovers(spared)

    def run(self, args: list[str], extra_env: dict[str, str] | None = None) -> tuple[int, str, str]:
        """Run one git command through GitPython; (exit code, stdout, stderr), never raising."""
        with self._safe() as repo:
            from git.exc import GitCommandNotFound  # after _safe imported GitPython, reaped

            try:
                # as a process, waited for here: GitPython's own `kill_after_timeout` starts a
                # watchdog thread that Ctrl-C leaves running, and the interpreter then waits
                # out its whole timeout before it exits
                started = repo.git.execute(
                    [repo.git.GIT_PYTHON_GIT_EXECUTABLE or "git", *args],
                    as_process=True,
                    env=extra_env,
                )
            except GitCommandNotFound:
                raise GitError(*_NO_GIT) from None
            proc = started.proc
            if proc is None:  # only once it was ended, which nothing here has done
                raise GitError(f"git {args[0]} did not start", _NO_GIT[1])
            try:
                out, err = proc.communicate(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                return TIMED_OUT, "", timed_out(args)
        text = err.decode("utf-8", "replace")
        return proc.returncode, out.decode("utf-8", "surrogateescape"), text.removesuffix("\n")

    def current_branch(self) -> str | None:
        """The checked-out branch's short name, or None when HEAD is detached."""
        with self._safe() as repo:
            if repo.head.is_detached:
                return None
            return repo.head.reference.name

    def head(self) -> str | None:
        """The sha of the commit HEAD points at; None before the first commit."""
        with self._safe() as repo:
            try:
                return repo.head.commit.hexsha
            except ValueError:
                return None

    def branch_exists(self, name: str) -> bool:
        """Whether a local branch `name` exists."""
        with self._safe() as repo:
            return any(head.name == name for head in repo.heads)

    def switch_to_new_branch(self, name: str) -> None:
        """Create branch `name` at HEAD and point HEAD at it; index and work tree stay as they are."""
        with self._safe() as repo:
            before = self.current_branch() or repo.head.commit.hexsha
            try:
                branch = repo.create_head(name, logmsg=f"branch: Created from {before}")
                repo.head.set_reference(branch, logmsg=f"checkout: moving from {before} to {name}")
            except (OSError, ValueError) as exc:
                raise GitError(
                    f"branch {name} could not be created: {exc}",
                    "check the repository with git status",
                ) from exc

    def log(self, rev: str = "HEAD", max_count: int = 20) -> list[LogEntry]:
        """The newest `max_count` commits reachable from `rev`, newest first."""
        with self._safe() as repo:
            from git.exc import GitCommandError

            try:
                return [
                    LogEntry(
                        sha=c.hexsha,
                        summary=str(c.summary),
                        author=str(c.author.name or ""),
                    )
                    for c in repo.iter_commits(rev, max_count=max_count)
                ]
            except (GitCommandError, ValueError) as exc:
                raise GitError(
                    f"the log of {rev} cannot be read: {' '.join(str(exc).split())}",
                    "check the revision with git log",
                ) from exc

    def close(self) -> None:
        """Release GitPython's caches and any helper process it started."""
        if self._repo is not None:
            self._repo.close()
            self._repo = None
