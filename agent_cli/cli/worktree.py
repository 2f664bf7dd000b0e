"""A run in a worktree of its own: where it goes, its lock, and what is left of it at the end.

A worktree run works in `<state>/worktrees/<run-id>` (a linked work tree of the user's
repository, made from the user's HEAD) on its branch `agent/<run-id>`, so the user's
checkout (HEAD, index, work tree, stash) is never touched. Its state, trajectory and lock
stay in the main repository's state directory (`<state>/runs/<run-id>/`, the lock
`run.lock` there), so `agent runs` lists every run and long-term memory stays the
repository's. Its tree is removed at the end when every task is verified and committed;
otherwise it is kept for the human, and named.
"""

from __future__ import annotations

import contextlib
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from agent_cli.agent.run.live import checkout_lock, live_ids
from agent_cli.agent.run.store import FINISHED, RunStore, claim_run_id
from agent_cli.core.errors import AgentError, GitError, UsageError, WorkspaceError
from agent_cli.core.events import Event, Notice, RunDone
from agent_cli.core.protocols import Console
from agent_cli.core.text import readable, some
from agent_cli.workspace.git import repository
from agent_cli.workspace.git.branches import AgentBranches
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.git.worktree import Worktrees, main_work_tree
from agent_cli.workspace.lock import RunLock, live_holder

WORKTREES = "worktrees"  # under the state directory
FINISHED_CLEAN = ("verified", "nothing_to_do")


@dataclass(frozen=True)
class WorktreePlace:
    """Where a worktree run works, and what it starts from."""

    run_id: str
    path: Path
    base_branch: str  # the user's branch the run started from
    repo: Path  # the user's checkout
    created: bool  # made now for a new run (gone again if the run never starts)
    # a new run's own lock, taken before its tree is made so that no `agent clean` takes the
    # tree for a finished run's while the run starts; the run holds it from then on
    lock: RunLock | None = field(default=None, compare=False)


def worktree_path(state_dir: Path, run_id: str) -> Path:
    """Where run `run_id` works when it is a worktree run."""
    return state_dir / WORKTREES / run_id


def run_lock(state_dir: Path, run_id: str, repo: str = "") -> RunLock:
    """The lock of one worktree run of repository `repo` (a run in the user's checkout holds
    `live.checkout_lock`)."""
    return RunLock(state_dir / "runs" / run_id / "run.lock", repo=repo)


def check_flags(worktree: bool, allow_dirty: bool, resume: bool) -> None:
    """Refuse the flags that do not go with --worktree."""
    if worktree and allow_dirty:
        raise UsageError(
            "--allow-dirty does not go with --worktree: a worktree starts from your HEAD "
            "without your uncommitted changes",
            "commit the changes the run needs, or run without --worktree",
        )
    if worktree and resume:
        raise UsageError(
            "--worktree starts a new run: a worktree run resumes in its worktree by itself",
            "agent run --resume --run-id ID",
        )


def place_for(
    repo: Path,
    state_dir: Path,
    *,
    worktree: bool,
    auto: bool,
    resume: bool,
    run_id: str | None,
    plan_only: bool,
    allow_dirty: bool,
    console: Console,
    checkout: RunLock | None = None,
) -> WorktreePlace | None:
    """The worktree the run works in, made or found again; None for a run in the checkout.

    With `auto`, a new run takes the `checkout` lock (the lock of a run in the checkout, which
    the caller then holds for the run) right here, and goes to a worktree when another run
    holds it: checked now and taken later, two runs started together could both find the
    checkout free, and the second be refused where it should have gone to a worktree."""
    if plan_only:
        return None  # a plan changes nothing, so it is made where the user is
    if resume:
        return _resumed(repo, state_dir, run_id, console)
    _not_in_a_runs_tree(repo, state_dir)
    if not worktree and not (auto and not allow_dirty and not _claimed(repo, state_dir, checkout)):
        return None
    if not worktree:
        console.emit(
            Notice(
                text="another run holds this checkout: this run works in a worktree of its "
                'own (worktree = "auto")'
            )
        )
    return _new(repo, state_dir, console)


def check_new(repo: Path, state_dir: Path) -> None:
    """Refuse what would refuse every new worktree run from `repo` (a batch says it once,
    before any starts): the worktree of another run, and a repository no run works in (no
    commit yet, a detached HEAD, a merge or rebase in progress, no identity to commit as)."""
    _not_in_a_runs_tree(repo, state_dir)
    main = GitRepo(repo)
    try:
        main.preflight(allow_dirty=True)  # the user's changes stay behind, as each run says
    finally:
        main.close()


