"""The `[[hooks.*]]` tables of an `.agentrc`: which command runs at which point, for which tools."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, field_validator

from agent_cli.core.redact import redact_argv
from agent_cli.tools.hooks.matchable import needs_other

HookEvent = Literal["pre_tool", "post_tool", "task_verified", "run_end"]
HOOK_EVENTS: tuple[HookEvent, ...] = ("pre_tool", "post_tool", "task_verified", "run_end")
TOOL_EVENTS: tuple[HookEvent, ...] = ("pre_tool", "post_tool")  # the events a matcher picks for
DEFAULT_TIMEOUT_S = 30.0
MAX_TIMEOUT_S = 3600.0


class HookSpec(BaseModel):
    """One hook: the tools it watches (a regular expression, full match), its argv, its timeout."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    matcher: str = ".*"  # over tool names (pre_tool, post_tool); the other events ignore it
    command: list[str] = Field(min_length=1)
    timeout_s: StrictFloat = Field(DEFAULT_TIMEOUT_S, gt=0, le=MAX_TIMEOUT_S)  # `true` is none

    @field_validator("matcher")
    @classmethod
    def _compiles(cls, matcher: str) -> str:
        """A regular expression Python can compile that can match a tool's name (`matchable`);
        empty means every tool."""
        try:
            re.compile(matcher)
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from None
        other = needs_other(matcher)
        if other is not None:
            raise ValueError(
                f"matches no tool: it needs {other!r}, and tool names hold only letters, "
                "digits, _ and - (an MCP server's tool git.push is mcp__SERVER__git_push)"
            )
        return matcher or ".*"

    @field_validator("command")
    @classmethod
    def _program(cls, command: list[str]) -> list[str]:
        """An argv whose program is named."""
        if not command[0].strip():
            raise ValueError("the first item must name the program to run")
        if any("\0" in arg for arg in command):
            raise ValueError("a command cannot hold a NUL character")
        return command

    def matches(self, tool: str) -> bool:
        """Whether this hook runs for `tool` (the whole name must match)."""
        return re.fullmatch(self.matcher, tool) is not None

    def shown(self) -> str:
        """The command as one line, for the log, the events and doctor: what it names as a
        credential masked (`--token VALUE`; see redact_argv)."""
        return " ".join(redact_argv(self.command))


class HooksConfig(BaseModel):
    """Every configured hook, by the point of the run it runs at, in the order given."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pre_tool: list[HookSpec] = Field(default_factory=list)
    post_tool: list[HookSpec] = Field(default_factory=list)
    task_verified: list[HookSpec] = Field(default_factory=list)
    run_end: list[HookSpec] = Field(default_factory=list)

    def at(self, event: HookEvent) -> list[HookSpec]:
        """The hooks of `event`."""
        hooks: list[HookSpec] = getattr(self, event)
        return hooks

    def summary(self) -> str:
        """Each configured hook on one line, e.g. `pre_tool: python guard.py (write_file)`."""
        return "; ".join(
            f"{e}: {h.shown()}" + (f" ({h.matcher})" if h.matcher != ".*" else "")
            for e in HOOK_EVENTS
            for h in self.at(e)
        )

    def unmatched(self, tools: Sequence[str]) -> list[str]:
        """A line for each pre_tool or post_tool hook whose matcher matches none of `tools`
        (every tool of the run): it never runs, and a guard whose matcher misspells a name
        would otherwise guard nothing, unseen."""
        return [
            f"{e} hook {h.shown()} matches none of this run's tools with {h.matcher!r}, so it "
            "never runs (its matcher is a regular expression over the names the model calls "
            "tools by: `agent mcp list` shows the MCP servers')"
            for e in TOOL_EVENTS
            for h in self.at(e)
            if not any(h.matches(tool) for tool in tools)
        ]

    def any(self) -> bool:
        """Whether any hook is configured at all."""
        return any(self.at(e) for e in HOOK_EVENTS)


def combined(first: HooksConfig, then: dict[str, Any]) -> dict[str, Any]:
    """`first`'s hooks followed by those of the `.agentrc` table `then`, as one table."""
    later = HooksConfig.model_validate(then)
    return {e: [h.model_dump() for h in first.at(e) + later.at(e)] for e in HOOK_EVENTS}
