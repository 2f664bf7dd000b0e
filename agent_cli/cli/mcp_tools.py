"""A run's MCP servers as the command layer builds them, and how their state is shown."""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agent_cli.cli.config.settings import Settings
    from agent_cli.core.protocols import ToolProvider
    from agent_cli.tools.held import Started
    from agent_cli.tools.mcp.provider import McpTools, ServerStatus


def build_tools(
    settings: Settings,
    root: Path,
    state_dir: Path,
    notice: Callable[[str], None],
    started: Started | None = None,
) -> McpTools | None:
    """The configured servers as one provider (not started yet); None when there are none.
    `started`: a resumed run's files as the run began (`tools.held`)."""
    if not settings.mcp_servers:
        return None
    from agent_cli.tools.mcp.provider import McpTools
    from agent_cli.workspace.shell import runner as shell

    wrap = None
    if settings.sandbox == "bwrap":
        readonly = [root / ".git", state_dir, root / ".agentrc"]

        def wrap(argv: list[str]) -> list[str]:
            return shell.bwrap_argv(argv, root, [root], readonly)

    secrets = settings.secrets()
    return McpTools(
        settings.mcp_servers,
        env=shell.scrub_env(dict(os.environ), list(secrets)),  # what model commands get
        cwd=root,
        environ=os.environ,
        wrap=wrap,
        notice=notice,
        secrets=secrets,
        started=started,
    )


class RunTools:
    """A run's MCP servers: started when the first toolbox is made, stopped by `close`."""

    def __init__(
        self,
        settings: Settings,
        root: Path,
        state_dir: Path,
        *,
        ask: Callable[[str], str],
        notice: Callable[[str], None],
        started: Started | None = None,
    ) -> None:
        self.settings, self.root, self.state_dir = settings, root, state_dir
        self.ask, self.notice, self.started = ask, notice, started
        self.tools: McpTools | None = None
        self.gated: ToolProvider | None = None
        # the share of every request the MCP tools may take (set once the window is known)
        self.max_tokens: int | None = None

    def providers(self) -> list[ToolProvider]:
        """The gated MCP tools, their servers started on the first call."""
        if self.gated is None:
            self.tools = build_tools(
                self.settings, self.root, self.state_dir, self.notice, self.started
            )
            if self.tools is None:
                return []
            from agent_cli.tools.mcp.gate import GatedTools

            self.tools.start()
            if self.max_tokens is not None:
                self.tools.within(self.max_tokens)
            self.gated = GatedTools(
                self.tools,
                approval=self.settings.approval,
                deny=self.settings.deny_tools,
                ask=self.ask,
            )
        return [self.gated]

    def close(self) -> None:
        """Stop every server the run started."""
        if self.tools is not None:
            self.tools.close()


def statuses(settings: Settings, root: Path, state_dir: Path) -> list[ServerStatus]:
    """Start each configured server, read its tools, stop it: what doctor and `mcp list` show."""
    notes: list[str] = []
    tools = build_tools(settings, root, state_dir, notes.append)
    if tools is None:
        return []
    try:
        return tools.start()
    finally:
        tools.close()


def status_text(status: ServerStatus) -> str:
    """One server on one line: transport, status, tools (what the server said, as `shown`)."""
    row = status_json(status)
    tools = ", ".join(row["tools"]) if row["tools"] else "no tools"
    left = f"; left out: {', '.join(row['left_out'])}" if row["left_out"] else ""
    unlisted = row["unlisted"]
    named = f"; not listed by the server: {', '.join(unlisted)}" if unlisted else ""
    return f"{row['transport']}, {row['status']}; {tools}{left}{named}"


def status_json(status: ServerStatus) -> dict[str, Any]:
    """One server as `agent mcp list --json` prints it: its tools' names and the reasons it
    gives (a server's stderr among them) as `shown`, the reasons on one line."""
    from agent_cli.core.text import clean

    return {
        "name": status.name,
        "transport": status.transport,
        "status": shown(" ".join(clean(status.status).split())),
        "tools": [shown(name) for name in status.tools],
        "left_out": [shown(name) for name in status.left_out],
        "unlisted": [shown(name) for name in status.unlisted],
    }


def shown(text: str) -> str:
    """What a server said, as one line to show: terminal escape sequences and control
    characters removed (`clean`), and each character left that breaks a line or is drawn as
    nothing (a line feed, a line or paragraph separator, a zero-width or bidirectional mark)
    written as its escape (`\\n`, `\\u2028`), so a tool's name cannot start a line of its own."""
    from agent_cli.core.text import clean

    return "".join(_escaped(c) for c in clean(text))


def _escaped(char: str) -> str:
    if char == "\n":
        return "\\n"
    if unicodedata.category(char) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
        return f"\\u{ord(char):04x}" if ord(char) <= 0xFFFF else f"\\U{ord(char):08x}"
    return char
