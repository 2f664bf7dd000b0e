"""The repository as a run uses it: preflight, the run's branch, commands, commits without secrets.

`RepoWorkspace` meets `protocols.Workspace`. It keeps the user's own uncommitted paths
(`protected`) from the preflight or the resumed run, so that nothing of theirs is staged,
committed or shown as the agent's work, nor left changed by a command (`userwork.py`). A path carrying a secret (the API key, which a
command can dump into a file, a file name or a symlink target) is never committed: the commit
is refused instead (`workspace.secrets`). What it gives as text (a diff, a diff stat) is
UTF-8 text whatever the files are named (`readable`: `\\xNN` for a byte that is not UTF-8,
which `core.quotepath = false` leaves unquoted); the changed paths it gives stay git's own,
to be given back to git.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from pathlib import Path

from agent_cli.core.errors import GitError
from agent_cli.core.redact import redact
from agent_cli.core.text import readable, some, unusable
from agent_cli.workspace import aside, takeback, userwork
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.git.secrets import refuse_secrets
from agent_cli.workspace.shell import checkpytest, confine, strays
from agent_cli.workspace.shell import runner as shell

VAULT = "agent-userwork"  # in the work tree's git directory (userwork.py)
_RENORMALIZE = "`git add --renormalize .` and a commit in your checkout settle them"


@dataclass
class CommandRunner:
    """Runs commands in the repository root with the run's environment, timeout and sandbox;
    no command can push, and one that damages a `guarded` directory raises StateDirDamaged."""

    root: Path
    readonly: list[Path]
    timeout_s: float
    env: dict[str, str]
    sandbox: str = "none"
    guarded: list[Path] = field(default_factory=list)

    def run(self, cmd: str | list[str], env: dict[str, str] | None = None) -> shell.CommandResult:
        """Run `cmd` (a command line, or an argv without a shell) to its end or its timeout;
        `env` in place of the run's environment."""
        before = confine.snapshot(self.guarded)
        result = shell.run_command(
            cmd,
            cwd=self.root,
            timeout_s=self.timeout_s,
            env=confine.command_env(self.env if env is None else env),
            sandbox=self.sandbox,
            writable=[self.root],
            readonly=self.readonly,
        )
        confine.check_intact(before, cmd)
        return result


def _check_recordable(
    changed: Iterable[str], fix: str = "commit or stash that change first, or run with --worktree"
) -> None:
    """Refuse a path of the user's changes whose name is not UTF-8 text: the run's record
    keeps them as UTF-8 text, and could not keep such a change out of the run's work."""
    unnamed = sorted(readable(p) for p in changed if unusable(p))
    if unnamed:
        raise GitError(
            f"a file you changed has a name that is not UTF-8 text ({some(unnamed)}); the "
            "run could not record it to keep your change",
            fix,
        )