def check_identity(tree: Path, secrets: tuple[str, ...] = ()) -> None:
    """Refuse a new run in the worktree `tree` when git has no identity there to commit its
    work under: the checkout's was checked, but config git gives only to some branches
    (`[includeIf "onbranch:main"]`) does not reach the run's tree and branch."""
    try:
        repository.check_identity(tree, secrets)
    except GitError as e:
        if not e.message.startswith("git has no identity"):
            raise
        raise GitError(
            "git has no identity to commit the agent's work under in the run's worktree: "
            "user.name and user.email are not set there (an identity your git config gives "
            'only to some branches, as [includeIf "onbranch:..."], does not reach it)',
            'set it for the repository (git config user.email "you@example.com" && '
            'git config user.name "Your Name"), or for all of git with --global',
        ) from None


def _not_in_a_runs_tree(repo: Path, state_dir: Path) -> None:
    """Refuse a new run inside another run's worktree: that tree is the other run's to work in
    (and to remove once it is done)."""
    trees = (state_dir / WORKTREES).resolve()
    here = repo.resolve()
    if trees not in here.parents:
        return
    run_id = here.relative_to(trees).parts[0]
    raise UsageError(
        f"{here} is the worktree of run {run_id}; a new run does not start inside it",
        f"start it from your checkout {main_work_tree(repo)} (--worktree works beside it), or go "
        f"on with this one: agent run --resume --run-id {run_id}",
    )


def _claimed(repo: Path, state_dir: Path, checkout: RunLock | None) -> bool:
    """Take the checkout's lock for this run; False when another run holds it."""
    lock = checkout or RunLock(checkout_lock(state_dir, repo))
    main = GitRepo(repo)
    try:
        main.exclude_state(state_dir)  # the lock file must not make the checkout look changed
    finally:
        main.close()
    try:
        lock.acquire() if checkout is not None else lock.check()
    except WorkspaceError:
        return False
    return True


def _new(repo: Path, state_dir: Path, console: Console) -> WorktreePlace:
    """A fresh worktree at the user's HEAD; says so when the user's changes stay behind."""
    main = GitRepo(repo)
    try:
        main.exclude_state(state_dir)  # the worktrees live inside it
        dirty = main.preflight(allow_dirty=True)
        head, branch = main.head(), main.current_branch() or ""
    finally:
        main.close()
    head, branch = _users_head(main.root, state_dir, head, branch)
    if dirty:
        shown = some(sorted(readable(p) for p in dirty), 3)  # a name may not be UTF-8
        console.emit(
            Notice(
                text=f"your uncommitted changes ({shown}) are not in the worktree: "
                f"the run works from {branch} at {head[:12]}"
            )
        )
    run_id = claim_run_id(state_dir / "runs")
    path = worktree_path(state_dir, run_id)
    lock = run_lock(state_dir, run_id, str(main_work_tree(repo).resolve()))  # as run_store has it
    lock.acquire()
    lock.name(run_id)
    trees = Worktrees(main.root)
    try:
        trees.add(path, head)
    except BaseException:
        _release(lock, state_dir / "runs" / run_id)
        raise
    finally:
        trees.close()
    return WorktreePlace(run_id, path, branch, main.root, created=True, lock=lock)


def _users_head(root: Path, state_dir: Path, head: str, branch: str) -> tuple[str, str]:
    """Where a new worktree run starts: the checkout's HEAD, but when that is the branch of the
    run going in the checkout (worktree = "auto" is why this run is not there), the branch that
    run started from: the user's, not another run's work in progress."""
    holder = live_holder(checkout_lock(state_dir, root)) or {}
    run_id = holder.get("run_id")
    if not isinstance(run_id, str) or branch != f"agent/{run_id}":
        return head, branch
    try:
        base = RunStore(state_dir, repo=str(root.resolve())).load(run_id).base_branch
    except AgentError:
        return head, branch
    branches = AgentBranches(root)
    try:
        tip = branches.tip(base) if base and not base.startswith("agent/") else None
    finally:
        branches.close()
    return (tip, base) if tip else (head, branch)


def _release(lock: RunLock, run_dir: Path) -> None:
    """Give up a new run's lock, and its directory when nothing else is in it."""
    lock.release()
    if run_dir.is_dir() and not any(run_dir.iterdir()):
        run_dir.rmdir()


