"""Build a run's objects from Settings (model, memories, tools, repository, console) and run it.

This is the command layer: the only place besides `cli.py` that reads Settings, and the
place where the vendor-backed pieces are chosen and handed to `agent.session`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_cli.errors import EXIT_INTERRUPTED, UsageError, WorkspaceError


@dataclass
class RunOptions:
    """What the `run` command was asked to do."""

    goal: str | None
    repo: Path | None
    accept: list[str] = field(default_factory=list)
    yes: bool = False
    json_out: bool = False
    resume: bool = False
    run_id: str | None = None
    allow_dirty: bool = False
    plan_only: bool = False
    replay: Path | None = None
    record: Path | None = None
    flags: dict[str, Any] = field(default_factory=dict)


def build_model(settings, opts: RunOptions, on_retry=None):
    """The ChatModel: a replayed recording, or the endpoint (optionally recorded)."""
    prices = (settings.price_input_per_mtok, settings.price_output_per_mtok)
    if opts.replay:
        from agent_cli.llm.record import ReplayModel

        model = ReplayModel(opts.replay, price_in=prices[0], price_out=prices[1],
                            name=settings.model)
    else:
        from agent_cli.llm.openai_model import OpenAIChat

        model = OpenAIChat(model=settings.model, base_url=settings.base_url, api_key=settings.key(),
                           price_in=prices[0], price_out=prices[1],
                           timeout_s=settings.request_timeout_s, max_retries=settings.max_retries,
                           backoff_s=settings.retry_backoff_s,
                           max_tokens=settings.reserved_output_tokens, on_retry=on_retry)
    if opts.record:
        from agent_cli.llm.record import RecordingModel

        model = RecordingModel(model, opts.record, secrets=settings.secrets())
    return model


class RepoWorkspace:
    """dispatch.Workspace over the git repository and the shell."""

    def __init__(self, repo, protected: set[str], run_argv, secrets: tuple[str, ...] = ()) -> None:
        self.repo, self.protected, self.run_argv = repo, protected, run_argv
        self.secrets = tuple(s for s in secrets if s)

    def changed_files(self) -> list[str]:
        return self.repo.changed_files(self.protected)

    def commit(self, paths: list[str], message: str) -> str | None:
        from agent_cli.redact import redact

        self._refuse_secrets(paths)
        return self.repo.commit_paths(paths, redact(message, self.secrets))

    def diff(self) -> str:
        from agent_cli.redact import redact

        return redact(self.repo.diff(self.protected), self.secrets)

    def _refuse_secrets(self, paths: list[str]) -> None:
        """Stop before committing a file that holds the API key (a command can dump it there)."""
        for path in paths:
            full = self.repo.root / path
            try:
                data = full.read_bytes() if full.is_file() and not full.is_symlink() else b""
            except OSError:
                continue
            if any(s.encode() in data for s in self.secrets):
                raise WorkspaceError(f"{path} holds the API key, so it was not committed",
                                     "remove the key from it (or delete it), then continue with "
                                     "`agent run --resume`")


def _services(settings, opts: RunOptions, repo_path: Path, console):
    from agent_cli.agent.session import Services
    from agent_cli.agent.toolbox import Toolbox
    from agent_cli.memory import SqliteStore, WorkingMemory
    from agent_cli.cli_common import make_embedder, memory_place
    from agent_cli.events import Notice
    from agent_cli.memory.fallback import FallbackLongTerm
    from agent_cli.memory.longterm import LongTermMemory
    from agent_cli.memory.records import format_for_context
    from agent_cli.workspace import shell
    from agent_cli.workspace.files import Files
    from agent_cli.workspace.git import GitRepo
    from agent_cli.workspace.lock import RunLock
    from agent_cli.workspace.policy import CommandPolicy

    shell.check_sandbox(settings.sandbox)
    repo = GitRepo(repo_path)
    state_dir = settings.state_dir(repo.root)
    secrets = settings.secrets()
    env = shell.scrub_env(dict(os.environ), list(secrets))
    embedder = make_embedder(settings)
    longterm_box: list = []

    def open_longterm():
        if not longterm_box:
            place = memory_place(settings, state_dir)
            longterm_box.append(FallbackLongTerm(
                lambda: LongTermMemory(place, embedder, secrets=secrets),
                notice=lambda text: console.emit(Notice(text=text))))
        return longterm_box[0]

    def run_argv(cmd):
        return shell.run_command(cmd, cwd=repo.root, timeout_s=settings.command_timeout_s,
                                 env=env, sandbox=settings.sandbox, writable=[repo.root],
                                 readonly=[repo.root / ".git", repo.git_dir, state_dir])

    policy = CommandPolicy(settings.approval, settings.deny_commands, state_dir,
                           ask=console.approve_command)

    def model_command(cmd: str):
        policy.check(cmd)
        return run_argv(cmd)

    def make_toolbox(memory, protected):
        files = Files(repo.root, deny_write=[state_dir], protected=protected)
        return Toolbox(files=files, run_command=model_command, is_test=shell.is_test_command,
                       memory=memory, secrets=secrets,
                       recall_longterm=lambda q: format_for_context(open_longterm().recall(q, k=3)))

    def open_memory(run_dir: Path):
        run_dir.mkdir(parents=True, exist_ok=True)
        return WorkingMemory(store=SqliteStore(run_dir / "memory.db"), embedder=embedder,
                             max_tokens=settings.memory_max_tokens,
                             recall_cooldown_steps=settings.recall_cooldown_steps)

    return Services(repo=repo, state_dir=state_dir, model=None, console=console,
                    allow_command=policy.allow,
                    open_longterm=open_longterm, open_memory=open_memory,
                    make_toolbox=make_toolbox,
                    workspace=lambda protected: RepoWorkspace(repo, protected, run_argv, secrets),
                    lock=RunLock(state_dir / "run.lock"))


def _check_approval(settings, opts: RunOptions) -> bool:
    """Whether to ask for plan approval; refuse when asking is needed but impossible."""
    from agent_cli.cli_run import stdin_is_terminal

    if settings.approval == "auto" or opts.plan_only:
        return False
    if not stdin_is_terminal():
        raise UsageError("approval is 'ask' but there is no terminal to ask on; nothing was started",
                         "pass --yes to approve the plan and every command, or set approval = \"auto\"")
    return True


def execute(opts: RunOptions) -> int:
    """Run (or resume) and return the exit code."""
    from agent_cli.agent.executor import Limits
    from agent_cli.agent.session import RunConfig, Session
    from agent_cli.cli_common import find_repo, settings_for
    from agent_cli.console import make_console, pick_mode

    repo_path = find_repo(opts.repo)
    settings = settings_for(repo_path, **opts.flags)
    ask = _check_approval(settings, opts)
    console = make_console(pick_mode(opts.json_out, sys.stdout))
    try:
        services = _services(settings, opts, repo_path, console)
        services.model = build_model(settings, opts, on_retry=_retry_notice(console))
        config = RunConfig(accept_cmds=opts.accept, allow_dirty=opts.allow_dirty,
                           plan_only=opts.plan_only, approve=ask, secrets=settings.secrets(),
                           limits=Limits(settings.max_steps, settings.task_max_steps,
                                         settings.budget_usd, settings.tool_output_max_tokens))
        return _run_locked(Session(services, config), services, opts)
    except KeyboardInterrupt:
        print("interrupted before the run started; nothing to resume", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        console.close()


def _run_locked(session, services, opts: RunOptions) -> int:
    if opts.plan_only:
        return session.start(opts.goal)
    services.state_dir.mkdir(parents=True, exist_ok=True)
    services.repo.exclude_state(services.state_dir)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        with services.lock:
            return session.resume(opts.run_id) if opts.resume else session.start(opts.goal)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _retry_notice(console):
    from agent_cli.events import Notice

    def notice(attempt: int, delay: float, why: str) -> None:
        console.emit(Notice(text=f"model call failed ({why}); retry {attempt} in {delay:.1f}s"))

    return notice


def list_runs(repo_opt: Path | None, json_out: bool) -> None:
    """Print the runs of a repository, newest last."""
    from agent_cli.agent.runstore import RunStore
    from agent_cli.cli_common import find_repo, settings_for

    repo = find_repo(repo_opt)
    store = RunStore(settings_for(repo).state_dir(repo))
    rows = [{"run_id": r.get("run_id"), "status": r.get("status"), "goal": r.get("goal", ""),
             "steps": r.get("steps", 0), "updated_at": r.get("updated_at", "")}
            for r in store.list()]
    if json_out:
        print(json.dumps(rows))
    elif not rows:
        print("no runs yet in this repository")
    else:
        for r in rows:
            print(f"{r['run_id']}  {r['status']:<16} {r['steps']:>4} steps  {r['goal'][:70]}")

