"""Turn a goal into a Plan through the forced tool `submit_plan`, asking once more if invalid."""

from __future__ import annotations

from collections.abc import Callable

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.structured import Failure, Form, Log, ask
from agent_cli.agent.ask.window import Window
from agent_cli.core import fences
from agent_cli.core.errors import AgentError
from agent_cli.core.models import Plan, SubmittedPlan
from agent_cli.core.protocols import ChatModel, Message

PLAN = Form(
    "submit_plan",
    "Submit the plan: the goal, its tasks in order, and the success criteria.",
    SubmittedPlan,
    "plan",
)
PLAN_TOOL = PLAN.tool()


CUT_HINT = (
    "the plan needs more room than the reply had: raise reserved_output_tokens (a reply gets "
    "at most a quarter of the context window the server reports), serve the model with a "
    "larger context (llama.cpp: -c), or give a smaller goal"
)


def plan_messages(
    goal: str,
    recalled: str,
    repo_files: str,
    accept_cmds: list[str],
    instructions: str = "",
    window: Window | None = None,
) -> list[Message]:
    """The planning request: rules, the repository's instructions, recalled memory (with the
    procedures known to work here), the repository's files, the goal last; fitted to `window`."""
    context = "Files in the repository:\n" + fences.tool_output("git_ls_files", repo_files)
    if accept_cmds:
        context += (
            "\nThe user's acceptance command(s), used for tasks without their own and "
            "run again at the end: " + "; ".join(f"`{c}`" for c in accept_cmds)
        )
    return Request(
        system=prompts.load("planner"),
        goal=goal,
        instructions=instructions,
        recalled=recalled,
        context=context,
        goal_header="GOAL:",
    ).fitted([PLAN_TOOL], window)


def make_plan(
    model: ChatModel,
    messages: list[Message],
    check: Callable[[Plan], dict[int, str]] | None = None,
    fallback: bool = False,
    log: Log | None = None,
) -> tuple[Plan, int]:
    """A valid plan and the number of requests it took; AgentError when the re-ask fails too.

    `check` names the tasks whose acceptance command the harness cannot use; such a plan
    goes back to the model with the reasons. When the second plan still has some and
    `fallback` is set (the user gave --accept), those tasks are judged by the user's
    commands instead of failing the run.
    """

    def problems(submitted: SubmittedPlan) -> dict[int, str]:
        return check(submitted.plan()) if check else {}

    def refused(submitted: SubmittedPlan) -> str | None:
        found = problems(submitted)
        return "; ".join(f"task {i + 1}: {why}" for i, why in sorted(found.items())) or None

    got = ask(model, messages, PLAN, log=log, check=refused)
    if not isinstance(got, Failure):
        return got.value.plan(), got.requests
    if fallback and got.refused is not None:
        plan = got.refused.plan()
        for index in problems(got.refused):
            plan.tasks[index].acceptance_cmd = None  # judged by the user's --accept
        return plan, got.requests
    raise AgentError(
        f"the model did not produce a valid plan twice: {got.error}",
        CUT_HINT if got.cut else "try a clearer goal or a model that supports function tools",
    )
