"""`agent runs`, `agent rewind` and `agent clean`: a repository's runs listed, a run's branch
moved back to a task, and the finished worktrees and merged branches of a repository removed.

Only typer is imported at module level. A run in progress (`agent.run.live`) is never
touched; only `agent/*` branches are ever moved or deleted, never one checked out in the
user's own work tree.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from agent_cli.cli.help import Command

if TYPE_CHECKING:
    from agent_cli.agent.run.store import RunRecord, RunStore
    from agent_cli.core.errors import AgentError
    from agent_cli.workspace.git.branches import AgentBranches, Worktree
    from agent_cli.workspace.lock import RunLock


def list_runs(repo_opt: Path | None, json_out: bool) -> None:
    """Print the runs of a repository, newest last; live ones with their task, step and spend."""
    import json
    from functools import partial

    from agent_cli.agent.run.live import runs_rows, shown
    from agent_cli.cli import worktree as wt
    from agent_cli.cli.shared import find_repo, run_secrets, run_store, settings_for
    from agent_cli.ui.shown import shown_values
    from agent_cli.workspace.git.branches import linked_worktrees
    from agent_cli.workspace.git.worktree import main_work_tree

    repo = main_work_tree(find_repo(repo_opt))  # from inside a worktree too: the repository's runs
    settings = settings_for(repo)
    state_dir = settings.state_dir(repo)
    tree_of = partial(wt.tree_now, linked_worktrees(repo), state_dir)
    rows = [
        _strays_named(row, repo)
        for row in runs_rows(run_store(state_dir, repo), state_dir, tree_of)
    ]
    rows = shown_values(rows, run_secrets(settings, repo))  # as a terminal shows them, masked
    if json_out:
        print(json.dumps(rows))
    elif not rows:
        print("no runs yet in this repository")
    else:
        from agent_cli.ui.console import print_runs

        print_runs([shown(r) for r in rows])


def _strays_named(row: dict[str, Any], root: Path) -> dict[str, Any]:
    """A run's row whose worktree folder is no longer a work tree of the repository at `root`
    (emptied, or its files replaced, by hand): the folder is its `stray_folder`, not its
    `worktree`, which a script would take for the run's checkout and work in. A tree that
    moved with the checkout is still the run's (`moved_with`)."""
    from agent_cli.workspace.git.worktree import is_linked_tree, moved_with

    tree = row.get("worktree")
    if not tree or is_linked_tree(Path(tree), root) or moved_with(Path(tree), root):
        return row
    return {**{k: v for k, v in row.items() if k != "worktree"}, "stray_folder": tree}


@dataclass
class Place:
    """A repository's main work tree, its state directory and the runs and branches in it."""

    root: Path
    state_dir: Path
    store: RunStore
    git: AgentBranches

    @property
    def worktrees_dir(self) -> Path:
        """Where the agent makes its worktrees (real path)."""
        return Path(os.path.realpath(self.state_dir / "worktrees"))


def open_place(repo: Path | None) -> Place:
    """The repository holding `repo` (its main work tree, even from one of its worktrees)."""
    from agent_cli.cli.shared import find_repo, run_store, settings_for
    from agent_cli.workspace.git.branches import AgentBranches
    from agent_cli.workspace.git.worktree import main_work_tree

    root = main_work_tree(find_repo(repo))
    settings = settings_for(root)
    secrets = settings.secrets()
    state_dir = settings.state_dir(root)
    store = run_store(state_dir, root, secrets)
    return Place(root, state_dir, store, AgentBranches(root, secrets))


# -- agent rewind -----------------------------------------------------------------------


