"""Re-planning between tasks: one request that offers only `revise_plan`, forced.

After a verified task with tasks remaining (and when the human answers `r` to an escalation),
the model sees the verified tasks with their summaries and commits, the remaining tasks, the
budget left against the pace so far, and the success criteria, and either keeps the plan or
replaces every remaining task. Verified and skipped tasks are never changed. A reply that is
not a valid revision keeps the plan, with one notice.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pydantic import ValidationError

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.attempt.runtime import Runtime, check_budgets
from agent_cli.core import events, fences, strictjson
from agent_cli.core.errors import MalformedReply
from agent_cli.core.models import Task
from agent_cli.llm.base import force, function_tool

MAX_NEW_TASKS = 30
_TASK = {
    "type": "object",
    "properties": {
        "goal": {"type": "string"},
        "acceptance": {"type": "string"},
        "acceptance_cmd": {"type": ["string", "null"]},
    },
    "required": ["goal", "acceptance", "acceptance_cmd"],
}

REVISE_TOOL = function_tool(
    "revise_plan",
    'Keep the remaining tasks ({"keep": true}), or replace all of them '
    '({"keep": false, "reason": ..., "tasks": [...]}).',
    {
        "keep": {"type": "boolean"},
        "reason": {"type": "string"},
        "tasks": {"type": "array", "items": _TASK},
    },
    ["keep"],
)


@dataclass
class Revision:
    """What `revise_plan` asked for: keep, or these tasks instead of the remaining ones."""

    keep: bool
    reason: str = ""
    tasks: list[Task] = field(default_factory=list)


def parse(reply) -> Revision:
    """The revision in a reply, or ValueError saying what is wrong with it."""
    calls = [c for c in reply.tool_calls if c.name == "revise_plan"]
    if not calls:
        raise ValueError("the reply did not call revise_plan")
    try:
        args = strictjson.loads(calls[0].arguments or "{}")
    except ValueError as e:
        raise ValueError(f"revise_plan arguments are not usable JSON ({e})") from None
    if not isinstance(args, dict) or not isinstance(args.get("keep"), bool):
        raise ValueError('revise_plan needs "keep": true or false')
    if args["keep"]:
        return Revision(keep=True)
    tasks = args.get("tasks")
    if not isinstance(tasks, list) or len(tasks) > MAX_NEW_TASKS:
        raise ValueError(f'"keep": false needs "tasks", a list of at most {MAX_NEW_TASKS}')
    try:
        # Only the three planned fields: a model must not hand itself a status or a commit.
        new = [
            Task(
                goal=t.get("goal", ""),
                acceptance=t.get("acceptance") or "",
                acceptance_cmd=t.get("acceptance_cmd"),
            )
            for t in tasks
        ]
    except (AttributeError, ValidationError) as e:
        raise ValueError(f"a revised task is invalid: {str(e).splitlines()[0]}") from None
    return Revision(keep=False, reason=str(args.get("reason") or "").strip()[:1000], tasks=new)


def _task_line(number: int, task: Task) -> str:
    check = task.acceptance_cmd or f"(model-judged) {task.acceptance or '-'}"
    return f"{number}. {' '.join(task.goal.split())}\n   acceptance command: {check}"


def progress(state, start: int) -> str:
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


def messages(rt: Runtime, start: int, failure: str = "", note: str = "") -> list[dict]:
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


def revise(
    rt: Runtime, start: int, *, asked_by: str = "harness", failure: str = "", note: str = ""
) -> bool:
    """Ask whether to replace the tasks from `start` on; True when the plan was revised."""
    check_budgets(rt)
    ask = messages(rt, start, failure, note)
    rt.log({"type": "request", "messages": ask})
    if asked_by == "harness":
        rt.state.replans += 1
    try:
        reply = rt.model.chat(ask, [REVISE_TOOL], force("revise_plan"))
        rt.log({"type": "reply", "reply": reply.model_dump()})
        revision = parse(reply)
    except (MalformedReply, ValueError) as e:
        text = e.message if isinstance(e, MalformedReply) else str(e)
        rt.emit(events.Notice(text=f"the re-plan reply was not usable ({text}); the plan is kept"))
        rt.save()
        return False
    if revision.keep:
        rt.save()
        rt.log({"type": "replan", "keep": True, "start": start})
        return False
    apply(rt, start, revision, asked_by)
    return True


def apply(rt: Runtime, start: int, revision: Revision, asked_by: str) -> None:
    """Replace the tasks from `start` on, save the state, then tell (in that order)."""
    state = rt.state
    old = events.planned(state.plan[start:])
    new = events.planned(revision.tasks)
    event = events.PlanRevised(
        start=start,
        reason=revision.reason or "(no reason given)",
        old=old,
        new=new,
        asked_by=asked_by,
    )
    state.plan = state.plan[:start] + revision.tasks
    state.revisions.append(event.model_dump())
    state.last_error = None
    rt.save()
    rt.emit(event)
