"""The earlier tasks' checks, run again when every task is settled.

A task is verified on the tree it leaves; a later task can undo that work (rewrite the
function, delete the module, change what a test imports) while passing its own check. Before
a run says every task is verified, each distinct command that verified a task of the plan
runs once more on the final tree, unless it already passed on that very tree (the check of
the last task, or one shared by every task, is not run twice).

A check that fails then is a regression: the harness adds one task that restores it (judged
by that same command, carrying its failure), and the checks run again after it. A command
gets one such task in a run; when it fails again, or when re-planning is off, the run
escalates as at a failed final gate. A restoring task the human skipped is not asked for again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agent_cli.agent.judge.acceptance import missing
from agent_cli.agent.judge.verifier import Proofs, run_acceptance
from agent_cli.core.models import Task, Verdict
from agent_cli.core.protocols import Workspace
from agent_cli.core.text import shorten, some

CHECKED = ("verified", "nothing_to_do")  # the statuses that say "its check passed"


@dataclass(frozen=True)
class Regression:
    """An earlier task's check that fails on the final tree."""

    index: int  # 0-based: the first task of the plan that this command verified
    command: str
    verdict: Verdict
    since: tuple[int, ...]  # 0-based: the later tasks that committed changes


def regressions(
    plan: list[Task], ws: Workspace, proofs: Proofs, accept_cmds: Sequence[str] = ()
) -> list[Regression]:
    """Each distinct command that verified a task and fails now, in plan order. A command
    that is not there any more (exit 127, its program on neither PATH nor in the
    repository) is judged by the user's `--accept` commands when there are some, as at the
    task itself: the final gate runs them next."""
    tree = ws.tree()
    skipped = {t.acceptance_cmd for t in plan if t.restores is not None and t.status == "skipped"}
    found: list[Regression] = []
    seen: set[str] = set()
    for index, task in enumerate(plan):
        cmd = task.acceptance_cmd
        if task.status not in CHECKED or not cmd or cmd in seen or cmd in skipped:
            continue
        seen.add(cmd)
        if ws.refusal(cmd) is not None or proofs.seen.get(((cmd,), tree)):
            continue
        verdict = run_acceptance([cmd], ws.run_argv)
        proofs.remember([cmd], tree, verdict.passed)
        vanished = verdict.exit_code == 127 and missing(cmd, ws.root)
        if not verdict.passed and not (vanished and accept_cmds):
            since = tuple(i for i, t in enumerate(plan) if i > index and t.commit)
            found.append(Regression(index, cmd, verdict, since))
    return found


def restored_before(plan: list[Task], command: str) -> bool:
    """Whether a task of this run was already given to restore `command`."""
    return any(t.restores is not None and t.acceptance_cmd == command for t in plan)


def describe(plan: list[Task], found: Regression) -> str:
    """One sentence: whose check fails now, and after which tasks."""
    after = (
        "after " + some([f"task {i + 1}" for i in found.since], 4)
        if found.since
        else "though no later task committed a change"
    )
    return (
        f"task {found.index + 1}'s check `{found.command}` passed when "
        f"'{shorten(' '.join(plan[found.index].goal.split()), 80)}' was verified and fails "
        f"now (exit {found.verdict.exit_code}), {after}"
    )


def restoring_task(plan: list[Task], found: Regression) -> Task:
    """The task that makes the command pass again, keeping the later tasks' work."""
    return Task(
        goal=(
            f"Make task {found.index + 1}'s check pass again without undoing the later tasks' "
            f"work: {describe(plan, found)}."
        ),
        acceptance=f"`{found.command}` exits 0 on the final tree",
        acceptance_cmd=found.command,
        restores=found.index,
    )