def rewind_command(
    run_id: str = typer.Argument(..., metavar="RUN-ID", help="The run to rewind (`agent runs`)."),
    to_task: int | None = typer.Option(
        None,
        "--to-task",
        metavar="N",
        min=0,
        help="Keep tasks 1..N and their commits (default: none, back to the run's base).",
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do it without asking."),
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
) -> None:
    """Move a run's branch back to a task's commit; `agent run --resume` redoes the rest."""
    place = open_place(repo)
    try:
        rewind(place, run_id, to_task, yes)
    finally:
        place.git.close()


def live_holders(state_dir: Path, repo: str = "") -> list[dict[str, Any]]:
    """The live run locks under `state_dir`, of the repository `repo` when given
    (`agent.run.live.live_holders`)."""
    from agent_cli.agent.run.live import live_holders as holders

    return holders(state_dir, repo)


def rewind(place: Place, run_id: str, to_task: int | None, yes: bool) -> None:
    """Rewind run `run_id` to task `to_task` (None: its base), or raise why not."""
    from agent_cli.agent.run import rewind as rewinding
    from agent_cli.agent.run.store import checked_run_id
    from agent_cli.core.errors import AgentError, UsageError

    try:
        record = place.store.load(checked_run_id(run_id))
    except AgentError:
        if run_id in never_started(place, _live(place)):
            raise UsageError(
                f"run {run_id} was stopped before it saved anything: there is nothing of it "
                "to rewind",
                "`agent clean` removes what it left (its branch, its worktree, its folder)",
            ) from None
        raise
    rewinding.target(record, to_task)  # a bad --to-task is said before anything else
    with _kept_from_resuming(place, record):
        _rewind(place, place.store.load(record.run_id), to_task, yes)


@contextmanager
def _kept_from_resuming(place: Place, record: RunRecord) -> Iterator[None]:
    """Hold the locks a resume of `record` takes, in the order it takes them, or refuse when
    its run is in progress: first the run's own (`worktree.run_lock`, which every resume takes
    as soon as it has chosen the run, before it reads it), then, for a run in the user's
    checkout, the checkout's, which a resume takes only later. A resume and a rewind that
    start together meet at the first: the second of them is refused, with nothing written.

    The checkout's lock, held by another named run, holds nothing more off (the run's own
    lock does). A run starting in the checkout, or in another work tree of the user's (`git
    worktree add`) under that tree's lock, has no id yet: it holds the rewind off too."""
    from agent_cli.agent.run.live import checkout_lock
    from agent_cli.cli.worktree import run_lock
    from agent_cli.core.errors import WorkspaceError
    from agent_cli.workspace.lock import RunLock

    for holder in live_holders(place.state_dir, place.store.repo):
        if holder["run_id"] == record.run_id:
            raise _in_progress(record, holder)
        if holder["run_id"] is None and not record.worktree:
            raise _may_be_starting(record, holder, "holds a run lock")
    own = run_lock(place.state_dir, record.run_id, place.store.repo)
    checkout = RunLock(checkout_lock(place.state_dir, place.root), repo=place.store.repo)
    try:
        try:
            own.acquire()  # a storage error (a read-only state directory) is said as it is
        except WorkspaceError:
            raise _in_progress(record, own.holder() or {}) from None
        own.name(record.run_id)
        if not record.worktree:
            _hold_checkout(checkout, record)
        yield
    finally:
        checkout.release()  # nothing when it was not taken
        own.release()


def _hold_checkout(lock: RunLock, record: RunRecord) -> None:
    """Take the checkout's `lock` for the rewind of `record`, a run in the checkout; leave it
    to another named run that holds it; refuse while a run with no id yet holds it (or one
    named `record`'s, as a new run in the checkout names its lock)."""
    from agent_cli.core.errors import WorkspaceError

    try:
        lock.acquire()
    except WorkspaceError:
        holder = lock.holder() or {}
        if holder.get("run_id") in (None, record.run_id):
            raise _may_be_starting(record, holder, f"holds {lock.path}") from None
        return
    lock.name(record.run_id)  # a rewind, not a run starting (which could be any run's resume)


def _in_progress(record: RunRecord, holder: dict[str, Any]) -> AgentError:
    """The refusal of a rewind while `record`'s run, or its resume, holds its lock."""
    from agent_cli.core.errors import WorkspaceError

    return WorkspaceError(
        f"run {record.run_id} is in progress (pid {holder.get('pid', '?')}); nothing was changed",
        "rewind it once it has stopped",
    )


def _may_be_starting(record: RunRecord, holder: dict[str, Any], holds: str) -> AgentError:
    """The refusal of a rewind while a run that could be `record`'s resume starts."""
    from agent_cli.core.errors import WorkspaceError

    return WorkspaceError(
        f"run {record.run_id} may be starting (pid {holder.get('pid', '?')} {holds}); "
        "nothing was changed",
        "rewind it once that run has its id (`agent runs`) or has stopped",
    )


def _rewind(place: Place, record: RunRecord, to_task: int | None, yes: bool) -> None:
    """Rewind `record`, its resume held off: the checks, the confirmation, the move, the state."""
    from agent_cli.agent.run import rewind as rewinding
    from agent_cli.agent.run.resumed import saved_state
    from agent_cli.core.errors import AgentError, UsageError, WorkspaceError
    from agent_cli.core.text import shorten
    from agent_cli.workspace.git.worktree import is_linked_tree

    place.git.forget_missing(place.worktrees_dir)  # a deleted worktree holds nothing
    if record.worktree:  # its tree moved with the checkout: git is told where it is now
        _relink(place, {record.run_id: record.worktree})
    branch = record.branch  # the store holds it to be agent/<id>
    goal = rewinding.target(record, to_task)
    tip = place.git.tip(branch)
    if tip is None:
        raise AgentError(
            f"the run's branch {branch} no longer exists; nothing was changed",
            "start a new run with `agent run GOAL`",
        )
    tree = place.git.checked_out(branch)
    if tree is not None and tree.main:
        raise WorkspaceError(
            f"{branch} is checked out in your work tree {tree.path}; nothing was changed",
            "switch to another branch first (git switch -), then rewind",
        )
    if tree is not None and tree.path.parent != place.worktrees_dir:
        raise WorkspaceError(
            f"{branch} is checked out in {tree.path}, a work tree the agent did not make; "
            "nothing was changed",
            "remove that work tree or switch it to another branch "
            f"(git -C {shlex.quote(str(tree.path))} switch -)",
        )
    if tree is not None and not tree.path.exists():  # forget_missing left it: locked
        raise WorkspaceError(
            f"{branch} is checked out in the run's worktree {tree.path}, which is locked and "
            "not here; nothing was changed",
            f"bring it back (mount its drive), or forget it (git worktree remove -f -f "
            f"{shlex.quote(str(tree.path))}), then rewind",
        )
    if tree is not None and not is_linked_tree(tree.path, place.root):
        raise WorkspaceError(
            f"the run's worktree {tree.path} {_STRAY}; nothing was changed",
            f"move it aside ({_aside(tree.path)}), then rewind: git forgets a worktree whose "
            f"folder is gone, and a resume makes it again from {branch}",
        )
    merged = merged_into(place.git, tip, record)
    if merged and tip != record.base:
        raise AgentError(
            f"run {record.run_id} is merged: {branch} is part of {merged}, so moving it back "
            "would undo nothing there; nothing was changed",
            f"undo the merge on {merged} with git itself (git revert), if that is what you want",
        )
    if not place.git.is_ancestor(goal.commit, tip):
        raise AgentError(
            f"{goal.commit[:12]} ({goal.label}) is not on {branch} any more; nothing was changed",
            f"look at the branch with git log {branch}",
        )
    state = saved_state(record)
    own = {t.commit for t in state.plan if t.commit}  # what its tasks committed
    if state.committing is not None:  # killed between a task's commit and the save after it:
        own.add(tip)  # the tip is that commit, as a resume takes it (if it has the trailer)
    foreign = place.git.foreign_commits(branch, goal.commit, f"Agent-Run: {record.run_id}", own)
    if foreign:
        sha, subject = foreign[0]
        more = f" and {len(foreign) - 1} more" if len(foreign) > 1 else ""
        raise AgentError(
            f"{branch} holds commits run {record.run_id} did not make and no other branch has "
            f"({sha[:12]} {shorten(subject, 60)!r}{more}): moving it back would lose them; "
            "nothing was changed",
            f"keep them on a branch of your own first (git branch KEEP {tip[:12]}), then rewind",
        )
    if tree is not None and not place.git.clean(tree.path):
        raise WorkspaceError(
            f"the run's worktree {tree.path} holds uncommitted work; nothing was changed",
            "commit or discard it there (or remove it with `agent clean --force`), then rewind",
        )
    question = (
        f"move {branch} from {tip[:12]} back to {goal.commit[:12]} ({goal.label}) and set "
        f"{goal.forgotten} task(s) pending again?"
    )
    if not yes:
        from agent_cli.ui.console import can_ask, confirmed

        if not can_ask():
            raise UsageError(
                f"rewinding run {record.run_id} needs a confirmation and there is no terminal "
                "to ask on; nothing was changed",
                "pass --yes to rewind without asking",
            )
        if not confirmed(question):
            raise AgentError("not confirmed; nothing was changed", "run again and answer y")
    if tree is not None:
        place.git.reset_worktree(tree.path, branch, goal.commit, tip)
    else:
        place.git.move(branch, goal.commit, tip)
    try:
        rewinding.record_rewind(place.store, record, goal, tip)
    except AgentError:
        if tree is None:
            place.git.move(branch, tip, goal.commit)  # the state could not follow: undo
        raise
    print(
        f"rewound run {record.run_id}: {branch} is at {goal.commit[:12]} ({goal.label}); "
        f"{goal.forgotten} task(s) pending again"
    )
    nxt = f"task {goal.keep + 1}" if goal.forgotten else "its end"
    print(f"`agent run --resume --run-id {record.run_id}` continues from {nxt}")


def _relink(place: Place, recorded: dict[str, str]) -> None:
    """Tell git where the worktree of each run (its id: the path its state recorded) is now,
    when it moved with the checkout."""
    from agent_cli.cli.worktree import now_at, relink
    from agent_cli.workspace.git.worktree import Worktrees

    known = {t.path for t in place.git.worktrees()}
    moved = {}
    for run_id, path in recorded.items():
        now = now_at(place.state_dir, run_id, path)
        if now == Path(path):
            continue  # where it was recorded (or gone from there, and not moved)
        try:
            if Path(os.path.realpath(path)) not in known:
                continue  # git knows it where it is now, or knows it nowhere
        except ValueError:  # a state file edited by hand: no path
            continue
        moved[run_id] = path
    if not moved:
        return
    trees = Worktrees(place.root, place.git.secrets)
    try:
        for run_id, path in moved.items():
            relink(trees, place.state_dir, run_id, path)
    finally:
        trees.close()


def merged_into(git: AgentBranches, tip: str, record: RunRecord | None) -> str | None:
    """The user's branch that has `tip` in it: the run's base branch, or the one checked out
    in the main work tree (None when neither has it, or neither is the user's)."""
    candidates = []
    if record is not None and record.base_branch:
        candidates.append(record.base_branch)
    trees = git.worktrees()
    if trees and trees[0].branch:
        candidates.append(trees[0].branch)
    for name in dict.fromkeys(candidates):
        if name.startswith("agent/") or git.tip(name) is None:
            continue
        if git.is_ancestor(tip, f"refs/heads/{name}"):
            return name
    return None


# -- agent clean ------------------------------------------------------------------------


def clean_command(
    branches: bool = typer.Option(
        False,
        "--branches",
        help="Also delete the branches of finished runs merged into your branch.",
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Also remove worktrees holding uncommitted work (a rejected task's) "
        "or an unfinished run.",
    ),
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
) -> None:
    """Remove the worktrees of finished runs (and with --branches, their merged branches)."""
    place = open_place(repo)
    try:
        done = clean(place, branches, force)
    finally:
        place.git.close()
    print("\n".join(done) if done else "nothing to clean")


def clean(place: Place, branches: bool, force: bool) -> list[str]:
    """Remove what may go; one line for each thing removed or kept.

    What is live is looked at first, and each run's lock again right before anything of it
    is removed (`_held_off`): a run started or resumed meanwhile is left alone."""
    live = _live(place)
    unsaved = never_started(place, live)
    recorded = {str(r["run_id"]): r.get("worktree") for r in place.store.list()}
    _relink(
        place, {i: p for i, p in recorded.items() if isinstance(p, str) and p and i not in live}
    )
    place.git.forget_missing(place.worktrees_dir)
    said = []
    for tree in place.git.worktrees():
        if tree.main or tree.path.parent != place.worktrees_dir:
            continue  # only the agent's own worktrees
        run_id = (tree.branch or "").removeprefix("agent/") or tree.path.name
        if run_id in live:
            said.append(f"kept {tree.path}: run {run_id} is in progress")
            continue
        with _held_off(place, run_id) as busy:
            said.append(
                f"kept {tree.path}: {busy}" if busy else _clean_tree(place, tree, run_id, force)
            )
    said += [line for run_id in unsaved if (line := _forget_unsaved(place, run_id))]
    if branches:
        said += _clean_branches(place, live)
    return said


def _clean_tree(place: Place, tree: Worktree, run_id: str, force: bool) -> str:
    """Remove the agent's worktree `tree`, of run `run_id` (held off), when it may go; what
    was done."""
    from agent_cli.core.errors import GitError
    from agent_cli.workspace.git.worktree import is_linked_tree

    if not tree.path.exists():  # forget_missing left it: locked, on a drive not here now
        return f"kept {tree.path}: it is locked and not here (git worktree unlock)"
    if not is_linked_tree(tree.path, place.root):  # even with --force: it is not git's to remove
        return (
            f"kept {tree.path}: it {_STRAY}; move it aside ({_aside(tree.path)}) and agent "
            "clean forgets it"
        )
    if tree.branch is None and tree.head and not place.git.on_a_ref(tree.head):
        return (
            f"kept {tree.path}: its detached HEAD holds commits no branch has (keep them: "
            f"git -C {shlex.quote(str(tree.path))} switch -c NAME)"
        )  # even with --force: removing the tree would lose them
    why_kept = _why_kept(place, tree.path, run_id)
    if why_kept and not force:
        return f"kept {tree.path}: {why_kept} (--force removes it)"
    try:
        place.git.remove_worktree(tree.path, force=bool(why_kept))
    except GitError as e:  # locked, or holding a submodule: git says why; the rest go on
        return f"kept {tree.path}: {' '.join(e.message.split())}"
    return f"removed worktree {tree.path}" + (f" ({why_kept})" if why_kept else "")


_STRAY = (
    "is no longer a git work tree of this repository (emptied, or its files replaced, by "
    "hand), and what it holds may be yours"
)


def _aside(path: Path) -> str:
    """The command that moves the folder `path` out of the way, for the user to finish."""
    return f"mv {shlex.quote(str(path))} ELSEWHERE"


def _held_off(place: Place, run_id: str) -> AbstractContextManager[str]:
    """Keep run `run_id` from going while clean acts on what it has (`worktree.held_off`): its
    own lock held meanwhile, or why it is live now."""
    from agent_cli.cli.worktree import held_off, run_lock

    return held_off(run_lock(place.state_dir, run_id, place.store.repo), place.state_dir, run_id)


def _live(place: Place) -> set[str | None]:
    """The ids of the runs holding a lock under the state directory (None: one starting)."""
    return {h["run_id"] for h in live_holders(place.state_dir)}


def never_started(place: Place, live: set[str | None]) -> list[str]:
    """The runs of this repository stopped before their first save (killed outright while
    planning, say): a folder under runs/ with no state.json and no live lock, for which this
    repository has the branch agent/<id> or the worktree, or whose lock names it. None while
    a run without an id yet holds a lock: it is starting, and its folder may be one of these."""
    runs = place.store.root
    if None in live or not runs.is_dir():
        return []
    branches = place.git.agent_branches()
    trees = {t.path.name for t in place.git.worktrees() if t.path.parent == place.worktrees_dir}
    found = []
    for folder in sorted(runs.iterdir()):
        run_id = folder.name
        if run_id in live or folder.is_symlink() or not folder.is_dir():
            continue
        if (folder / "state.json").exists() or (folder / "state.json").is_symlink():
            continue
        if f"agent/{run_id}" in branches or run_id in trees or _lock_names(folder, place.root):
            found.append(run_id)
    return found


def _lock_names(folder: Path, root: Path) -> bool:
    """Whether the run lock left in `folder` names the repository `root` (a shared home)."""
    from agent_cli.workspace.lock import RunLock

    holder = RunLock(folder / "run.lock").holder() or {}
    return holder.get("repo") == str(root.resolve())


def _forget_unsaved(place: Place, run_id: str) -> str:
    """Remove what run `run_id`, stopped before its first save, left (its branch when no work
    tree is on it and your branch has its tip, then its folder), or say what to do first;
    nothing of a run that is live now, or that has saved meanwhile."""
    folder = place.store.run_dir(run_id)
    with _held_off(place, run_id) as busy:
        if busy:
            return f"kept {folder}: {busy}"
        starting = [h for h in live_holders(place.state_dir) if h["run_id"] is None]
        if starting:
            return (
                f"kept {folder}: a run with no id yet is starting (pid "
                f"{starting[0].get('pid', '?')}), and it may be that run's"
            )
        state = folder / "state.json"
        if state.exists() or state.is_symlink():
            return ""  # saved since clean looked: a run like any other
        return _forget(place, run_id)


def _forget(place: Place, run_id: str) -> str:
    """Remove what run `run_id` left, held off (`_forget_unsaved`)."""
    import shutil

    from agent_cli.core.errors import GitError

    why = f"run {run_id} was stopped before it saved anything"
    branch, deleted = f"agent/{run_id}", ""
    tip = place.git.tip(branch)
    if tip is not None:
        tree = place.git.checked_out(branch)
        if tree is not None:
            if tree.path.parent == place.worktrees_dir:
                return ""  # its own worktree, kept above with the reason
            return (
                f"kept branch {branch}: {why}, and {tree.path} is on it; switch that work tree "
                f"to your branch (git -C {shlex.quote(str(tree.path))} switch BRANCH), then run "
                "agent clean again"
            )
        into = merged_into(place.git, tip, None)
        if into is None:
            return (
                f"kept branch {branch}: {why}, and your branch does not have its tip; merge "
                f"it or delete it (git branch -D {branch}), then run agent clean again"
            )
        try:
            place.git.delete(branch, tip)
        except GitError as e:
            return f"kept branch {branch}: {' '.join(e.message.split())}"
        deleted = f" and deleted branch {branch} (merged into {into})"
    folder = place.store.run_dir(run_id)
    shutil.rmtree(folder, ignore_errors=True)
    return f"removed {folder}{deleted}: {why}"


def _why_kept(place: Place, tree: Path, run_id: str) -> str:
    """Why the worktree of `run_id` is not simply removed ("" when it may go)."""
    dirty = not place.git.clean(tree)
    found = _progress(place, run_id)
    if found is None:
        return "it holds uncommitted work" if dirty else ""
    rejected = [n for n, status in enumerate(found[1], 1) if status == "rejected"]
    if dirty:
        which = f" of rejected task {rejected[0]}" if rejected else ""
        return f"it holds the uncommitted work{which}"
    return _unfinished(found, run_id)


def _progress(place: Place, run_id: str) -> tuple[RunRecord, list[str]] | None:
    """Run `run_id` and the status of each of its tasks; None when this repository has no
    such run (or its state cannot be read)."""
    from agent_cli.agent.run.state import AgentState
    from agent_cli.core.errors import AgentError

    try:
        record = place.store.load(run_id)
        return record, [t.status for t in AgentState.from_dict(record.agent_state).plan]
    except (AgentError, ValueError):
        return None


def _unfinished(found: tuple[RunRecord, list[str]], run_id: str) -> str:
    """Why run `run_id` (its record, its tasks' statuses) is still needed ("" when it ended with
    every task settled: a run whose final check failed after its tasks passed is not finished)."""
    from agent_cli.agent.run.store import FINISHED
    from agent_cli.core.models import SETTLED

    record, plan = found
    if record.status in FINISHED and plan and all(task in SETTLED for task in plan):
        return ""
    return f"run {run_id} is not finished (`agent run --resume --run-id {run_id}`)"


def _clean_branches(place: Place, live: set[str | None]) -> list[str]:
    """Delete the branch of each finished run of this repository that is merged into the
    user's branch, not checked out and not live. An agent/* branch no run of ours owns (one
    the user made, or another checkout's) is never the agent's to delete, nor is the branch of
    a run that can still be resumed: its tip may sit at the base with nothing committed yet."""
    checked = {t.branch for t in place.git.worktrees()}
    said = []
    for branch, tip in sorted(place.git.agent_branches().items()):
        run_id = branch.removeprefix("agent/")
        if branch in checked or run_id in live:
            continue
        found = _progress(place, run_id)
        if found is None:
            continue
        into = merged_into(place.git, tip, found[0])
        if not into:
            continue
        with _held_off(place, run_id) as busy:
            said.append(
                f"kept branch {branch}: {busy}" if busy else _delete(place, branch, tip, into)
            )
    return said


def _delete(place: Place, branch: str, tip: str, into: str) -> str:
    """Delete the merged branch of a finished run, held off, at the tip it was seen at; kept
    when the run is not finished now (resumed and stopped since clean looked)."""
    from agent_cli.core.errors import GitError

    run_id = branch.removeprefix("agent/")
    found = _progress(place, run_id)
    why_kept = "its state cannot be read now" if found is None else _unfinished(found, run_id)
    if why_kept:
        return f"kept branch {branch}: {why_kept}"
    try:
        place.git.delete(branch, tip)
    except GitError as e:  # moved meanwhile, or its ref locked: git says why; the rest go on
        return f"kept branch {branch}: {' '.join(e.message.split())}"
    return f"deleted branch {branch} (merged into {into})"


def register(app: typer.Typer) -> None:
    """Add `rewind` and `clean` to the main app."""
    app.command("rewind", cls=Command, short_help="Move a run's branch back to a task.")(
        rewind_command
    )
    app.command("clean", cls=Command, short_help="Remove finished worktrees and merged branches.")(
        clean_command
    )
