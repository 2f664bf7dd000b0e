"""A batch from its file to its record: checks, the runs, the table or the JSON stream, batch.json.

The record is `<state>/batches/<batch-id>/batch.json` (each run's id, branch, status, exit
code, cost, proof labels, kept worktree, how to resume it, and the runs to merge whose
branches change the same files: overlap.py), beside each run's events and stderr; its path is
the last line the batch prints.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_cli.agent.run.store import claim_run_id, utc_now
from agent_cli.cli import roles
from agent_cli.cli.batch.driver import Batch, Job, Launch
from agent_cli.cli.batch.goals import Goal, read_goals
from agent_cli.cli.batch.overlap import Branch, overlaps
from agent_cli.cli.config.settings import Settings, load_settings
from agent_cli.cli.worktree import check_new
from agent_cli.core.atomic import write_atomic
from agent_cli.core.errors import ModelError, UsageError
from agent_cli.core.redact import redact, redact_all
from agent_cli.ui.batch_view import BatchRow, BatchView
from agent_cli.workspace.git.exclude import exclude_state_dir

BATCHES = "batches"  # under the state directory


@dataclass
class BatchOptions:
    """What the `batch` command was asked to do."""

    file: Path
    jobs: int = 2
    repo: Path | None = None
    model: str | None = None
    base_url: str | None = None
    budget_usd: float | None = None
    yes: bool = False
    json_out: bool = False


def run_batch(opts: BatchOptions) -> int:
    """Run the batch and return its exit code."""
    from agent_cli.cli.shared import find_repo

    repo = find_repo(opts.repo)
    goals = read_goals(opts.file, repo)
    flags = {"model": opts.model, "base_url": opts.base_url}
    settings = load_settings(repo, {**flags, "approval": "auto" if opts.yes else None})
    state_dir = settings.state_dir(repo)
    check_new(repo, state_dir)  # what would refuse every run: said once, none started
    roles.check_keys(settings)  # each run would fail on it: say it once, start none
    try:
        roles.check_reachable(settings)  # an endpoint that is not there: likewise
    except ModelError as e:
        raise ModelError(f"{e.message}; no run was started", e.hint) from None
    if settings.approval != "auto":
        confirm(len(goals), opts.json_out)
    exclude_state_dir(repo, state_dir)  # before anything is written into it
    batch_id = claim_run_id(state_dir / BATCHES)
    home = state_dir / BATCHES / batch_id
    try:
        return _run(opts, repo, goals, settings, batch_id, home)
    finally:
        with contextlib.suppress(OSError):  # not empty: what the batch wrote stays
            home.rmdir()  # left empty (its output closed at once: `| head -0`): no record


def _run(
    opts: BatchOptions,
    repo: Path,
    goals: list[Goal],
    settings: Settings,
    batch_id: str,
    home: Path,
) -> int:
    """The batch whose record goes to `home`, from its first line to its last."""
    state_dir = settings.state_dir(repo)
    flags = {"model": opts.model, "base_url": opts.base_url}
    run_args = [a for k, v in flags.items() if v for a in (f"--{k.replace('_', '-')}", v)]
    secrets = settings.secrets()  # masked in all it shows, as in batch.json
    emit = JsonStream(secrets) if opts.json_out else None
    title = f"batch {batch_id}: {len(goals)} goals, {opts.jobs} at a time"
    view = None if emit else BatchView(title)
    batch = Batch(
        goals,
        Launch(repo, state_dir, home, run_args),
        opts.jobs,
        opts.budget_usd,
        on_event=emit.run_event if emit else lambda job, ev: None,
        on_change=(lambda jobs: view.update(rows(jobs, secrets))) if view else lambda jobs: None,
    )
    started = utc_now()
    if emit:
        emit.line(
            {
                "event": "batch_started",
                "batch_id": batch_id,
                "goals": len(goals),
                "jobs": opts.jobs,
                "budget_usd": opts.budget_usd,
            }
        )
    code = batch.run()
    found = overlaps(repo, mergeable(batch.jobs), secrets)
    failure = batch.failure
    error = f"internal error: {type(failure).__name__}: {failure}" if failure else None
    path = home / "batch.json"
    record = {
        "batch_id": batch_id,
        "file": str(opts.file),
        "repo": str(repo),
        "jobs": opts.jobs,
        "budget_usd": opts.budget_usd,
        "started_at": started,
        "finished_at": utc_now(),
        "exit_code": code,
        "cost_usd": round(batch.spent(), 6),
        "driver_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "runs": [job.record() for job in batch.jobs],
        "overlaps": [o.record() for o in found],
        "error": error,  # the batch's own, which stopped its runs (each saved to resume)
    }
    home.mkdir(parents=True, exist_ok=True)
    masked = redact_all(record, secrets)
    write_atomic(path, json.dumps(masked, indent=1, ensure_ascii=False) + "\n")
    if emit:
        emit.line(
            {
                "event": "batch_done",
                "batch_id": batch_id,
                "exit_code": code,
                "statuses": dict(Counter(j.status for j in batch.jobs)),
                "cost_usd": record["cost_usd"],
                "overlaps": record["overlaps"],
                "batch_json": str(path),
            }
        )
    else:
        assert view is not None
        view.summary(
            rows(batch.jobs, secrets), headline(batch.jobs, code), [o.line() for o in found]
        )
        print(path, flush=True)
    if failure is not None:  # said last, as any internal error is, once the record is written
        raise failure
    return code


def confirm(goals: int, json_out: bool) -> None:
    """Ask once on a terminal whether the runs may go unattended; refuse where none can ask."""
    if json_out or not sys.stdin.isatty():
        raise UsageError(
            "a batch runs its goals unattended, and approval is 'ask'; nothing was started",
            'pass --yes to approve every plan and command, or set approval = "auto"',
        )
    print(
        f"run {goals} goals unattended, each plan and command approved without asking? [y/N] ",
        end="",
        flush=True,
    )
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        raise UsageError("the batch was not approved; nothing was started")


def rows(jobs: list[Job], secrets: tuple[str, ...] = ()) -> list[BatchRow]:
    """The table's rows, each text redacted (`secrets` and the known key shapes) as batch.json
    is: a goal may hold a key."""
    return [
        BatchRow(
            index=j.index,
            goal=redact(j.goal.goal, secrets),
            status=j.status,
            task=j.task,
            tasks=j.tasks,
            steps=j.steps,
            cost_usd=j.cost_usd,
            run_id=j.run_id,
            note=redact(next_step(j), secrets),
            killed=redact(j.killed(), secrets),
        )
        for j in jobs
    ]


def mergeable(jobs: list[Job]) -> list[Branch]:
    """The runs whose branch the human is told to merge."""
    return [Branch(j.index, j.branch, j.base) for j in jobs if _to_merge(j) and j.base]


def _to_merge(job: Job) -> bool:
    return job.status in ("verified", "nothing_to_do") and bool(job.branch)


def next_step(job: Job) -> str:
    """What the human does next with this run (after how it was killed, when it was, and why
    it failed, when it did: a resume would meet the same reason)."""
    killed = job.killed()
    parts = [killed] if killed else []
    why = " ".join(job.message.split())
    if job.status == "failed" and why:  # its message starts with how it was killed, if it was
        parts = [why] if killed and why.startswith(killed) else [*parts, why]
    if _to_merge(job):
        return "; ".join([*parts, f"git merge {job.branch}"])
    if job.worktree:
        parts.append(f"worktree kept: {job.worktree}")
    if job.resume_command():
        parts.append(job.resume_command())
    return "; ".join(parts) or job.message


def headline(jobs: list[Job], code: int) -> str:
    """One line: how many runs ended how, and the batch's exit code."""
    counts = Counter(j.status for j in jobs)
    said = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return f"{len(jobs)} goals: {said} (exit code {code})"


class JsonStream:
    """The batch's one JSON-lines stream: every run's events tagged with its goal and run id,
    each redacted (`secrets` and the known key shapes)."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        self.secrets = secrets

    def line(self, data: dict[str, Any]) -> None:
        print(json.dumps(redact_all(data, self.secrets), ensure_ascii=False), flush=True)

    def run_event(self, job: Job, ev: dict[str, Any]) -> None:
        self.line({**ev, "job": job.index, "run_id": ev.get("run_id") or job.run_id})
