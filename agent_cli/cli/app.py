"""The `agent` command: typer commands, AgentError -> one line on stderr and an exit code.

Only typer is imported at start-up; every heavy module (openai, chromadb, git, tiktoken,
pydantic-settings) is imported inside the command that needs it, so `--help` is instant.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from agent_cli import __version__
from agent_cli.cli.help import Command
from agent_cli.core.errors import AgentError
from agent_cli.core.redact import redact

if TYPE_CHECKING:
    from typer._click import Context


# The status of a command whose output's reader went away before the end (`| head`, a pager
# quit): 128 + SIGPIPE, the status the shell gives git or coreutils that a closed pipe stopped.
READER_GONE = 141


class _Commands(TyperGroup):
    """The commands, each ending in one line when Ctrl-C stops it, and quietly when what reads
    its output is gone.

    Typer ends a command that Ctrl-C interrupted with a silent exit 130, so the shell's prompt
    followed the `^C` on its line and nothing said what happened; `agent run`, which says
    itself where it stopped and how to resume, handles Ctrl-C before this sees it.

    A write to a closed pipe (what parsing writes: `--help`, `--version`; what the command
    writes) ends every command the same way, with nothing more written and `READER_GONE`:
    typer's own way is exit 1, the status of a failure. `agent run` and `agent batch`, which
    stop as interrupted with their state saved, handle it before this sees it."""

    def make_context(
        self, info_name: str | None, args: list[str], parent: Context | None = None, **extra: Any
    ) -> Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except BrokenPipeError:
            raise typer.Exit(_reader_gone()) from None

    def invoke(self, ctx: Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            print(file=sys.stderr)  # the line the `^C` was echoed on ends
            raise typer.Abort() from None
        except BrokenPipeError:
            raise typer.Exit(_reader_gone()) from None


def _reader_gone() -> int:
    """Point standard output at /dev/null (so that what is still buffered, flushed at exit,
    goes nowhere rather than failing again) and return `READER_GONE`."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # no file behind it: nothing to flush at exit
        return READER_GONE
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
    return READER_GONE


app = typer.Typer(
    cls=_Commands,
    name="agent",
    help="A coding agent that plans work in a git repository, carries it out with tools, "
    "proves each step by running an acceptance command, and remembers what it learned.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},  # every command inherits it
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"agent {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Plan, execute and verify work in a git repository, and remember."""


@app.command(cls=Command, short_help="Show the settings and check every part.")
def doctor(
    repo: Path | None = typer.Option(
        None, "--repo", metavar="DIR", help="Repository (default: current directory)."
    ),
    model: str | None = typer.Option(None, "--model", metavar="NAME", help="Model name."),
    base_url: str | None = typer.Option(
        None, "--base-url", metavar="URL", help="OpenAI-compatible endpoint."
    ),
) -> None:
    """Show the resolved settings and where each came from; check endpoint, tokenizer, state, git."""
    from agent_cli.cli.doctor import run_doctor

    raise typer.Exit(run_doctor(repo, {"model": model, "base_url": base_url}))


def _register_commands() -> None:
    """Commands built in their own modules (each imports only typer at module level)."""
    from agent_cli.cli.batch.command import register as register_batch
    from agent_cli.cli.commands.mcp_command import mcp_app
    from agent_cli.cli.commands.memory_commands import memory_app, recall_command
    from agent_cli.cli.commands.run_command import register as register_run
    from agent_cli.cli.commands.runs_commands import register as register_runs
    from agent_cli.cli.commands.trust_command import trust_command

    register_run(app)
    register_runs(app)
    app.command(
        "trust",
        cls=Command,
        short_help="Let this repository's .agentrc set the keys that need trust.",
    )(trust_command)
    app.command("recall", cls=Command, short_help="Search long-term memory by meaning.")(
        recall_command
    )
    app.add_typer(memory_app, name="memory")
    register_batch(app)
    app.add_typer(mcp_app, name="mcp")


_register_commands()


def usage_line(e: typer.TyperException) -> str:
    """A usage error as one line naming the closest option, or the help text it stands for."""
    message = e.format_message()
    if "\n" in message.strip():  # no arguments: the help itself
        return message.rstrip()
    ctx = getattr(e, "ctx", None)
    command = getattr(ctx, "command_path", "") or "agent"
    line = re.sub(
        r"\s*\(Possible options: (.*)\)$", r"; did you mean \1?", " ".join(message.split())
    )
    return f"error: {line} (see `{command} --help`)"


def _forget_unusable_size() -> None:
    """COLUMNS or LINES set to what is no size (`COLUMNS=0`, as some CI and editor shells
    have it) count as unset: a width of 0 would print nothing at all."""
    for name in ("COLUMNS", "LINES"):
        value = os.environ.get(name)
        if value is not None and not (value.strip().isdigit() and int(value) > 0):
            del os.environ[name]


# git's variables that name a repository other than the one git would find from its working
# directory (of `git rev-parse --local-env-vars`, less the user's own config)
OTHER_REPOSITORY = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_GRAFT_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_PREFIX",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_SHALLOW_FILE",
)


def _forget_other_repository() -> None:
    """The repository is the one `--repo` or the working directory is in: git's variables that
    name another (`GIT_DIR`, `GIT_INDEX_FILE`…, as a hook of another repository exports them)
    count as unset, for the harness's git, GitPython and the commands a run starts alike, so
    that one repository's memory, index and objects never stand in for another's."""
    for name in OTHER_REPOSITORY:
        os.environ.pop(name, None)


def main(argv: list[str] | None = None) -> None:
    """Console entry point: run the app on `argv` (default: the command line), turning our
    errors into one line and an exit code."""
    _forget_unusable_size()
    _forget_other_repository()
    code = _run(argv)
    try:
        sys.stdout.flush()  # what is still buffered goes out here, where a closed pipe is seen
    except BrokenPipeError:
        gone = _reader_gone()
        code = code or gone  # an error's own status stands
    interrupt_handled()
    sys.exit(code)


def interrupt_handled() -> None:
    """Forget that a Ctrl-C the command handled was ever unhandled, so the process exits with
    the command's own code. CPython marks a KeyboardInterrupt that came out of code compiled
    from a string (the dataclasses an import makes, say) as unhandled, caught or not, and a
    process so marked ends itself by SIGINT at exit; running such code again clears the mark."""
    exec("")


def _run(argv: list[str] | None) -> int:
    """Run the app on `argv`; its exit status, an error said in one line on stderr."""
    try:
        code = app(argv, standalone_mode=False, prog_name="agent")
    except typer.TyperException as e:
        print(usage_line(e), file=sys.stderr)
        return e.exit_code
    except typer.Abort:
        print("error: interrupted", file=sys.stderr)
        return 130
    except AgentError as e:
        print(f"error: {redact(e.one_line())}", file=sys.stderr)  # no key shape, whatever said it
        return e.exit_code
    except Exception as e:  # never a traceback for the user; AGENT_DEBUG=1 shows it
        if os.environ.get("AGENT_DEBUG"):
            raise
        print(
            f"error: internal error: {type(e).__name__}: {redact(str(e))} (set AGENT_DEBUG=1 for the "
            "traceback, and please report it)",
            file=sys.stderr,
        )
        return 1
    return code if isinstance(code, int) else 0
