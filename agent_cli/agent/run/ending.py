"""How a run's end is told: the outcome of a plan whose tasks all settled, and the way on
(`agent run --resume` and what it continues with) where there is one."""

from __future__ import annotations

from dataclasses import dataclass

from agent_cli.agent.run.store import FINISHED, RunRecord
from agent_cli.core.errors import EXIT_BUDGET, EXIT_ESCALATED, EXIT_INTERRUPTED, EXIT_OK
from agent_cli.core.models import Task


@dataclass(frozen=True)
class RunOutcome:
    """How the run's tasks ended: the exit code and the one line that says why."""

    code: int
    message: str


def settled_outcome(run: RunRecord, plan: list[Task]) -> RunOutcome:
    """The end of a run whose tasks all settled: what was verified, and by which proof."""
    idle = [i + 1 for i, t in enumerate(plan) if t.status == "nothing_to_do"]
    verified = [t for t in plan if t.status == "verified"]
    if not plan:  # a re-plan you asked for replaced every task with none
        run.status = "nothing_to_do"
        return RunOutcome(
            EXIT_OK, "no task is left: the re-plan removed every task; nothing is claimed verified"
        )
    if not verified:
        run.status = "nothing_to_do"
        return RunOutcome(
            EXIT_OK,
            "nothing to do: every task's check passed before it started and no file changed; "
            "nothing is claimed verified",
        )
    run.status = "verified"
    if idle:
        numbers = ", ".join(str(n) for n in idle)
        return RunOutcome(
            EXIT_OK,
            f"{len(verified)} of {len(plan)} tasks verified; nothing to do for task(s) {numbers} "
            "(the check passed before the task started and no file changed)",
        )
    if all(t.proof == "regression-only" for t in verified):
        return RunOutcome(
            EXIT_OK,
            "every task verified, each regression-only: every check already passed before "
            "its task started",
        )
    return RunOutcome(EXIT_OK, "every task verified")


def with_way_on(run: RunRecord, code: int, message: str) -> str:
    """`message`, naming what `agent run --resume` will continue with when it is the way on;
    a finished run (one that ended with a task skipped or replaced) has nothing to resume."""
    if run.status in FINISHED:
        if run.status != "skipped":
            return message
        return (
            f"{message}; the run is finished, with nothing left to resume: what it left "
            "uncommitted is yours to finish (`git status`)"
        )
    uses = run.started_with.describe()
    if code not in (EXIT_INTERRUPTED, EXIT_ESCALATED, EXIT_BUDGET) or not uses:
        return message
    command = "`agent run --resume`"
    if command in message:
        return message.replace(command, f"{command} (with {uses})", 1)
    return f"{message}; {command} continues with {uses}"