def _resumed(
    repo: Path, state_dir: Path, run_id: str | None, console: Console
) -> WorktreePlace | None:
    """The worktree of the run to resume (made again from its branch when it was removed)."""
    store = RunStore(state_dir, repo=str(main_work_tree(repo).resolve()))  # as wiring.run_store
    try:
        record = store.load(store.target(run_id, live_ids(state_dir)))
    except AgentError:
        return None  # said in its turn, after the lock is checked
    if not record.worktree:
        return None
    path = now_at(state_dir, record.run_id, record.worktree)
    main = GitRepo(repo)
    main.close()
    trees = Worktrees(main.root)
    try:
        if not trees.listed(path):
            run_lock(state_dir, record.run_id).check()  # a run in progress keeps its tree
            relink(trees, state_dir, record.run_id, record.worktree)
        if not trees.listed(path):
            trees.restore(path, record.branch)
            console.emit(
                Notice(text=f"the run's worktree {path} is made again from {record.branch}")
            )
    finally:
        trees.close()
    return WorktreePlace(record.run_id, path, record.base_branch, trees.root, created=False)


def now_at(state_dir: Path, run_id: str, recorded: str) -> Path:
    """Where the worktree of run `run_id`, recorded at `recorded`, is: there, or, when that
    folder is gone, in the state directory as it is now (a checkout moved or renamed takes its
    state directory and the worktrees in it along)."""
    was = Path(recorded)
    return was if was.is_dir() else worktree_path(state_dir, run_id)


def relink(trees: Worktrees, state_dir: Path, run_id: str, recorded: str) -> None:
    """Tell git where the worktree of run `run_id` is now, when it moved with its checkout
    (or forget it at the recorded place when it is gone from both)."""
    path = now_at(state_dir, run_id, recorded)
    if path != Path(recorded):
        trees.relink(path, Path(recorded))


def forget_unstarted(place: WorktreePlace | None, state_dir: Path, fresh: bool = False) -> None:
    """Remove the tree made for a run that never started (nothing of it was saved), and give
    up the lock taken for it (the run's own `with lock` gave it up already when it ran);
    `fresh`: this run made the state directory, so the folders it made for the tree go too
    when nothing else is in them (a refused run leaves no `.agent/`)."""
    if place is None or not place.created:
        return
    run_dir = state_dir / "runs" / place.run_id
    lock = place.lock or run_lock(state_dir, place.run_id)
    if (run_dir / "state.json").exists():
        lock.release()
        return
    trees = Worktrees(place.repo)
    try:
        trees.remove(place.path, force=True)
    except AgentError:
        shutil.rmtree(place.path, ignore_errors=True)
    finally:
        trees.close()
    _release(lock, run_dir)
    for made in (state_dir / WORKTREES, state_dir / "runs") if fresh else ():
        with contextlib.suppress(OSError):  # not empty: another run's are in it
            made.rmdir()


def settle(place: WorktreePlace, ev: RunDone) -> str:
    """Remove the tree of a run whose every task is verified and committed; say where the
    work is."""
    branch, base = ev.branch or f"agent/{place.run_id}", place.base_branch or "<your branch>"
    take = f"review it with git diff {base}...{branch}, take it with git merge {branch}"
    trees = Worktrees(place.repo)
    try:
        clean = trees.is_clean(place.path)
        if ev.status in FINISHED_CLEAN and clean:
            trees.remove(place.path)
            return f"the work is on {branch} (its worktree is removed): {take}"
    except AgentError as e:
        return (
            f"the worktree {place.path} is kept ({e.one_line()}); the work is on {branch}: {take}"
        )
    finally:
        trees.close()
    why = "it holds uncommitted work for you" if not clean else f"the run is {ev.status}"
    kept = f"the worktree {place.path} is kept ({why}); the work so far is on {branch}: {take}"
    if ev.status in FINISHED:  # a skipped task's changes: nothing is left to resume
        return f"{kept}; the run is finished: what it left uncommitted there is yours to finish"
    return f"{kept}; continue with agent run --resume --run-id {place.run_id}"


def settled(place: WorktreePlace, ev: Event) -> tuple[Event, ...]:
    """What a worktree run's console says before its `run_done`: where its work is."""
    if isinstance(ev, RunDone) and ev.run_id == place.run_id:
        return (Notice(text=settle(place, ev)),)
    return ()


def readonly_state(state_dir: Path, root: Path) -> list[Path]:
    """What of the state directory a sandboxed command may not change: all of it, but the
    worktree it runs in when that lies inside it."""
    state_dir, root = state_dir.resolve(), root.resolve()
    if state_dir not in root.parents:
        return [state_dir]
    return [p for p in sorted(state_dir.glob("*")) if p.name != WORKTREES]
