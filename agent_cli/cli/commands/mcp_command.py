"""`agent mcp list`: each configured MCP server, its transport, status and tools.

Only typer is imported at module level; the SDK loads when a configured server is started.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer

from agent_cli.cli.help import Command

mcp_app = typer.Typer(
    help="The MCP servers whose tools a run offers.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


@mcp_app.command(
    "list",
    cls=Command,
    short_help="Start each configured MCP server, list its transport, status and tools, and stop it.",
)
def list_command(
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print the servers as one JSON list."),
) -> None:
    """Start each configured MCP server, list its tools, and stop it (the model is not asked)."""
    from agent_cli.cli.mcp_tools import status_json, status_text, statuses
    from agent_cli.cli.shared import current_dir, find_repo, settings_for
    from agent_cli.core.errors import AgentError

    try:
        root: Path | None = find_repo(repo)
    except AgentError:
        if repo is not None:
            raise
        root = None
    settings = settings_for(root)
    where = root or current_dir()
    found = statuses(settings, where, settings.state_dir(where))
    if json_out:
        typer.echo(json.dumps([status_json(s) for s in found]))
    elif not found:
        typer.echo("no MCP servers configured (add [mcp_servers.NAME] to ~/.agentrc)")
    else:
        for status in found:
            typer.echo(f"{status.name}: {status_text(status)}")
    failed = any(s.status.startswith(("failed", "not connected")) for s in found)
    raise typer.Exit(1 if failed else 0)
