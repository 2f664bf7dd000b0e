"""What a server can do, for `agent doctor`: its context window, whether a forced single tool
works (one tiny streamed request, and one in each further form while none got the call; see
forcing.py), whether a plan-sized forced reply fits in the room a run leaves for replies, and
whether it streams, then what a run will use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_cli.core import strictjson
from agent_cli.core.errors import ModelError
from agent_cli.llm.base import force, function_tool
from agent_cli.llm.server.info import fit_window
from agent_cli.llm.wire.forcing import DESCRIBED

if TYPE_CHECKING:
    from agent_cli.llm.openai.chat import OpenAIChat

PROBE_TOOL = function_tool(
    "report_status", "Report that the check works.", {"ok": {"type": "boolean"}}
)
PROBE_MESSAGES = [
    {
        "role": "user",
        "content": "This is a connectivity check. Call report_status with ok set to true.",
    }
]


PLAN_PROBE_TOOL = function_tool(
    "submit_plan",
    "Submit the plan: its tasks, each with a shell command that checks it.",
    {
        "tasks": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"goal": {"type": "string"}, "acceptance_cmd": {"type": "string"}},
                "required": ["goal", "acceptance_cmd"],
            },
        }
    },
)
PLAN_PROBE_MESSAGES = [
    {
        "role": "user",
        "content": "This is a check that a plan fits in a reply. Call submit_plan with two "
        "tasks for the goal 'add a function add(a, b) to calc.py, with a pytest test': "
        "write the function, then write its test; each acceptance_cmd is a pytest command.",
    }
]


@dataclass
class ServerReport:
    """What the probe found."""

    window: int
    window_source: str
    forced_form: str | None  # the forcing.FORMS entry that got the call, else None
    streaming: bool
    plan: str = ""  # why a plan-sized forced reply failed ("" when it came back whole)
    # whether a plan-sized reply was asked for (not of a server that never plans)
    planned: bool = True


def probe(chat: OpenAIChat, plans: bool = True) -> ServerReport:
    """Ask `chat` (an OpenAIChat) for a tiny forced-tool call; it tries each form in turn. Then,
    when the server `plans` (serves the planner), for a plan-sized forced reply."""
    reply = chat.chat(PROBE_MESSAGES, [PROBE_TOOL], "required")
    # read after the reply: a hosted API is asked its window only once it has answered
    window, source = chat.context_window, chat.context_source
    called = any(c.name == "report_status" for c in reply.tool_calls)
    form = chat.forcing.form if called else None
    plan = _plan_sized(chat) if called and plans else ""
    return ServerReport(window, source, form, chat.streaming, plan, plans)


def _plan_sized(chat: OpenAIChat) -> str:
    """Why a small forced `submit_plan` does not come back whole ("" when it does); forced as
    a run forces its one tool, in the form the first probe found."""
    reply = chat.chat(PLAN_PROBE_MESSAGES, [PLAN_PROBE_TOOL], force("submit_plan"))
    calls = [c for c in reply.tool_calls if c.name == "submit_plan"]
    cut = reply.finish_reason == "length"
    try:
        tasks = strictjson.loads(calls[0].arguments).get("tasks") if calls else None
    except (ValueError, AttributeError):
        tasks = None
    if isinstance(tasks, list) and tasks:
        return ""
    if cut:
        return "a plan-sized reply was cut at the length limit"
    return "a plan-sized forced reply did not call submit_plan with tasks"


def describe(
    report: ServerReport,
    memory_max: int,
    tool_output_max: int,
    reply_max: int,
    narrowest: tuple[int, str] | None = None,
) -> str:
    """The findings on a few lines; ModelError when a forced tool cannot work (plans fail).
    `narrowest` is a smaller window of another role's endpoint, and whose: working memory and
    tool output are fitted to it, as a run fits them to the smallest window of its roles."""
    _, _, reply = fit_window(report.window, memory_max, tool_output_max, reply_max)
    fitted, at = narrowest if narrowest and narrowest[0] < report.window else (report.window, "")
    memory, tool_output, _ = fit_window(fitted, memory_max, tool_output_max, reply_max)
    why = f" (fitted to the {fitted:,}-token window of {at}, the smallest)" if at else ""
    if report.forced_form is None:
        raise ModelError(
            'the model did not call a forced tool (tried tool_choice "required", '
            "the object form and a json_schema response_format); planning needs it",
            "use a model with function calling; llama.cpp needs --jinja",
        )
    if report.plan:
        room = (
            "raise reserved_output_tokens"
            if reply < report.window // 4
            else f"serve the model with a larger context (a reply gets at most a quarter of the "
            f"{report.window:,} the server reports; llama.cpp: -c)"
        )
        raise ModelError(
            f"the forced single tool works, but {report.plan}: planning will fail the same way",
            f"a run's replies get up to {reply:,} tokens here: {room}, "
            "or use a model that follows forced tools with longer arguments",
        )
    choice = DESCRIBED[report.forced_form]
    return "\n".join(
        [
            f"context window {report.window:,} tokens (from {report.window_source})",
            f"           forced single tool works ({choice})"
            + (", and a plan-sized reply" if report.planned else ""),
            f"           streaming: {'yes' if report.streaming else 'no, whole replies'}",
            f"           a run will use: {'streamed' if report.streaming else 'whole'} replies, "
            f"{choice}, replies up to {reply:,} tokens, working memory {memory:,} "
            f"and tool output {tool_output:,} tokens{why}",
        ]
    )
