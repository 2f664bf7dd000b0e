"""A run in a worktree of its own: where it goes, its lock, and what is left of it at the end.

A worktree run works in `<state>/worktrees/<run-id>` (a linked work tree of the user's
repository, made from the user's HEAD) on its branch `agent/<run-id>`, so the user's
checkout (HEAD, index, work tree, stash) is never touched. Its state, trajectory and lock
stay in the main repository's state directory (`<state>/runs/<run-id>/`, the lock
`run.lock` there), so `agent runs` lists every run and long-term memory stays the
repository's. Its tree is removed at the end when every task is verified and committed;
otherwise it is kept for the human, and named.

Every run, in a worktree or not, also has that lock of its own while anything acts on it: a
resume takes it as soon as it has chosen the run, before it reads the run's state, `agent
rewind` before it moves the run's branch (and then, for a run in the checkout, the checkout's
lock, as a resume takes both in that order), and `agent clean` while it removes what the run
left (`held_off`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from agent_cli.agent.run.live import checkout_lock, live_holders, live_ids
from agent_cli.agent.run.store import FINISHED, RunRecord, RunStore, claim_run_id
from agent_cli.core.errors import AgentError, GitError, StorageError, UsageError, WorkspaceError
from agent_cli.core.events import Event, Notice, RunDone
from agent_cli.core.protocols import Console
from agent_cli.core.text import readable, some
from agent_cli.workspace.git import repository
from agent_cli.workspace.git.branches import AgentBranches
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.git.worktree import Worktrees, is_linked_tree, main_work_tree
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
    # the run's own lock: a new run's, taken before its tree is made so that no `agent clean`
    # takes the tree for a finished run's while the run starts, or the one a resume holds
    # (`resuming`); the run holds it from then on
    lock: RunLock | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Resumed:
    """The run a resume goes on with, read while `lock`, its own, is held (`resuming`)."""

    record: RunRecord
    lock: RunLock = field(compare=False)


def worktree_path(state_dir: Path, run_id: str) -> Path:
    """Where run `run_id` works when it is a worktree run."""
    return state_dir / WORKTREES / run_id


def run_lock(state_dir: Path, run_id: str, repo: str = "") -> RunLock:
    """The own lock of run `run_id` of repository `repo`: a worktree run holds it for its
    whole run, a resume of any run from before it reads the run, `agent rewind` while it moves
    the run's branch back, and `agent clean` while it removes what the run left (`held_off`);
    a run in the user's checkout holds `live.checkout_lock` too."""
    return RunLock(state_dir / "runs" / run_id / "run.lock", repo=repo)


@contextlib.contextmanager
def held_off(lock: RunLock, state_dir: Path, run_id: str) -> Iterator[str]:
    """Keep run `run_id` from going on while the caller acts on what it has: its own `lock`
    (`run_lock`: the one a worktree run takes before its tree is made and holds to its end,
    and every resume takes before it reads the run) is held meanwhile. Yields "" then, or why
    the run is live now, holding nothing: its lock is held, or the checkout's lock names it (a
    run in the checkout). A folder made for the lock alone (the run is gone) goes with it."""
    named = [h for h in live_holders(state_dir, lock.repo) if h["run_id"] == run_id]
    folder = lock.path.parent
    made = not folder.exists()
    try:
        if named:
            yield f"run {run_id} is in progress (pid {named[0].get('pid', '?')})"
        else:
            yield _taken(lock, run_id)
    finally:
        lock.release()  # nothing when it was not taken, or the run gave it up already
        if made and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()


def _taken(lock: RunLock, run_id: str) -> str:
    """Take run `run_id`'s `lock`: "", or why it cannot be taken."""
    try:
        lock.acquire()
    except WorkspaceError:  # the run is live
        return f"run {run_id} is in progress (pid {(lock.holder() or {}).get('pid', '?')})"
    except StorageError as e:  # a lock path that is no regular file of its own
        return e.one_line()
    return ""


@contextlib.contextmanager
def resuming(store: RunStore, state_dir: Path, run_id: str | None) -> Iterator[Resumed]:
    """The run `agent run --resume` goes on with (`run_id`, else the newest unfinished one
    not in progress), held to the end of the command: its own lock is taken as soon as it is
    chosen and its state read only then, so no `agent clean`, `agent rewind` or other resume
    acts on it meanwhile. Refused in one line, with nothing written, when it is in progress,
    gone once the lock is held, or finished by then when it was not as it was chosen (another
    resume ended it meanwhile)."""
    ended = run_id is not None and _finished(store, run_id)  # as `--run-id` named it
    chosen = store.target(run_id, live_ids(state_dir))
    lock = run_lock(state_dir, chosen, store.repo)
    with held_off(lock, state_dir, chosen) as busy:
        if busy:
            raise WorkspaceError(
                f"{busy}; nothing was changed", "resume it once it has stopped (`agent runs`)"
            )
        record = store.load(chosen)  # read again, now that nothing else can act on it
        if record.status in FINISHED and not ended:
            raise AgentError(
                f"run {chosen} is finished ({record.status}): it ended while this resume was "
                "starting, so there is nothing left to resume; nothing was changed",
                f"`agent runs` shows how it ended; `agent rewind {chosen}` sets its tasks "
                "pending again",
            )
        lock.name(chosen)
        yield Resumed(record, lock)


