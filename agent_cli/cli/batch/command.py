"""`agent batch FILE`: the typer command; only typer is imported at module level."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from agent_cli.cli.help import Command


def _finite(value: float | None) -> float | None:
    """A budget that is a number of dollars: `inf` would start every run only for each of
    them to refuse it."""
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"input should be a finite number (got {value})")
    return value


def batch_command(
    file: Path = typer.Argument(
        ...,
        metavar="FILE",
        help="The goals: TOML [[goals]] tables, or JSON lines "
        "(goal, accept, max_steps, budget_usd).",
        show_default=False,
    ),
    jobs: int = typer.Option(2, "--jobs", "-j", metavar="N", min=1, help="Runs at a time."),
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
    model: str | None = typer.Option(None, "--model", metavar="NAME", help="Model name."),
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL", help="OpenAI-compatible endpoint."
    ),
    budget_usd: float | None = typer.Option(
        None,
        "--budget-usd",
        metavar="USD",
        min=0,
        callback=_finite,
        help="Money allowed for the whole batch.",
    ),
    yes: bool = typer.Option(
        False, "--yes", "-y", help="Approve every run's plan and commands without asking."
    ),
    json_out: bool = typer.Option(
        False, "--json", help="Print every run's events as one JSON-lines stream."
    ),
) -> None:
    """Run each goal of FILE in a worktree of its own, N at a time, and report them together."""
    from agent_cli.cli.batch.runner import BatchOptions, run_batch

    opts = BatchOptions(
        file=file,
        jobs=jobs,
        repo=repo,
        model=model,
        base_url=base_url,
        budget_usd=budget_usd,
        yes=yes,
        json_out=json_out,
    )
    raise typer.Exit(run_batch(opts))


def register(app: typer.Typer) -> None:
    """Add `batch` to the main app."""
    app.command("batch", cls=Command, short_help="Run many goals at once, each in a worktree.")(
        batch_command
    )
