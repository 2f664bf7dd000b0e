"""`agent run` and `agent runs`: build the run's objects from Settings and hand them to a Session.

Only typer is imported at module level; everything heavy is imported inside the command.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from typer._click.core import Context
from typer._click.exceptions import UsageError as FlagError

from agent_cli.cli.help import Command
from agent_cli.core.errors import AgentError, UsageError
from agent_cli.core.text import blank, typed

if TYPE_CHECKING:
    from agent_cli.cli.wiring import AnswerKind


def run_command(
    goal: str | None = typer.Argument(
        None, metavar="GOAL", help="What to achieve, in plain words.", show_default=False
    ),
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
    model: str | None = typer.Option(None, "--model", metavar="NAME", help="Model name."),
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL", help="OpenAI-compatible endpoint."
    ),
    accept: list[str] = typer.Option(
        [],
        "--accept",
        metavar="CMD",
        help="A user acceptance command (repeatable): "
        "used by tasks without their own, and run again at the end.",
    ),
    max_steps: int | None = typer.Option(
        None, "--max-steps", metavar="N", help="Tool calls allowed in the run."
    ),
    budget_usd: float | None = typer.Option(
        None, "--budget-usd", metavar="USD", help="Money allowed for the run."
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="Approve the plan and every command."),
    json_out: bool = typer.Option(
        False, "--json", help="Print events as JSON lines, nothing else."
    ),
    resume: bool = typer.Option(False, "--resume", help="Continue the latest unfinished run."),
    run_id: str | None = typer.Option(
        None, "--run-id", metavar="ID", help="With --resume: the run to continue."
    ),
    hint: str | None = typer.Option(
        None,
        "--hint",
        metavar="TEXT",
        help="With --resume: one more attempt at the rejected task, carrying these words.",
    ),
    skip: bool = typer.Option(
        False,
        "--skip",
        help="With --resume: go on without the rejected task (its changes stay uncommitted).",
    ),
    replan: str | None = typer.Option(
        None,
        "--replan",
        metavar="NOTE",
        help="With --resume: re-plan the remaining work, with this note for the model.",
    ),
    allow_dirty: bool = typer.Option(
        False,
        "--allow-dirty",
        help="Start with uncommitted changes "
        "(they are never staged, committed, reverted or overwritten).",
    ),
    worktree: bool = typer.Option(
        False,
        "--worktree",
        help="Work in a worktree of its own (.agent/worktrees/RUN-ID), "
        "leaving your checkout as it is.",
    ),
    plan_only: bool = typer.Option(False, "--plan-only", help="Print the plan and exit."),
    replay: Path | None = typer.Option(
        None,
        "--replay",
        metavar="FILE",
        help="Serve the model's replies from a recording (JSONL) instead of an endpoint.",
    ),
    record: Path | None = typer.Option(
        None, "--record", metavar="FILE", help="Record every model exchange to JSONL."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show the diff of every edit."),
) -> None:
    """Plan GOAL into tasks, carry each out with tools, and verify each with its acceptance command."""
    try:
        answer = resume_answer(resume, hint, skip, replan)  # --hint alone: say --resume
        if not resume and (goal is None or blank(goal)):
            raise UsageError('a goal is needed: agent run "GOAL" (or --resume)')
        if resume and goal is not None:  # never dropped unsaid: it was meant for something
            raise UsageError(
                "--resume goes on with the stopped run's own goal, and a GOAL was given too",
                'give no GOAL to resume (words for the model: --hint "..."), '
                "or no --resume to start a new run",
            )
        if run_id and not resume:
            raise UsageError("--run-id goes with --resume")
        if plan_only and resume:
            raise UsageError(
                "--plan-only makes a new plan, and --resume goes on without planning again",
                "use one of them",
            )
        _check_text(goal=goal, hint=hint, replan=replan, accept=accept)
        from agent_cli.cli.worktree import check_flags

        check_flags(worktree, allow_dirty, resume)
    except AgentError as e:
        if json_out:
            print_run_done(e.exit_code, e.one_line())
        raise
    from agent_cli.cli.wiring import RunOptions, execute

    opts = RunOptions(
        goal=goal,
        repo=repo,
        accept=list(accept),
        yes=yes,
        json_out=json_out,
        resume=resume,
        run_id=run_id,
        allow_dirty=allow_dirty,
        plan_only=plan_only,
        replay=replay,
        record=record,
        verbose=verbose,
        answer=answer,
        worktree=worktree,
        flags={
            "model": model,
            "base_url": base_url,
            "max_steps": max_steps,
            "budget_usd": budget_usd,
            "approval": "auto" if yes else None,
        },
    )
    raise typer.Exit(execute(opts))


def resume_answer(
    resume: bool, hint: str | None, skip: bool, replan: str | None
) -> tuple[AnswerKind, str] | None:
    """The answer to a rejected task given on the command line, checked; None when none."""
    given: list[tuple[AnswerKind, str]] = []
    if hint is not None:
        given.append(("hint", hint))
    if skip:
        given.append(("skip", ""))
    if replan is not None:
        given.append(("replan", replan))
    if not given:
        return None
    names = " and ".join(f"--{kind}" for kind, _ in given)
    if not resume:
        verb = "goes" if len(given) == 1 else "go"
        raise UsageError(f"{names} {verb} with --resume: it answers a stopped run's rejected task")
    if len(given) > 1:
        raise UsageError(f"{names} exclude each other: give one answer")
    kind, text = given[0]
    words, why = typed(text)  # cleaned as a line typed at the question is
    if why:
        raise UsageError(f"--{kind} {why}", "give it as plain UTF-8 text")
    if kind == "hint" and blank(words):
        raise UsageError('--hint needs the words to pass on, e.g. --hint "use statistics.median"')
    return kind, words


def runs_command(
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
    json_out: bool = typer.Option(False, "--json", help="Print a JSON array."),
) -> None:
    """List the runs in this repository with their status."""
    from agent_cli.cli.commands.runs_commands import list_runs

    list_runs(repo, json_out)


def print_run_done(code: int, message: str) -> None:
    """End a --json stream of a run refused before it began with `run_done` for its exit."""
    from agent_cli.core.events import RunDone
    from agent_cli.core.redact import redact

    done = RunDone(
        run_id="",
        status="failed",
        exit_code=code,
        tasks=[],
        steps=0,
        prompt_tokens=0,
        completion_tokens=0,
        cost_usd=0.0,
        message=redact(message),  # printed beside the console: the known key shapes masked
    )
    print(done.model_dump_json(), flush=True)


class RunCommandLine(Command):
    """`agent run`, whose --json stream ends with `run_done` even when a flag cannot be read."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        wants_json = "--json" in args[: args.index("--")] if "--" in args else "--json" in args
        try:
            return super().parse_args(ctx, args)
        except FlagError as e:
            if wants_json:
                print_run_done(e.exit_code, e.format_message())
            raise


def _check_text(**given: str | tuple[str, ...] | list[str] | None) -> None:
    """Refuse a goal, hint, note or command that cannot be sent as text (a NUL, not UTF-8)."""
    from agent_cli.core.text import unusable

    for name, value in given.items():
        values = [value] if isinstance(value, str) else list(value or ())
        for text in values:
            why = unusable(text)
            if why:
                flag = "the goal" if name == "goal" else f"--{name}"
                raise UsageError(f"{flag} {why}", "give it as plain UTF-8 text")


def register(app: typer.Typer) -> None:
    """Add `run` and `runs` to the main app."""
    app.command("run", cls=RunCommandLine, short_help="Plan, carry out and verify a goal.")(
        run_command
    )
    app.command("runs", cls=Command)(runs_command)