def _finished(store: RunStore, run_id: str) -> bool:
    """Whether run `run_id` is finished now (False when its state cannot be read: that is
    said once the run is held)."""
    try:
        return store.load(run_id).status in FINISHED
    except AgentError:
        return False


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
    resumed: Resumed | None,
    plan_only: bool,
    allow_dirty: bool,
    console: Console,
    checkout: RunLock | None = None,
    goal: str = "",
) -> WorktreePlace | None:
    """The worktree the run works in, made or found again (for `resumed`, the run a resume
    holds); None for a run in the checkout.

    With `auto`, a new run takes the `checkout` lock (the lock of a run in the checkout, which
    the caller then holds for the run) right here, and goes to a worktree when another run
    holds it: checked now and taken later, two runs started together could both find the
    checkout free, and the second be refused where it should have gone to a worktree."""
    if plan_only:
        return None  # a plan changes nothing, so it is made where the user is
    if resumed is not None:
        return _resumed(repo, state_dir, resumed, console)
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
    return _new(repo, state_dir, console, goal)


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


def _new(repo: Path, state_dir: Path, console: Console, goal: str = "") -> WorktreePlace:
    """A fresh worktree at the user's HEAD; says so when the user's changes stay behind. The
    run's lock holds its `goal` (masked) from the start, for `agent runs` to show as it plans."""
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
    lock.name(run_id, goal)
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
    repo: Path, state_dir: Path, resumed: Resumed, console: Console
) -> WorktreePlace | None:
    """The worktree of the run to resume (made again from its branch when it was removed, or
    when its folder was emptied)."""
    record = resumed.record
    if not record.worktree:
        return None
    path = now_at(state_dir, record.run_id, record.worktree)
    main = GitRepo(repo)
    main.close()
    trees = Worktrees(main.root)
    try:
        if not trees.listed(path):
            relink(trees, state_dir, record.run_id, record.worktree)
        listed = trees.listed(path)
        if not (listed and is_linked_tree(path, trees.root)):
            _clear(path, listed, record.branch)
            trees.restore(path, record.branch)
            console.emit(
                Notice(text=f"the run's worktree {path} is made again from {record.branch}")
            )
    finally:
        trees.close()
    return WorktreePlace(
        record.run_id, path, record.base_branch, trees.root, created=False, lock=resumed.lock
    )


def _clear(path: Path, listed: bool, branch: str) -> None:
    """Make way for the run's worktree at `path`, where there is none of this repository (git
    knows one there when `listed`): an empty folder goes; one holding anything is refused,
    nothing changed: what it holds may be the user's."""
    if not os.path.lexists(path):
        return  # gone: made again where it was
    if _empty_folder(path):
        path.rmdir()  # emptied by hand: nothing of anyone's is in it
        return
    if listed:
        why = (
            "holds files but is no longer a git work tree of this repository (its contents "
            "replaced by hand)"
        )
    else:
        why = (
            "is there, but git no longer knows it as a work tree of this repository, and `git "
            "worktree repair` could not tell git where it is (git's record of it was removed, "
            "as `git worktree prune` does)"
        )
    raise GitError(
        f"the run's worktree {path} {why}; nothing was changed",
        f"move it aside (mv {shlex.quote(str(path))} ELSEWHERE; what it holds may be yours) "
        f"and resume again: the worktree is made again from {branch}",
    )


def _empty_folder(path: Path) -> bool:
    """Whether `path` is a folder of its own (not a link) with nothing in it."""
    try:
        return path.is_dir() and not path.is_symlink() and not any(path.iterdir())
    except OSError:  # one that cannot be read holds what cannot be seen
        return False


def now_at(state_dir: Path, run_id: str, recorded: str) -> Path:
    """Where the worktree of run `run_id`, recorded at `recorded`, is: there, or, when that
    folder is gone, in the state directory as it is now (a checkout moved or renamed takes its
    state directory and the worktrees in it along)."""
    was = Path(recorded)
    return was if was.is_dir() else worktree_path(state_dir, run_id)


def tree_now(
    linked: Mapping[str, Path], state_dir: Path, run_id: str, recorded: str
) -> Path | None:
    """Where the work tree of run `run_id` is now: the one of `linked` (each branch checked out
    in a linked work tree, and that tree) its branch is in; else, for a worktree run that
    recorded `recorded`, its folder where `now_at` finds it, which git's own record misses
    while it is stale (a checkout moved took the tree along, and no resume, rewind or clean
    of the run has told git yet); None when it has none."""
    tree = linked.get(f"agent/{run_id}")
    if tree is not None or not recorded:
        return tree
    path = now_at(state_dir, run_id, recorded)
    return path if path.is_dir() else None


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
