"""Re-planning between tasks: one request that offers only `revise_plan`, forced.

After a verified task with tasks remaining (and when the human answers `r` to an escalation),
the model sees the verified tasks with their summaries and commits, the remaining tasks, the
budget left against the pace so far, and the success criteria, and either keeps the plan or
replaces every remaining task. Verified and skipped tasks are never changed. A reply that is
not a valid revision is asked for once more with the reason; a second keeps the plan, with
one notice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.structured import Failure, Form, ask
from agent_cli.agent.attempt.runtime import Runtime, check_budgets
from agent_cli.core import events, fences
from agent_cli.core.models import PlanRevision, Task
from agent_cli.core.protocols import Message
from agent_cli.core.text import some

if TYPE_CHECKING:
    from agent_cli.agent.judge.gate import Gate
    from agent_cli.agent.run.state import AgentState

REVISION = Form(
    "revise_plan",
    'Keep the remaining tasks ({"keep": true}), or replace all of them '
    '({"keep": false, "reason": ..., "tasks": [...]}).',
    PlanRevision,
    "revision",
)
REVISE_TOOL = REVISION.tool()


def _task_line(number: int, task: Task) -> str:
    check = task.acceptance_cmd or f"(model-judged) {task.acceptance or '-'}"
    return f"{number}. {' '.join(task.goal.split())}\n   acceptance command: {check}"


def progress(state: AgentState, start: int) -> str:
    """The verified (and skipped) tasks with summaries and commits, then the remaining ones."""
    done = []
    for i, t in enumerate(state.plan[:start]):
        commit = f", commit {t.commit[:10]}" if t.commit else ", no files changed"
        status = "verified" + commit if t.status == "verified" else t.status
        summary = " ".join(t.summary.split())[:400] or "-"
        done.append(f"{i + 1}. [{status}] {' '.join(t.goal.split())}\n   its summary: {summary}")
    rest = [_task_line(start + i + 1, t) for i, t in enumerate(state.plan[start:])]
    return (
        "DONE (never changed):\n"
        + ("\n".join(done) or "(none)")
        + "\n\nREMAINING (what revise_plan may replace):\n"
        + ("\n".join(rest) or "(none)")
    )


def budget(rt: Runtime, remaining: int) -> str:
    """Steps and dollars left, the average per verified task, and a warning when short."""
    state, lim = rt.state, rt.limits
    verified = max(len(state.done_tasks()), 1)
    steps_left, usd_left = lim.max_steps - state.step, lim.budget_usd - rt.spent()
    per_step, per_usd = state.step / verified, rt.spent() / verified
    text = (
        f"BUDGET: {steps_left} of {lim.max_steps} tool calls left (about {per_step:.0f} per "
        f"verified task so far); ${usd_left:.4f} of ${lim.budget_usd:.2f} left (about "
        f"${per_usd:.4f} per verified task)."
    )
    if steps_left < per_step * remaining or usd_left < per_usd * remaining:
        text += (
            f"\nAt this pace the {remaining} remaining task(s) need more than is left: "
            "drop or merge tasks so that the most important work fits."
        )
    return text


def messages(rt: Runtime, start: int, failure: str = "", note: str = "") -> list[Message]:
    """The revise_plan request: progress, the failure, criteria, budget, the goal last."""
    state = rt.state
    task = (
        f"RE-PLAN CHECK before task {start + 1}.\n\n{progress(state, start)}\n\n"
        f"Success criteria of the whole plan: {state.success_criteria.strip() or '-'}"
    )
    if failure:
        task += f"\n\nWHY TASK {start + 1} WAS REJECTED (the harness's check):\n{failure[-1500:]}"
    hints = ""
    if note:
        hints = "The human asked for this re-plan and said:\n" + fences.human_hint(note)
    remaining = len(state.plan) - start
    return Request(
        system=prompts.load("replan"),
        goal=state.goal,
        recalled=rt.recalled,
        task=task,
        hints=hints,
        state=budget(rt, remaining),
    ).messages()


Answered = Literal["revised", "kept", "unusable"]  # what came of asking for a revision


def revise(
    rt: Runtime,
    gate: Gate,
    start: int,
    *,
    asked_by: str = "harness",
    failure: str = "",
    note: str = "",
    left: Sequence[str] = (),
) -> Answered:
    """Ask whether to replace the tasks from `start` on: "revised", "kept" (the model chose to
    keep the plan) or "unusable" (its replies were not usable: said in a notice here).

    The new tasks pass `gate` like the first plan's: a revision with a check the harness
    cannot use goes back to the model with the reason, and a second such one keeps the plan.
    When a task it replaces was judged by a command (as approved with the plan), a revision
    the harness asked for gives every new task a command too: else the model could turn a
    task the harness checks into one it judges itself. The human's re-plan may do so.
    `left`: the uncommitted changes of the tasks it would replace (held when they are).
    """
    check_budgets(rt)
    if asked_by == "harness":
        rt.state.replans += 1
    commanded = any(t.acceptance_cmd for t in rt.state.plan[start:])

    def refused(revision: PlanRevision) -> str | None:
        if revision.keep:
            return None
        tasks = revision.new_tasks()
        judged = [start + i + 1 for i, t in enumerate(tasks) if not t.acceptance_cmd]
        if judged and commanded and asked_by == "harness":
            return (
                f"task {judged[0]} has no acceptance_cmd, but the tasks it replaces were "
                "judged by commands: give each new task a command that fails until its work "
                "is done, or keep the plan"
            )
        return gate.refused(tasks, start)

    asked = messages(rt, start, failure, note)
    got = ask(
        rt.role("planner"), asked, REVISION, log=rt.log, check=refused, window=rt.limits.window()
    )
    if isinstance(got, Failure):
        text = f"the re-plan reply was not usable ({got.error}); the plan is kept"
        rt.emit(events.Notice(text=text))
        rt.save()
        return "unusable"
    revision = got.value
    if revision.keep:
        rt.save()
        rt.log({"type": "replan", "keep": True, "start": start})
        return "kept"
    apply(rt, start, revision, asked_by, left)
    return "revised"


def apply(
    rt: Runtime, start: int, revision: PlanRevision, asked_by: str, left: Sequence[str] = ()
) -> None:
    """Replace the tasks from `start` on, save the state, then tell (in that order)."""
    replace(rt, start, revision.new_tasks(), revision.reason, asked_by, left)


def approved_commands(state: AgentState) -> list[str]:
    """The acceptance commands of the plan as it was approved: the current plan with every
    revision undone, the latest first (each saved revision names the tasks it replaced). A
    revision saved unreadably leaves none: a command not known to be approved is asked about."""
    cmds = [t.acceptance_cmd for t in state.plan]
    for revision in reversed(state.revisions):
        start, old = revision.get("start"), revision.get("old")
        if not isinstance(start, int) or not 0 <= start <= len(cmds) or not isinstance(old, list):
            return []
        cmds = cmds[:start] + [
            t.get("acceptance_cmd") if isinstance(t, dict) else None for t in old
        ]
    return [cmd for cmd in cmds if isinstance(cmd, str) and cmd]


def replace(
    rt: Runtime,
    start: int,
    tasks: list[Task],
    reason: str,
    asked_by: str,
    left: Sequence[str] = (),
) -> None:
    """The tasks from `start` on become `tasks` (a `start` at the plan's end adds them).

    `left`, the uncommitted changes of the tasks replaced, are held as a skipped task's are
    (the first replaced task's `left_files`), until a new task changes them itself."""
    state = rt.state
    if left and start < len(state.plan):
        state.plan[start].left_files = list(left)
        state.dropped.update({path: rt.toolbox.blob_of(path) or "" for path in left})
    event = events.PlanRevised(
        start=start,
        reason=reason.strip() or "(no reason given)",
        old=events.planned(state.plan[start:]),
        new=events.planned(tasks),
        asked_by=asked_by,
    )
    state.plan = state.plan[:start] + tasks
    state.revisions.append(event.model_dump())
    state.last_error = None
    rt.save()
    rt.emit(event)
    if left and event.old:
        rt.emit(
            events.Notice(
                text=f"the changes of the replaced task {start + 1} stay uncommitted: "
                f"{some(list(left))} (no commit takes them unless a new task changes them)"
            )
        )
