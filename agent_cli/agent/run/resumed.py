"""What a resume checks in a saved run before it goes on, and what it finds again.

The saved state must be readable and its verified tasks' commits the run's own, on its
branch (a state file edited by hand cannot mark work done); a rewind stopped half way is
named with the command that finishes it; a task committed just before the process was killed
is verified by that commit; and the changes made in the work tree since the run stopped are
told apart from the run's own uncommitted ones (`users_changes`).
"""

from __future__ import annotations

from pydantic import ValidationError

from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunRecord
from agent_cli.core.errors import GitError, StorageError
from agent_cli.core.protocols import Workspace
from agent_cli.core.text import some


def saved_state(run: RunRecord) -> AgentState:
    """The run's saved AgentState; a StorageError naming the field when it is malformed."""
    try:
        return AgentState.from_dict(run.agent_state)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "top level"
        raise StorageError(
            f"{run.run_id}/state.json cannot be read: agent_state.{where}: {err['msg']}",
            "the file is left as it is; inspect or move it aside",
        ) from None


def check_not_rewound(state: AgentState, run: RunRecord, ws: Workspace) -> None:
    """Refuse a saved state whose verified task has a commit of the run that its branch was
    moved back behind: what an `agent rewind` stopped before it saved the state leaves, and
    what running the same rewind again finishes. Asked before the resume checks the branch
    out, so that the rewind can move it."""
    for n, task in enumerate(state.plan, 1):
        if task.status != "verified" or task.commit is None:
            continue
        if ws.has_run_commit(task.commit, run.branch, run.run_id):
            continue
        if ws.run_commit_ahead_of(task.commit, run.branch, run.run_id):
            again = f"agent rewind {run.run_id}" + (f" --to-task {n - 1}" if n > 1 else "")
            raise StorageError(
                f"{run.run_id}/state.json says task {n} is verified by commit "
                f"{task.commit[:12]}, but {run.branch} was moved back behind it: a rewind of "
                "the run was stopped before it saved the state",
                f"finish it with `{again}`, then resume",
            )
        return  # another mismatch: `check_verified` says it


def check_verified(state: AgentState, run: RunRecord, ws: Workspace) -> None:
    """Refuse a saved state claiming a task verified by a commit the run did not make.

    A verified task's commit must be on the run's branch and carry its `Agent-Run` trailer;
    a state file edited by hand (or by a command) cannot mark work done that never was."""
    for n, task in enumerate(state.plan, 1):
        if task.status != "verified" or task.commit is None:
            continue  # a verified task that changed no file has no commit
        if not ws.has_run_commit(task.commit, run.branch, run.run_id):
            raise StorageError(
                f"{run.run_id}/state.json says task {n} is verified by commit "
                f"{task.commit[:40]!r}, which is not a commit of this run on {run.branch}",
                "the file is left as it is; inspect or move it aside",
            )


def check_memory(run: RunRecord) -> None:
    """Refuse a saved working memory that cannot be imported (a state file edited by hand),
    before the resume touches the work tree."""
    from agent_cli.memory.working.memory import STATE_FORMAT, malformed

    saved = run.memory
    if not saved:
        return
    why = (
        f"unknown working-memory state format {saved.get('format')!r}"
        if saved.get("format") != STATE_FORMAT
        else malformed(saved)
    )
    if why:
        raise StorageError(
            f"{run.run_id}/state.json: its working memory cannot be read: {why}",
            "the file is left as it is; inspect or move it aside",
        )


def adopt_unsaved_commit(state: AgentState, run: RunRecord, ws: Workspace) -> int | None:
    """The index of the task whose commit the run made but did not save: a process killed
    between a verified task's commit and the save after it leaves that task `running` and
    the branch at a commit of this run that no task names. That commit is the task's (a
    commit is made only after every check passed), so the task is verified by it again,
    never redone on top of it (which would leave it verified with no commit). Only when the
    state was saved on the way to that commit (`committing`): a commit a command made with
    the run's trailer while the task ran, before the process died, proves nothing."""
    running = [i for i, t in enumerate(state.plan) if t.status == "running"]
    named = {t.commit for t in state.plan if t.commit}
    committing, state.committing = state.committing, None
    if len(running) != 1 or committing != running[0] or ws.current_branch() != run.branch:
        return None
    head = ws.head()
    if head in named or not ws.has_run_commit(head, run.branch, run.run_id):
        return None
    task = state.plan[running[0]]
    task.commit, task.status = head, "verified"
    state.last_error = None
    state.facts.append(f"task {running[0] + 1} verified (its commit {head[:10]}): {task.goal}")
    return running[0]


def users_changes(run: RunRecord, left: str, ws: Workspace) -> list[str]:
    """The paths changed since the work tree held `left` (the run's last known tree: its last
    save, or the last tool call its journal has) that were not the run's uncommitted changes
    then (those are yours to adjust, and are taken along), other than those already kept
    as the user's; none when `left` is not known (saved before it was recorded, or git could
    not say)."""
    if not left:
        return []
    return sorted(ws.changed_since(left, run.branch) - set(run.protected))


def refusal(run: RunRecord, changed: list[str]) -> GitError:
    """The error a resume without --allow-dirty stops with, as a new run's does."""
    return GitError(
        f"the work tree has changes made since run {run.run_id} stopped ({some(changed)}), "
        "which are not the run's",
        "commit or stash them first, or pass --allow-dirty to keep them out of the run "
        "(changes to the files the run left uncommitted are taken along)",
    )
