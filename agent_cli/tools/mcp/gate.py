"""MCP tool calls approved like commands: `deny_tools` refuses, then auto or the user's answer."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Sequence
from typing import Any

from agent_cli.core.protocols import ToolProvider, ToolReply
from agent_cli.tools.mcp.provider import Reply

ARGS_SHOWN = 200  # characters of the arguments shown in the question


class GatedTools:
    """A ToolProvider whose calls pass `deny_tools`, then approval ("auto", or ask the user)."""

    def __init__(
        self,
        inner: ToolProvider,
        *,
        approval: str,
        deny: Sequence[str] = (),
        ask: Callable[[str], str] | None = None,
    ) -> None:
        if approval == "ask" and ask is None:
            raise ValueError("approval = ask needs an ask callable")
        self.inner, self.approval, self.deny, self.ask = inner, approval, list(deny), ask
        self.always: set[str] = set()

    def specs(self) -> list[dict[str, Any]]:
        return self.inner.specs()

    def owns(self, name: str) -> bool:
        return self.inner.owns(name)

    def refusal(self, name: str) -> str | None:
        """The `deny_tools` pattern that refuses `name`, or None."""
        return next((p for p in self.deny if fnmatch.fnmatchcase(name, p)), None)

    def call(self, name: str, args: dict[str, Any]) -> ToolReply:
        pattern = self.refusal(name)
        if pattern is not None:
            return Reply(
                f"error: tool refused: {name} matches deny_tools pattern {pattern!r}; it is "
                "never run, whatever the approval setting",
                False,
                "refused by deny_tools",
            )
        if self.approval != "auto" and name not in self.always:
            assert self.ask is not None  # checked when made
            shown = json.dumps(args, ensure_ascii=False)
            if len(shown) > ARGS_SHOWN:
                shown = shown[:ARGS_SHOWN] + "…"
            answer = str(self.ask(f"{name} {shown}") or "").strip().lower()
            if answer in ("a", "always"):
                self.always.add(name)
            elif answer not in ("y", "yes"):
                return Reply("error: the user declined to run this tool", False, "declined")
        return self.inner.call(name, args)
