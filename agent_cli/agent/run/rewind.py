"""Rewinding a run to a task: which commit its branch goes back to, and the state that follows.

The branch itself is moved by the command layer (`workspace/git/branches.py`); this says
where to and records it: tasks after the one kept are pending again as they were planned,
so `agent run --resume` goes on from there with the plan the run had.
"""

from __future__ import annotations

from dataclasses import dataclass

from agent_cli.agent.run.resumed import saved_state
from agent_cli.agent.run.store import RunRecord, RunStore, utc_now
from agent_cli.core.errors import AgentError, UsageError
from agent_cli.core.models import SETTLED


@dataclass(frozen=True)
class RewindTarget:
    """Where a rewind goes: the tasks kept, the commit the branch moves to, and what it is."""

    keep: int  # tasks kept as they are (0: none, the run's base)
    commit: str
    label: str  # "task 1 (Add a.txt)" or "the run's base"
    forgotten: int  # tasks set back to pending


def target(record: RunRecord, to_task: int | None) -> RewindTarget:
    """Where rewinding `record` to task `to_task` (None: its base) moves its branch."""
    state = saved_state(record)
    keep = to_task or 0
    if not 0 <= keep <= len(state.plan):
        raise UsageError(
            f"--to-task {keep} is not a task of run {record.run_id} (it has {len(state.plan)})",
            f"pass a task number from 1 to {len(state.plan)}, or leave --to-task out for its base",
        )
    open_tasks = [n for n, t in enumerate(state.plan[:keep], 1) if t.status not in SETTLED]
    if open_tasks:
        n = open_tasks[0]
        raise UsageError(
            f"task {n} of run {record.run_id} is {state.plan[n - 1].status}, not done: "
            f"there is no commit of it to go back to",
            f"rewind to a task before it (--to-task {n - 1}) or resume the run",
        )
    commits = [t.commit for t in state.plan[:keep] if t.commit]
    commit = commits[-1] if commits else record.base
    if not commit:
        raise AgentError(
            f"run {record.run_id} recorded no base commit, so it cannot be rewound",
            "move its branch with git yourself",
        )
    label = "the run's base"
    if keep:
        label = f"task {keep} ({' '.join(state.plan[keep - 1].goal.split())[:60]})"
    return RewindTarget(keep, commit, label, len(state.plan) - keep)


def record_rewind(store: RunStore, record: RunRecord, to: RewindTarget, tip: str) -> None:
    """Save `record` rewound to `to` from branch tip `tip`: the tasks after the ones kept are
    pending again and the run is stopped and resumable (`interrupted`); the trajectory says so."""
    state = saved_state(record)
    state.rewind(to.keep)
    record.agent_state = state.to_dict()
    record.status = "interrupted"
    record.updated_at = utc_now()
    store.save(record)
    store.log(
        record.run_id,
        {"type": "rewind", "to_task": to.keep, "commit": to.commit, "from": tip},
    )
