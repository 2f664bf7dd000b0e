"""Which runs are live and where each is: what `agent runs` lists.

A run is live while its lock file's flock is held (`workspace.lock.live_holder`; the lock
names its pid, and its run once the run has an id). Where it is comes from its state.json (saved
at a task's boundaries) and its journal's last line: nothing is written for this, since the
journal already gets one line per tool call with the run's step, its task and its usage.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent_cli.agent.run import journal
from agent_cli.agent.run.state import AgentState
from agent_cli.agent.run.store import RunStore
from agent_cli.core.errors import AgentError
from agent_cli.workspace.lock import live_holder

# Run locks under the state directory: a run in a checkout of the user's (`checkout_lock`), and
# each worktree run's.
LOCK_PATTERNS = ("run.lock", "checkouts/*.lock", "runs/*/run.lock")
SUMMARY_KEYS = ("run_id", "status", "goal", "steps", "started_at", "updated_at")


@dataclass(frozen=True)
class Progress:
    """A run's current task (1-based; None between tasks), its step and its spend so far."""

    task: int | None
    tasks: int
    task_goal: str
    step: int
    cost_usd: float

    def to_dict(self) -> dict[str, Any]:
        """The fields as JSON values."""
        return asdict(self)


def progress(store: RunStore, run_id: str) -> Progress | None:
    """How far run `run_id` has got; None when it has no readable state yet."""
    try:
        record = store.load(run_id)
        state = AgentState.from_dict(record.agent_state)
        lines = store.journal_lines(run_id)
    except (AgentError, ValueError):
        return None
    index = state.current_task()
    step, cost = record.steps, record.usage.cost_usd
    entries = journal.parse(lines)
    if entries and entries[-1].step > step:
        last = entries[-1]
        step, cost, index = last.step, last.usage.cost_usd, last.task
    if index is not None and not 0 <= index < len(state.plan):
        index = None
    return Progress(
        task=None if index is None else index + 1,
        tasks=len(state.plan),
        task_goal="" if index is None else state.plan[index].goal,
        step=step,
        cost_usd=cost,
    )


def checkout_lock(state_dir: Path, checkout: Path) -> Path:
    """The lock of a run in the user's work tree `checkout`: `<repo>/.agent/run.lock` in a
    repository's own state directory, else one per work tree under `checkouts/`, so that runs
    in two repositories sharing a `home` (or in two work trees of one) do not hold each other."""
    checkout = checkout.resolve()
    if state_dir.name == ".agent" and state_dir.resolve().parent == checkout:
        return state_dir / "run.lock"
    name = hashlib.sha256(str(checkout).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return state_dir / "checkouts" / f"{name}.lock"


def live_holders(state_dir: Path, repo: str = "") -> list[dict[str, Any]]:
    """The holder of every run lock under `state_dir` that is held, with its `run_id`
    (None for a new run that has none yet); with `repo`, leaving out the locks that name
    another repository (a shared `home`)."""
    found: list[dict[str, Any]] = []
    for pattern in LOCK_PATTERNS:
        for path in sorted(state_dir.glob(pattern)):
            holder = live_holder(path)
            if holder is None or (repo and holder.get("repo") not in (None, repo)):
                continue
            run_id = holder.get("run_id")
            if not isinstance(run_id, str) and path.parent.parent.name == "runs":
                run_id = path.parent.name  # a worktree run's own lock, in its own directory
            found.append({**holder, "run_id": run_id if isinstance(run_id, str) else None})
    return found


def live_ids(state_dir: Path) -> set[str]:
    """The ids of the runs in progress under `state_dir`."""
    return {h["run_id"] for h in live_holders(state_dir) if h["run_id"]}


def runs_rows(
    store: RunStore, state_dir: Path, tree_of: Callable[[str, str], Path | None]
) -> list[dict[str, Any]]:
    """Every run, oldest first (`SUMMARY_KEYS`, and `worktree` when it has one); a live one
    also with `live`, `pid`, its `task` of `tasks`, `task_goal`, `step` and `cost_usd`.

    `tree_of` says where a run's work tree is now, from its id and the one its state recorded
    ("" when none): None when it has none."""
    holders = live_holders(state_dir, store.repo)
    live = {h["run_id"]: h for h in holders if h["run_id"]}
    summaries = store.list()
    known = {s.get("run_id") for s in summaries}
    rows = []
    for summary in summaries:
        row: dict[str, Any] = {
            key: summary.get(key, default)
            for key, default in zip(SUMMARY_KEYS, (None, None, "", 0, "", ""), strict=True)
        }
        run_id = row["run_id"]
        recorded = summary.get("worktree")
        tree = tree_of(str(run_id), recorded if isinstance(recorded, str) else "")
        if tree is not None:
            row["worktree"] = str(tree)
        if run_id not in live and row["status"] == "running":
            row["status"] = "interrupted"  # its process is gone: killed; `--resume` goes on
        if run_id in live:
            row |= {"status": "running", "live": True, "pid": live[run_id]["pid"]}
            row.setdefault("worktree", None)
            now = progress(store, str(run_id))
            if now is not None:
                row |= now.to_dict()
                row["steps"] = now.step
        rows.append(row)
    # a new run, planning: it has saved nothing yet, and has no id yet, or has one (a worktree
    # run takes its id before it plans); what it is comes from its lock
    starting = [h for i, h in live.items() if i not in known]
    for holder in [*starting, *(h for h in holders if not h["run_id"])]:
        started, goal = holder.get("started"), holder.get("goal")
        stamp = ""
        if isinstance(started, (int, float)):
            stamp = datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds")
        run_id = holder["run_id"]
        tree = tree_of(run_id, "") if run_id else None
        said = (run_id, "starting", goal if isinstance(goal, str) else "", 0, stamp, stamp)
        rows.append(
            dict(zip(SUMMARY_KEYS, said, strict=True))
            | {"live": True, "pid": holder["pid"], "worktree": str(tree) if tree else None}
        )
    return rows


def shown(row: dict[str, Any]) -> dict[str, Any]:
    """A row as the table shows it: a live run's status says where it is (`live: pid 42, task
    1/2, ...`); a run still planning, with no id yet or nothing saved yet, is `starting: pid
    42`."""
    if not row.get("live"):
        return row
    where = [f"pid {row['pid']}"]
    if row.get("task"):
        where += [f"task {row['task']}/{row['tasks']}", f"step {row['step']}"]
    if row.get("cost_usd"):
        where.append(f"${row['cost_usd']:.2f}")
    if row.get("worktree"):
        where.append(f"in {row['worktree']}")
    state = "starting" if row["status"] == "starting" else "live"
    return {**row, "run_id": row["run_id"] or "(new)", "status": f"{state}: " + ", ".join(where)}
