"""`agent trust`: let a repository's `.agentrc` choose the endpoint and model.

Only typer is imported at module level. Trust is recorded in the user's own state
(`agent_cli.cli.config.trust.trust_file`), never in the repository, and covers the `.agentrc` as it
is now: when the file changes, the repository is untrusted again until the next `agent trust`.
"""

from __future__ import annotations

from pathlib import Path

import typer


def trust_command(
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
    revoke: bool = typer.Option(False, "--revoke", help="Stop trusting the repository."),
) -> None:
    """Trust this repository's .agentrc to set the keys that need trust (endpoints, models, memory_url)."""
    from agent_cli.cli.config import trust
    from agent_cli.cli.wiring import find_repo

    root = find_repo(repo)
    rc = root / ".agentrc"
    if not revoke and not rc.is_file():
        from agent_cli.core.errors import ConfigError

        raise ConfigError(
            f"there is no .agentrc in {root} to trust; nothing was recorded",
            "settings come from ~/.agentrc, the environment and flags until the repository has one",
        )
    path = trust.record(root, revoke=revoke)
    if revoke:
        typer.echo(f"{root} is no longer trusted (recorded in {path})")
        return
    what = rc.read_text(encoding="utf-8", errors="replace")
    endpoint = [
        line.strip()
        for line in what.splitlines()
        if line.split("=", 1)[0].strip() in ("base_url", "model", "embedding_model")
    ]
    typer.echo(f"trusted {root} (recorded in {path})")
    if endpoint:
        typer.echo("its .agentrc now sets: " + "; ".join(endpoint))
    typer.echo(
        "safety settings (approval, sandbox, home) still come only from you; "
        "if .agentrc changes, run `agent trust` again"
    )
