"""MCP tool calls approved like commands: `deny_tools` refuses, then auto or the user's answer.

A `deny_tools` pattern refuses a tool by the name the model calls it (`mcp__git__git_push`)
or by the server's own (`mcp__git__git.push`, as `agent mcp list` shows it): a deny list that
failed open on the spelling of a name would refuse nothing, unseen. A pattern that names a
server of the run (`mcp__git__...`) and none of the tools it lists is said in one notice.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from agent_cli.core.protocols import ToolProvider, ToolReply
from agent_cli.core.text import clean
from agent_cli.tools.mcp.provider import Reply

ARGS_SHOWN = 200  # characters of the arguments shown in the question


class NamedTools(ToolProvider, Protocol):
    """The MCP tools (`provider.McpTools`) with the names a pattern may give them."""

    def names(self, name: str) -> tuple[str, ...]:
        """Every name of the offered tool `name`: that one, and the server's own."""
        ...

    def listed(self) -> dict[str, list[str]]:
        """Each server that started, with every name of every tool it listed."""
        ...

    @property
    def notice(self) -> Callable[[str], None]:
        """Where a line for the user goes."""
        ...


class GatedTools:
    """A ToolProvider whose calls pass `deny_tools`, then approval ("auto", or ask the user)."""

    def __init__(
        self,
        inner: NamedTools,
        *,
        approval: str,
        deny: Sequence[str] = (),
        ask: Callable[[str], str] | None = None,
    ) -> None:
        if approval == "ask" and ask is None:
            raise ValueError("approval = ask needs an ask callable")
        self.inner, self.approval, self.deny, self.ask = inner, approval, list(deny), ask
        self.always: set[str] = set()
        self._say_unmatched()

    def _say_unmatched(self) -> None:
        """Say each pattern that names a server of the run and matches none of its tools: it
        refuses nothing, and a misspelt tool name would otherwise let that tool run unseen."""
        listed = self.inner.listed()
        every = [name for names in listed.values() for name in names]
        for pattern in self.deny:
            server = next((s for s in listed if pattern.startswith(f"mcp__{s}__")), None)
            if server is not None and not any(fnmatch.fnmatchcase(n, pattern) for n in every):
                self.inner.notice(
                    f"deny_tools pattern {pattern!r} matches none of the tools MCP server "
                    f"{server} lists, so it refuses nothing (`agent mcp list` shows them)"
                )

    def specs(self) -> list[dict[str, Any]]:
        return self.inner.specs()

    def owns(self, name: str) -> bool:
        return self.inner.owns(name)

    def refusal(self, name: str) -> tuple[str, str] | None:
        """The `deny_tools` pattern that refuses `name` and the name of the tool it matches
        (`name`, or the server's own), or None."""
        names = self.inner.names(name)
        return next(((p, n) for p in self.deny for n in names if fnmatch.fnmatchcase(n, p)), None)

    def call(self, name: str, args: dict[str, Any]) -> ToolReply:
        refused = self.refusal(name)
        if refused is not None:
            pattern, matched = refused
            # the server's own name is its words: without control characters
            shown = name if matched == name else f"{name} ({clean(matched)})"
            return Reply(
                f"error: tool refused: {shown} matches deny_tools pattern {pattern!r}; it is "
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
