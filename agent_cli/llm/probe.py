"""What a server can do, for `agent doctor`: its context window, whether a forced single tool
works (one tiny streamed request, a second in the other form if the first got no call) and
whether it streams, then what a run will use."""

from __future__ import annotations

from dataclasses import dataclass

from agent_cli.errors import ModelError
from agent_cli.llm.base import function_tool
from agent_cli.llm.server_info import fit_window

PROBE_TOOL = function_tool("report_status", "Report that the check works.",
                           {"ok": {"type": "boolean"}})
PROBE_MESSAGES = [{"role": "user", "content": "This is a connectivity check. Call report_status "
                                              "with ok set to true."}]


@dataclass
class ServerReport:
    """What the probe found."""

    window: int
    window_source: str
    forced_form: str | None  # "required" or "object" when a forced tool was called, else None
    streaming: bool
    requests: int


def probe(chat) -> ServerReport:
    """Ask `chat` (an OpenAIChat) at most two tiny forced-tool requests."""
    window, source = chat.context_window, chat.context_source
    form = None
    for n in (1, 2):
        tried = chat.forced_form
        reply = chat.chat(PROBE_MESSAGES, [PROBE_TOOL], "required")
        if any(c.name == "report_status" for c in reply.tool_calls):
            form = chat.forced_form  # the form that worked (a refused one was switched already)
            break
        if chat.forced_form == tried:  # nothing else to try
            break
    return ServerReport(window, source, form, chat.streaming, n)


def describe(report: ServerReport, memory_max: int, tool_output_max: int,
             reply_max: int) -> str:
    """The findings on a few lines; ModelError when a forced tool cannot work (plans fail)."""
    memory, tool_output, reply = fit_window(report.window, memory_max, tool_output_max, reply_max)
    if report.forced_form is None:
        raise ModelError("the model did not call a forced tool (tried tool_choice \"required\" "
                         "and the object form); planning needs it",
                         "use a model with function calling; llama.cpp needs --jinja")
    choice = ('"required"' if report.forced_form == "required"
              else '{"type": "function", "function": {"name": ...}}')
    return "\n".join([
        f"context window {report.window:,} tokens (from {report.window_source})",
        f"           forced single tool works (tool_choice {choice})",
        f"           streaming: {'yes' if report.streaming else 'no, whole replies'}",
        f"           a run will use: {'streamed' if report.streaming else 'whole'} replies, "
        f"tool_choice {choice}, replies up to {reply:,} tokens, working memory {memory:,} "
        f"and tool output {tool_output:,} tokens",
    ])
