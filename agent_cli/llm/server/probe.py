"""What a server can do, for `agent doctor`: its context window, whether a forced single tool
works (one tiny streamed request, and one in each further form while none got the call; see
forcing.py) and whether it streams, then what a run will use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent_cli.core.errors import ModelError
from agent_cli.llm.base import function_tool
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


@dataclass
class ServerReport:
    """What the probe found."""

    window: int
    window_source: str
    forced_form: str | None  # the forcing.FORMS entry that got the call, else None
    streaming: bool


def probe(chat: OpenAIChat) -> ServerReport:
    """Ask `chat` (an OpenAIChat) for a tiny forced-tool call; it tries each form in turn."""
    reply = chat.chat(PROBE_MESSAGES, [PROBE_TOOL], "required")
    # read after the reply: a hosted API is asked its window only once it has answered
    window, source = chat.context_window, chat.context_source
    called = any(c.name == "report_status" for c in reply.tool_calls)
    return ServerReport(window, source, chat.forcing.form if called else None, chat.streaming)


def describe(report: ServerReport, memory_max: int, tool_output_max: int, reply_max: int) -> str:
    """The findings on a few lines; ModelError when a forced tool cannot work (plans fail)."""
    memory, tool_output, reply = fit_window(report.window, memory_max, tool_output_max, reply_max)
    if report.forced_form is None:
        raise ModelError(
            'the model did not call a forced tool (tried tool_choice "required", '
            "the object form and a json_schema response_format); planning needs it",
            "use a model with function calling; llama.cpp needs --jinja",
        )
    choice = DESCRIBED[report.forced_form]
    return "\n".join(
        [
            f"context window {report.window:,} tokens (from {report.window_source})",
            f"           forced single tool works ({choice})",
            f"           streaming: {'yes' if report.streaming else 'no, whole replies'}",
            f"           a run will use: {'streamed' if report.streaming else 'whole'} replies, "
            f"{choice}, replies up to {reply:,} tokens, working memory {memory:,} "
            f"and tool output {tool_output:,} tokens",
        ]
    )