@dataclass
class RepoWorkspace:
    """One git work tree, its command runner, and the secrets that must never leave it."""

    git: GitRepo
    runner: CommandRunner
    secrets: tuple[str, ...] = ()
    check_command: Callable[[str], None] = lambda cmd: None  # raises when a command is refused
    refusal: Callable[[str], str | None] = lambda cmd: None  # why the policy refuses a command
    protected: set[str] = field(default_factory=set)
    notice: Callable[[str], None] = lambda text: None  # tells the user something

    def __post_init__(self) -> None:
        self.root = self.git.root
        self.secrets = tuple(s for s in self.secrets if s)
        self.vault = self.git.git_dir / VAULT  # the user's files while a command runs
        self._held: takeback.Hold | None = None  # where the attempt began (takeback.py)

    def preflight(self, allow_dirty: bool, resuming: str | None = None) -> set[str]:
        """Refuse repository states a run must not start in; keep the user's changed paths.
        `resuming`: the branch of the run to resume, named in the way out of a refusal."""
        self._after_a_killed_run()
        changed = self.git.preflight(allow_dirty, resuming)
        if resuming is None:  # a resumed run's own changes are among them: resume_on's check
            _check_recordable(changed)
        self.protected = changed
        return set(self.protected)

    def as_made(self) -> set[str]:
        """Keep the paths git shows changed in a worktree just made from a commit (a CRLF file
        under a `text` attribute, a file a filter of the user's cleans otherwise than its
        commit holds): no task made that change, so it is kept out of the run's work as the
        user's own changes are (`protected`), and said once."""
        changed = self.git.changed_now()
        _check_recordable(changed, _RENORMALIZE)
        self.protected = changed
        if changed:
            shown = some(sorted(readable(p) for p in changed), 3)
            self.notice(
                f"git shows files changed in the run's worktree as soon as it is checked out "
                f"({shown}): the repository's attributes or a filter of your git config store "
                "them otherwise than the commit does; no task made that change, so the run "
                f"leaves them out of its commits and keeps its worktree at the end ({_RENORMALIZE})"
            )
        return set(changed)

    def resume_on(self, branch: str, protected: Iterable[str]) -> None:
        """Go back to a saved run's branch, its protected paths travelling along."""
        _check_recordable(protected)
        self.protected = set(protected)
        self._after_a_killed_run()
        self.git.preflight(allow_dirty=True)
        self.git.ensure_on(branch, self.protected)

    def _after_a_killed_run(self) -> None:
        """Put back what a killed check left set aside (aside.py), stop what a killed run's
        command left running (strays.py), and keep for the user the files such a command may
        have left changed (userwork.recover)."""
        aside.put_back_leftovers(self.root)
        stopped = strays.stop_strays()
        if stopped:
            self.notice(
                f"stopped {len(stopped)} process(es) that a killed run's command had left "
                f"running (pid {some([str(pid) for pid in stopped])})"
            )
        into, said = userwork.recover(self.root, self.vault)
        if said:
            kept = f"; as they were before it, they are in {into}" if into else ""
            self.notice(
                f"an earlier run was stopped while a command ran and may have left your own "
                f"uncommitted files changed: {some(said)}{kept}"
            )

    def start_branch(self, name: str) -> None:
        self.git.start_branch(name)

    def head(self) -> str:
        return self.git.head()

    def current_branch(self) -> str | None:
        return self.git.current_branch()

    def diff_stat(self, commit: str) -> str:
        """`git diff --stat` of one commit against its parent (as text: `readable`)."""
        return redact(readable(self.git.commit_stat(commit)), self.secrets)

    def has_run_commit(self, commit: str, branch: str, run_id: str) -> bool:
        """Whether `commit` is on `branch` and carries the run's `Agent-Run: <run_id>` trailer."""
        return self.git.has_commit_on(commit, branch, f"Agent-Run: {run_id}")

    def run_commit_ahead_of(self, commit: str, branch: str, run_id: str) -> bool:
        """Whether `commit` carries the run's trailer and `branch` was moved back behind it."""
        return self.git.has_commit_ahead_of(commit, branch, f"Agent-Run: {run_id}")

    def list_files(self) -> list[str]:
        return self.git.list_files()

    def changed_files(self) -> list[str]:
        return self.git.changed_files(self.protected)

    def commit(self, paths: list[str], message: str) -> str | None:
        """Commit exactly `paths`, refused when one would add a secret to git (a secret HEAD's
        own file held already is no new one: secrets.py); the message redacted. The branch
        is held at the commit from then on (`hold_branch`)."""
        refuse_secrets(self.root, paths, self.secrets, self.git.head_blob)
        commit = self.git.commit_paths(paths, redact(message, self.secrets))
        if commit is not None and self._held is not None:
            self.hold_branch()
        return commit

    def hold_branch(self) -> None:
        """Note where an attempt begins: the run's branch and its commit, git's index, the
        user's branches; what `take_back` puts back (takeback.py)."""
        branch = self.git.run_branch
        self._held = takeback.hold(self.root, branch, self.secrets) if branch else None

    def take_back(self, who: str = "the model's commands") -> str:
        """Put HEAD back on the run's branch at the commit `hold_branch` noted, the index as
        it was and the work tree as it is: what `who` committed, switched or reset is
        uncommitted work again. The line that says so; "" when nothing moved."""
        if self._held is None:
            return ""
        said, self._held = takeback.take_back(self.root, self._held, who, self.secrets)
        return said

    def diff(self) -> str:
        """The unified diff of the run's changes (as text: `readable`)."""
        return redact(readable(self.git.diff(self.protected)), self.secrets)

    def tree(self) -> str:
        """The id of the tree the work tree holds now (for caching a check's result)."""
        return self.git.tree(self.protected)

    def changed_since(self, tree: str, branch: str) -> set[str]:
        """The paths changed since the work tree held `tree`, other than its changes then
        against `branch` (GitRepo's)."""
        return self.git.changed_since(tree, branch)

    def blob_at(self, commit: str, path: str) -> str | None:
        """The blob id of the regular file `path` in `commit`, or None (GitRepo's)."""
        return self.git.blob_at(commit, path)

    def uncommittable(self) -> list[str]:
        """The ignored paths and untracked repositories of the work tree (GitRepo's)."""
        return self.git.uncommittable()

    def set_aside(self, paths: list[str]) -> AbstractContextManager[None]:
        """`paths` moved out of the work tree while the block runs (aside.py)."""
        return aside.set_aside(self.root, paths)

    def run_argv(self, argv: list[str]) -> shell.CommandResult:
        """Run a harness command (an acceptance check): no shell, no approval asked; pytest
        with an empty cache of its own and its output captured (checkpytest.py). What the
        code it ran committed is taken back (`take_back`), and said."""
        with checkpytest.check_env(self.runner.env, argv, self.root) as env:
            result = self._keeping_user_work(argv, env)
        said = self.take_back("the code the check ran")
        if said:
            self.notice(said)
        return result

    def run_for_model(self, cmd: str) -> shell.CommandResult:
        """Run a command line the model asked for, after the command policy allowed it."""
        self.check_command(cmd)
        return self._keeping_user_work(cmd)

    def _keeping_user_work(
        self, cmd: str | list[str], env: dict[str, str] | None = None
    ) -> shell.CommandResult:
        """Run `cmd` (in `env`, else the run's environment); whatever it changed of the user's
        own uncommitted files is put back, and its output says so (`userwork.py`)."""
        if not self.protected:
            return self.runner.run(cmd, env)
        kept = userwork.keep(self.root, self.protected, self.vault)
        try:
            result = self.runner.run(cmd, env)
        except BaseException:  # Ctrl-C or SIGTERM mid-command: the group is stopped by now
            userwork.put_back(kept)
            userwork.release(kept)
            raise
        changed = userwork.put_back(kept)
        userwork.release(kept)
        if not changed:
            return result
        note = (
            f"\n[the command changed {some(changed)}: the user's own uncommitted "
            "work, which this run must leave as it is; put back as it was]"
        )
        return replace(result, output=result.output + note)

    def close(self) -> None:
        userwork.forget(self.vault)
        self.git.close()

    def __enter__(self) -> RepoWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
