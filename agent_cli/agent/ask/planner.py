"""Turn a goal into a Plan through the forced tool `submit_plan`, asking once more if invalid."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import ValidationError

from agent_cli.agent.ask import prompts
from agent_cli.agent.ask.request import Request
from agent_cli.agent.ask.window import Window
from agent_cli.agent.run.state import MAX_TASKS
from agent_cli.core import fences, strictjson
from agent_cli.core.errors import AgentError, MalformedReply
from agent_cli.core.models import Plan
from agent_cli.core.protocols import ChatModel
from agent_cli.llm.base import force, function_tool

# The bounds matter where a server turns the schema into a grammar (llama.cpp, vLLM): a small
# model held to the schema may otherwise go on adding tasks until its reply is cut off.
_TEXT = {"type": "string", "maxLength": 600}
_TASK = {
    "type": "object",
    "properties": {
        "goal": _TEXT,
        "acceptance": _TEXT,
        "acceptance_cmd": {"type": ["string", "null"], "maxLength": 600},
    },
    "required": ["goal", "acceptance", "acceptance_cmd"],
}

PLAN_TOOL = function_tool(
    "submit_plan",
    "Submit the plan: the goal, its tasks in order, and the success criteria.",
    {
        "goal": _TEXT,
        "tasks": {"type": "array", "items": _TASK, "minItems": 1, "maxItems": MAX_TASKS},
        "success_criteria": _TEXT,
    },
)


def _parse(reply) -> Plan:
    """The plan in a reply, or ValueError saying what is wrong with it."""
    calls = [c for c in reply.tool_calls if c.name == "submit_plan"]
    if not calls and reply.finish_reason == "length":
        raise ValueError("the reply was cut at the length limit before it called submit_plan")
    if not calls:
        raise ValueError("the reply did not call submit_plan")
    try:
        data = strictjson.loads(calls[0].arguments)
    except ValueError as e:
        raise ValueError(f"submit_plan arguments are unusable: {e}") from None
    try:
        return Plan.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"invalid plan at {where or 'top level'}: {err['msg']}") from None


def plan_messages(
    goal: str,
    recalled: str,
    repo_files: str,
    accept_cmds: list[str],
    instructions: str = "",
    window: Window | None = None,
) -> list:
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
    messages: list[dict],
    check: Callable[[Plan], dict[int, str]] | None = None,
    fallback: bool = False,
) -> tuple[Plan, int]:
    """A valid plan and the number of requests it took; AgentError after two invalid ones.

    `check` names the tasks whose acceptance command the harness cannot use; such a plan
    goes back to the model with the reasons. When the second plan still has some and
    `fallback` is set (the user gave --accept), those tasks are judged by the user's
    commands instead of failing the run.
    """
    error = ""
    for attempt in (1, 2):
        ask = list(messages)
        if error:
            ask.insert(
                -1,
                {
                    "role": "user",
                    "content": f"Your previous plan was rejected: {error}. "
                    "Call submit_plan again with a valid plan.",
                },
            )
        try:
            plan = _parse(model.chat(ask, [PLAN_TOOL], force("submit_plan")))
        except MalformedReply as e:
            error = e.message
            continue
        except ValueError as e:
            error = str(e)
            continue
        problems = check(plan) if check else {}
        if not problems:
            return plan, attempt
        error = "; ".join(f"task {i + 1}: {why}" for i, why in sorted(problems.items()))
        if attempt == 2 and fallback:
            for index in problems:
                plan.tasks[index].acceptance_cmd = None  # judged by the user's --accept
            return plan, attempt
    raise AgentError(
        f"the model did not produce a valid plan twice: {error}",
        "try a clearer goal or a model that supports function tools",
    )
