"""Build a run's objects from Settings and run it: the command layer's one wiring module.

With shared.py (the repository, its settings, memory's place and embedder, which every
command needs), the only place besides the commands that reads Settings, and where the
vendor-backed pieces are chosen and handed to `agent.session` whole. Checks come in the order that
sends the user to the right fix: what is local and cheapest first (the repository, the
lock, the run to resume), then settings and the API key, then approval; a refused run
writes nothing. The state directory is excluded from git before anything is written
into it, on every path.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agent_cli.agent.adapt.escalate import Answer
from agent_cli.agent.attempt.runtime import Limits
from agent_cli.agent.attempt.toolbox import Toolbox
from agent_cli.agent.run.live import checkout_lock
from agent_cli.agent.run.roles import ROLES, RoleModels
from agent_cli.agent.run.session import RunConfig, Services, Session
from agent_cli.agent.run.store import RunRecord, RunStartedWith, RunStore
from agent_cli.cli import roles
from agent_cli.cli import worktree as wt
from agent_cli.cli.config import carried as carrying
from agent_cli.cli.config.settings import Settings, load_settings
from agent_cli.cli.mcp_tools import RunTools
from agent_cli.cli.shared import (
    find_repo,
    make_embedder,
    memory_place,
    own_memory,
    repo_key,
    run_secrets,
    run_store,
    settings_for,
)
from agent_cli.core.errors import (
    EXIT_INTERRUPTED,
    AgentError,
    StorageError,
    UsageError,
)
from agent_cli.core.events import Event, Notice, RunDone, RunStarted
from agent_cli.core.protocols import ChatModel, Console, Embedder, Hooks
from agent_cli.core.redact import redact
from agent_cli.memory import SqliteStore, WorkingMemory
from agent_cli.memory.longterm.fallback import FallbackLongTerm
from agent_cli.memory.longterm.lazy import LazyLongTermMemory
from agent_cli.memory.longterm.write.outbox import Outbox
from agent_cli.ui import stopping
from agent_cli.ui.console import can_ask, make_console, pick_mode
from agent_cli.ui.watched import Watched
from agent_cli.workspace.files import Files
from agent_cli.workspace.git.repository import GitRepo
from agent_cli.workspace.lock import RunLock
from agent_cli.workspace.repo import CommandRunner, RepoWorkspace
from agent_cli.workspace.shell import runner as shell
from agent_cli.workspace.shell.cmdline import is_test_command
from agent_cli.workspace.shell.policy import CommandPolicy

if TYPE_CHECKING:
    from agent_cli.tools.held import Started

# The openai SDK takes about a second to import and only `agent run` and `doctor` talk to the
# model; `recall` and `memory` import this module too, so the model client loads where chosen.
MODEL_CLIENT = "agent_cli.llm.openai.chat"
OUTBOX = "memory-outbox.jsonl"  # long-term memory writes kept while the server is down
MCP_SHARE = 25  # percent of a request the MCP servers' tools may take (McpTools.within)
AnswerKind = Literal["hint", "skip", "replan"]  # what --resume can answer a rejected task


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
    verbose: bool = False
    record: Path | None = None
    answer: tuple[AnswerKind, str] | None = None  # with --resume: the answer and its text
    worktree: bool = False  # work in a worktree of its own (cli/worktree.py)
    flags: dict[str, Any] = field(default_factory=dict)


# -- the model --------------------------------------------------------------------------


def import_model_client_in_background() -> None:
    """Start importing the model client while the repository is checked (git runs meanwhile)."""
    if MODEL_CLIENT not in sys.modules:
        threading.Thread(
            target=__import__, args=(MODEL_CLIENT,), daemon=True, name="import-model-client"
        ).start()


def build_model(
    settings: Settings,
    opts: RunOptions,
    console: Console,
    endpoint: roles.Endpoint | None = None,
    api_key: str | None = None,
    secrets: tuple[str, ...] | None = None,
) -> ChatModel:
    """The ChatModel: a replayed recording, or the endpoint (optionally recorded).

    `endpoint` (with its `api_key`) is one role's; without it, `model` at `base_url`.
    `secrets` are masked in every request and recording (the configured ones when None)."""
    masked = settings.secrets() if secrets is None else secrets
    prices = endpoint.prices if endpoint else settings.prices()
    model_name = endpoint.model if endpoint else settings.model
    if opts.replay:
        from agent_cli.llm.record import ReplayModel

        # a replayed reply was paid for when it was recorded: it costs nothing now
        model: ChatModel = ReplayModel(
            opts.replay, price_in=0.0, price_out=0.0, price_cached=0.0, name=model_name
        )
    else:
        from agent_cli.llm.openai.chat import OpenAIChat
        from agent_cli.llm.openai.errors import SetBy

        # what an error's fix names: a role's own model setting and key variable
        set_by = endpoint.set_by() if endpoint else SetBy()
        model = OpenAIChat(
            model=model_name,
            base_url=endpoint.base_url if endpoint else settings.base_url,
            api_key=api_key if endpoint else settings.key(),
            **prices,
            timeout_s=settings.request_timeout_s,
            max_retries=settings.max_retries,
            backoff_s=settings.retry_backoff_s,
            max_tokens=settings.reserved_output_tokens,
            context_window=settings.context_window,
            on_retry=RetryNotice(masked, console.drop_stream),
            on_text=console.stream_text,  # the model's words, live on a terminal
            cache_dir=server_cache_dir(os.environ),  # a local server's findings, kept a day
            secrets=masked,
            set_by=set_by,
        )
    if opts.record:
        from agent_cli.llm.record import RecordingModel

        if opts.replay and opts.replay.resolve() == opts.record.resolve():
            raise UsageError(
                f"--record {opts.record} is the recording --replay reads",
                "record to another file",
            )

        model = RecordingModel(model, opts.record, secrets=masked)
    return model


def build_models(
    settings: Settings,
    opts: RunOptions,
    console: Console,
    secrets: tuple[str, ...] | None = None,
) -> RoleModels:
    """Each role's ChatModel (`roles.py`); a replayed recording serves every role in turn."""
    if opts.replay:
        return RoleModels.one(build_model(settings, opts, console, secrets=secrets))
    return roles.build(
        settings,
        lambda ep, key: build_model(settings, opts, console, ep, key, secrets),
        ("planner",) if opts.plan_only else ROLES,
    )


def server_cache_dir(env: Mapping[str, str]) -> Path:
    """Where what a local model server showed is kept: $XDG_CACHE_HOME/agent, else ~/.cache/agent."""
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base).expanduser() / "agent"


class RetryNotice:
    """Says on stderr, like an error and in every output mode, that a model call is retried;
    first `dropped` is told, so that the words the failed call streamed are not kept on screen
    (the retry's reply is the one that counts)."""

    def __init__(
        self, secrets: tuple[str, ...] = (), dropped: Callable[[], None] | None = None
    ) -> None:
        self.secrets = secrets  # masked in what the server said, which may quote the request
        self.dropped = dropped

    def __call__(self, attempt: int, of: int, delay: float, why: str) -> None:
        """Retry `attempt` of the `of` this failure may have (a failure that asking again
        rarely cures, such as a proxy's page, has one)."""
        if self.dropped is not None:
            self.dropped()
        why = redact(why, self.secrets)
        print(
            f"notice: model call failed ({why}); retry {attempt} of {of} in {delay:.1f}s",
            file=sys.stderr,
            flush=True,
        )


def fit_to_window(
    settings: Settings, window: int | None, console: Console, whose: str = "the model's"
) -> tuple[int, int]:
    """Working-memory and tool-output token caps that fit the model's context `window`
    (`whose` it is, as a notice says it: the model's, or the smallest of the roles')."""
    from agent_cli.llm.server.info import fit_window

    wanted = (settings.memory_max_tokens, settings.tool_output_max_tokens)
    if not window:
        return wanted
    memory, tool_output, _ = fit_window(window, *wanted, settings.reserved_output_tokens)
    if (memory, tool_output) != wanted:
        console.emit(
            Notice(
                text=f"{whose} context window is {window:,} tokens"
                + (", the smallest of the roles'" if whose != "the model's" else "")
                + f": working memory {memory:,} and tool output {tool_output:,} tokens"
            )
        )
    return memory, tool_output


# -- the run's parts --------------------------------------------------------------------


class RunKit:
    """Working memory and tools for one run (`session.RunParts`); closes what it opened."""

    def __init__(
        self,
        settings: Settings,
        workspace: RepoWorkspace,
        state_dir: Path,
        policy: CommandPolicy,
        embedder: Embedder,
        longterm: LazyLongTermMemory | FallbackLongTerm,
        memory_tokens: int | None = None,
        tools: RunTools | None = None,
        notice: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.settings, self.workspace, self.state_dir = settings, workspace, state_dir
        self.tools = tools  # the MCP servers' tools, started with the first toolbox
        self.notice = notice  # a line for the user
        self._hooks_checked = False  # whether each hook's matcher was held to the tools
        self.policy, self.embedder, self.longterm = policy, embedder, longterm
        # the configured budget, or less when the server's context window is smaller
        self.memory_tokens = memory_tokens or settings.memory_max_tokens
        self._stores: list[SqliteStore] = []
        # what git ignores in the work tree before the model's first tool runs (the user's
        # .env, their virtualenv): taken with the first toolbox, kept for the whole run
        self._users_ignored: list[str] | None = None

    def open_memory(self, run_dir: Path) -> WorkingMemory:
        """Working memory with its cold zone in `run_dir`/memory.db."""
        run_dir.mkdir(parents=True, exist_ok=True)
        store = SqliteStore(run_dir / "memory.db", secrets=self.workspace.secrets)
        self._stores.append(store)
        return WorkingMemory(
            store=store,
            embedder=self.embedder,
            max_tokens=self.memory_tokens,
            recall_cooldown_steps=self.settings.recall_cooldown_steps,
        )

    def start_tools(self) -> None:
        """Start the MCP servers (once; the first toolbox finds them running)."""
        if self.tools is not None:
            self.tools.providers()

    def make_toolbox(self, memory: WorkingMemory) -> Toolbox:
        """The task tools, confined to the repository and clear of the user's own changes."""
        if self._users_ignored is None:
            self._users_ignored = self.workspace.uncommittable()
        files = Files(
            self.workspace.root,
            deny_write=wt.readonly_state(self.state_dir, self.workspace.root),
            protected=self.workspace.protected,
            users_ignored=self._users_ignored,
        )
        toolbox = Toolbox(
            files=files,
            run_command=self.workspace.run_for_model,
            is_test=is_test_command,
            memory=memory,
            secrets=self.workspace.secrets,
            providers=self.tools.providers() if self.tools else (),
        )
        if not self._hooks_checked:  # the run's tools are known now, its MCP servers' too
            self._hooks_checked = True
            for line in self.settings.hooks.unmatched(toolbox.names):
                self.notice(line)
        return toolbox

    def allow_command(self, cmd: str) -> None:
        self.policy.allow(cmd)

    def unstoppable(self) -> AbstractContextManager[None]:
        """The signals that stop a run wait until the block is done (`stopping.held`)."""
        return stopping.held()

    def close(self) -> None:
        """Close every cold store opened for the run, and stop its MCP servers."""
        for store in self._stores:
            store.close()
        self._stores.clear()
        if self.tools is not None:
            self.tools.close()


def _scrubbed(secrets: tuple[str, ...]) -> list[str]:
    """The secrets whose variables the model's commands do not get: all but the passwords of
    the environment's own URLs, which the tests may need (what is printed is masked)."""
    from agent_cli.workspace.git.identity import url_passwords

    passed = set(url_passwords(os.environ.values()))
    return [secret for secret in secrets if secret not in passed]


def open_workspace(
    settings: Settings,
    repo_path: Path,
    state_dir: Path,
    console: Console,
    secrets: tuple[str, ...] | None = None,
) -> tuple[RepoWorkspace, CommandPolicy]:
    """The repository with its command runner and the policy for the model's commands;
    `secrets` are the run's (`run_secrets`, read here when None)."""
    secrets = run_secrets(settings, repo_path) if secrets is None else secrets
    git = GitRepo(repo_path, secrets=secrets)
    # Read-only inside the sandbox: git's files and the agent's state and settings are used
    # later outside it, so a sandboxed command must not be able to change them.
    state = wt.readonly_state(state_dir, git.root)
    runner = CommandRunner(
        root=git.root,
        readonly=[git.root / ".git", git.git_dir, git.common_dir, *state, git.root / ".agentrc"],
        timeout_s=settings.command_timeout_s,
        env=shell.scrub_env(dict(os.environ), _scrubbed(secrets)),
        sandbox=settings.sandbox,
        guarded=[state_dir],  # a command that damages the run's state stops what ran it
    )
    # a worktree run's tree lies inside the state directory: its commands may change it
    inside = git.root if state_dir.resolve() in git.root.parents else None
    policy = CommandPolicy(
        settings.approval,
        settings.deny_commands,
        state_dir,
        ask=console.approve_command,
        cwd=git.root,  # git aliases are read where commands run
        work_tree=inside,
    )
    return RepoWorkspace(
        git,
        runner,
        secrets,
        check_command=policy.check,
        refusal=policy.refusal,
        notice=lambda text: console.emit(Notice(text=text)),
    ), policy


def as_began(workspace: RepoWorkspace, store: RunStore, run_id: str | None) -> Started | None:
    """For a resumed run, what each path its hooks' and stdio servers' commands run was when
    the run first began (`tools.held`; the run is read when first asked): the state saved with
    it, else the blob id in the commit it began at (a path it did not hold then). That is what
    they are held to, since the model may have changed them before the run stopped. None for
    a new run."""
    if run_id is None:
        return None
    resumed = run_id
    loaded: list[RunRecord] = []  # the run, once read

    def started(path: str) -> str | None:
        if not loaded:
            loaded.append(store.load(resumed))
        run = loaded[0]
        if path in run.held:
            return run.held[path]
        if not run.base or path.endswith("/"):  # a module directory: no blob
            return None
        return workspace.git.blob_at(run.base, path)

    return started


def held_states(settings: Settings, root: Path, started: Started | None) -> dict[str, str]:
    """What the repository files the hooks and stdio MCP servers run are held to, by path:
    saved with the run, so that a resume holds them to what they were when it first began."""
    from agent_cli.tools.held import HeldFiles
    from agent_cli.tools.hooks.config import HOOK_EVENTS

    commands = [h.command for e in HOOK_EVENTS for h in settings.hooks.at(e)]
    servers = settings.mcp_servers.values()
    commands += [[s.command, *s.args] for s in servers if s.command]
    return HeldFiles(root, commands, started).digests() if commands else {}


def make_hooks(
    settings: Settings, workspace: RepoWorkspace, started: Started | None = None
) -> Hooks | None:
    """The user's hooks, run where and as the model's commands run; None when none is set.
    `started`: a resumed run's files as it began (`as_began`), its hooks' scripts held to."""
    if not settings.hooks.any():
        return None
    from agent_cli.tools.hooks.process import HookPlace
    from agent_cli.tools.hooks.user import UserHooks

    runner = workspace.runner
    place = HookPlace(
        root=runner.root,
        env=runner.env,
        sandbox=runner.sandbox,
        readonly=tuple(runner.readonly),
        secrets=workspace.secrets,
    )
    return UserHooks(settings.hooks, place, started)


# -- `agent run` ------------------------------------------------------------------------


def execute(opts: RunOptions) -> int:
    """Run (or resume) and return the exit code."""
    shown = make_console(pick_mode(opts.json_out, sys.stdout), verbose=opts.verbose)
    ends = EndsWithRunDone(shown, opts.json_out)
    console = ends.console
    # SIGTERM, and SIGHUP (its terminal closed), stop a run as Ctrl-C does, from the start:
    # state saved, the model's command stopped, a new worktree removed
    previous = stopping.stop_as_interrupt()
    held = ExitStack()  # the run a resume goes on with, held to the end
    try:
        repo_path = find_repo(opts.repo)
        resumed = held.enter_context(resumed_run(repo_path, opts)) if opts.resume else None
        settings, started = run_settings(repo_path, opts, console, resumed)
        shown.secrets = run_secrets(settings, repo_path)  # masked in all shown from here on
        if not opts.replay:
            import_model_client_in_background()
        if opts.replay:
            console.emit(
                Notice(
                    text=f"the model's replies are replayed from the recording "
                    f"{opts.replay}: no model is called, and they cost $0"
                )
            )
        state_dir = settings.state_dir(repo_path)
        fresh_state = not state_dir.exists()
        checkout = RunLock(checkout_lock(state_dir, repo_path), repo=repo_key(repo_path))
        tree = wt.place_for(
            repo_path,
            state_dir,
            worktree=opts.worktree,
            auto=settings.worktree == "auto",
            resumed=resumed,
            plan_only=opts.plan_only,
            allow_dirty=opts.allow_dirty,
            console=console,
            checkout=checkout,
            goal=" ".join(redact(opts.goal or "", shown.secrets).split()),
        )
        try:
            return _execute(
                opts, settings, repo_path, ends, started, tree, shown.secrets, checkout, resumed
            )
        finally:
            wt.forget_unstarted(tree, state_dir, fresh=fresh_state)
            checkout.release()  # taken by place_for for worktree = "auto"; the run gave it up
            if fresh_state and state_dir.is_dir() and not any(state_dir.iterdir()):
                state_dir.rmdir()  # a run refused before it began leaves no empty directory
    except AgentError as e:
        # the error's line is printed on stderr (app.py): the run's secrets are masked in it
        e.message, e.hint = redact(e.message, shown.secrets), redact(e.hint, shown.secrets)
        ends.refused(e.exit_code, e.one_line())
        raise
    except KeyboardInterrupt:
        message = "interrupted before the run started; nothing to resume"
        if ends.run_id:  # a second Ctrl-C while the run was stopping: its state was saved first
            message = (
                f"interrupted while run {ends.run_id} was stopping; continue it with "
                f"`agent run --resume --run-id {ends.run_id}`"
            )
        ends.refused(EXIT_INTERRUPTED, message)
        print(message, file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # said as an internal error by app.main; the stream still ends
        ends.refused(1, redact(f"internal error: {type(e).__name__}: {e}", shown.secrets))
        raise
    finally:
        held.close()
        stopping.restore(previous)
        console.close()


class EndsWithRunDone:
    """The run's console (`console`), which with --json ends the stream with `run_done` on
    every exit path.

    A run refused before it began (a dirty tree, no key, the lock held, a bad flag) emits
    one for its error, unless the session already ended the stream."""

    def __init__(self, console: Console, json_out: bool) -> None:
        self.console: Console = Watched(console, self._seen)
        self.json_out = json_out
        self.done = False
        self.run_id = ""  # the run's, once it has started
        self.on_start: Callable[[str], None] = lambda run_id: None  # told the run's id

    def _seen(self, ev: Event) -> tuple[Event, ...]:
        self.done = self.done or isinstance(ev, RunDone)
        if isinstance(ev, RunStarted):
            self.run_id = ev.run_id
            self.on_start(ev.run_id)
        return ()

    def refused(self, code: int, message: str) -> None:
        """End a --json stream that has no `run_done` yet with one for this exit."""
        if self.json_out and not self.done:
            status = "interrupted" if code == EXIT_INTERRUPTED else "failed"
            self.console.emit(
                RunDone(
                    run_id=self.run_id,
                    status=status,
                    exit_code=code,
                    tasks=[],
                    steps=0,
                    prompt_tokens=0,
                    completion_tokens=0,
                    cost_usd=0.0,
                    message=message,
                )
            )


def run_settings(
    repo: Path, opts: RunOptions, console: Console, resumed: wt.Resumed | None = None
) -> tuple[Settings, RunStartedWith]:
    """The run's settings, and the endpoint, models and limits among them to save with it.

    A resumed run takes what it was started with where the user sets no other value now
    (`carried.py`): the saved values came from the user at the start, so they count as flags
    (checked like them)."""
    flags, saved = dict(opts.flags), RunStartedWith()
    taken = carrying.Carried()
    if resumed is not None:
        saved = resumed.record.started_with
        taken = carrying.carried(saved, load_settings(repo, flags), repo)
        if taken.dropped:
            names = ", ".join(roles.shown_name(k) for k in taken.dropped)
            console.emit(
                Notice(
                    text=f"{names} saved with the run came from {repo / '.agentrc'}, which is "
                    "not trusted now: not used (`agent trust` in the repository uses them again)"
                )
            )
        for change in taken.changed:
            console.emit(Notice(text=change.notice()))
        for text in taken.unpaired:
            console.emit(Notice(text=text))
    carried = taken.flags
    settings = settings_for(repo, **{**flags, **carried})
    started = RunStartedWith(
        base_url=settings.base_url,
        model=settings.model,
        embedding_model=settings.embedding_model,
        max_steps=settings.max_steps,
        task_max_steps=settings.task_max_steps,
        budget_usd=settings.budget_usd,
        **roles.started_with(settings),
        from_repo=carrying.from_repo(settings, repo, saved, carried),
        from_flags=carrying.from_flags(flags, saved, carried),
    )
    if carried:
        names = ", ".join(roles.shown_name(k) for k in sorted(carried))
        how = "with" if taken.changed else "as it was started with"
        console.emit(
            Notice(
                text=f"the run goes on {how} {started.describe()} ({names} saved with it; "
                "a value you set now, as a flag, in the environment or in an .agentrc, takes "
                "the place of a saved one)"
            )
        )
    return settings, started


@contextmanager
def resumed_run(repo: Path, opts: RunOptions) -> Iterator[wt.Resumed]:
    """The run `--resume` goes on with, held from before its state is read to the end of the
    command (`worktree.resuming`): the first of the checks, after the repository's own."""
    state_dir = load_settings(repo, dict(opts.flags)).state_dir(repo)
    with wt.resuming(run_store(state_dir, repo), state_dir, opts.run_id) as resumed:
        yield resumed


def _execute(
    opts: RunOptions,
    settings: Settings,
    repo_path: Path,
    ends: EndsWithRunDone,
    started: RunStartedWith,
    tree: wt.WorktreePlace | None,
    secrets: tuple[str, ...],
    checkout: RunLock,
    resumed: wt.Resumed | None,
) -> int:
    """The run, in `tree` (a worktree run) or in the checkout under `checkout`, its lock;
    `resumed`: the run a resume goes on with, held."""
    state_dir = settings.state_dir(repo_path)
    console = ends.console
    if tree is not None:  # the run works in its worktree; its state stays in the repository's
        here = tree
        repo_path, console = tree.path, Watched(console, lambda ev: wt.settled(here, ev))
    workspace, policy = open_workspace(settings, repo_path, state_dir, console, secrets)
    secrets = workspace.secrets  # `run_secrets`, read once for the whole run
    embedder = make_embedder(settings)
    place = memory_place(settings, state_dir)
    with workspace, LazyLongTermMemory(place, embedder, secrets, opts.plan_only) as lazy:
        # A memory server that is down: one notice, the run goes on without it, and what it
        # would have written waits in the outbox for the next run that reaches the server.
        longterm = FallbackLongTerm(
            lambda: lazy,
            notice=lambda text: console.emit(Notice(text=text)),
            # a plan-only run learns nothing, so it keeps (and says it keeps) nothing either
            outbox=None if opts.plan_only else Outbox(state_dir / OUTBOX, str(place), secrets),
        )
        if not opts.plan_only or state_dir.exists():  # a plan-only run writes nothing there
            workspace.git.exclude_state(state_dir)  # before anything is written into it
        store = run_store(state_dir, repo_path, secrets)
        lock = checkout
        if tree is not None:
            lock = tree.lock or wt.run_lock(state_dir, tree.run_id, store.repo)
        ends.on_start = lock.name  # `agent runs` reads which run holds it
        run_id, changed = check_local(
            workspace, lock, opts, resumed, fresh=bool(tree and tree.created)
        )
        shell.check_sandbox(settings.sandbox)  # a sandbox asked for must exist before the plan
        longterm.prepare()  # its snapshot is read, or the store opens, while the model client loads
        models = build_models(settings, opts, console, secrets)
        approve = check_approval(settings, opts)
        found = roles.narrowest_window(models)  # learned from the servers when they say
        whose = roles.whose_window(models, found) if found else "the model's"
        memory_tokens, tool_tokens = fit_to_window(settings, found, console, whose)
        # the servers' own window when they report one, else the setting
        window = found or settings.context_window
        held_to = as_began(workspace, store, run_id)
        config = RunConfig(
            accept_cmds=opts.accept,
            allow_dirty=opts.allow_dirty,
            plan_only=opts.plan_only,
            approve=approve,
            secrets=secrets,
            memory_ttl_days=settings.memory_ttl_days,
            memory_digest_tokens=settings.memory_digest_tokens,
            memory_thresholds=settings.recall_thresholds(),
            memory_own_store=own_memory(settings),
            limits=Limits(
                settings.max_steps,
                settings.task_max_steps,
                settings.budget_usd,
                tool_tokens,
                context_window=window,
                reserved_output_tokens=min(settings.reserved_output_tokens, window // 4),
            ),
            replan=settings.replan,
            max_replans=settings.max_replans,
            final_summary=settings.final_summary,
            # a rejected task is put to the human on a terminal, even with --yes
            ask_human=not opts.json_out and can_ask(),
            preflight=changed,  # the repository was checked above: once per run
            started_with=started,
            held=held_states(settings, workspace.root, held_to),
            run_id=tree.run_id if tree else None,
            worktree=str(tree.path) if tree else "",
            base_branch=tree.base_branch if tree else None,
        )
        tools = RunTools(
            settings,
            workspace.root,
            state_dir,
            ask=console.approve_tool,
            notice=lambda text: console.emit(Notice(text=text)),
            started=held_to,
        )
        tools.max_tokens = (window - config.limits.reserved_output_tokens) * MCP_SHARE // 100
        kit = RunKit(
            settings,
            workspace,
            state_dir,
            policy,
            embedder,
            longterm,
            memory_tokens,
            tools,
            notice=lambda text: console.emit(Notice(text=text)),
        )
        try:
            session = Session(
                Services(
                    workspace=workspace,
                    model=models.executor,
                    console=console,
                    longterm=longterm,
                    parts=kit,
                    store=store,
                    hooks=make_hooks(settings, workspace, held_to),
                    roles=models,
                ),
                config,
            )
            return run_session(session, opts, run_id, state_dir, lock)
        finally:
            kit.close()


def check_local(
    workspace: RepoWorkspace,
    lock: RunLock,
    opts: RunOptions,
    resumed: wt.Resumed | None,
    fresh: bool = False,
) -> tuple[str | None, set[str]]:
    """The local checks, cheapest first: no other run, the run to resume (`resumed`, chosen
    and held already), the repository's state.

    Returns the run to resume (None for a new run) and the paths holding the user's changes.
    A `fresh` worktree holds none of theirs: the user's checkout was checked when it was made
    (but for git's identity, asked again there). It holds what git shows changed as soon as
    it is checked out (files its attributes or the user's filters renormalize), kept out of
    the run's commits as the user's changes are."""
    if not opts.plan_only:
        lock.check()
    if fresh:  # the checkout was checked as the tree was made; the identity is asked again
        # where the run commits, as an identity for some branches only does not reach there
        wt.check_identity(workspace.root, workspace.secrets)
        return None, workspace.as_made()
    if resumed is not None:
        run = resumed.record
        return run.run_id, workspace.preflight(allow_dirty=True, resuming=run.branch)
    return None, workspace.preflight(opts.allow_dirty)


def check_approval(settings: Settings, opts: RunOptions) -> bool:
    """Whether to ask for plan approval; refuse when asking is needed but impossible."""
    if settings.approval == "auto" or opts.plan_only:
        return False
    if not can_ask():
        raise UsageError(
            "approval is 'ask' but there is no terminal to ask on; nothing was started",
            'pass --yes to approve the plan and every command, or set approval = "auto"',
        )
    return True


def run_session(
    session: Session, opts: RunOptions, run_id: str | None, state_dir: Path, lock: RunLock
) -> int:
    """Start or resume under the run lock (a plan-only run writes nothing and takes no lock)."""
    if opts.plan_only:
        return session.start(opts.goal or "")
    try:  # a read-only or full state directory: one line, before anything is changed
        state_dir.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except OSError as e:
        raise StorageError(
            f"the state directory {state_dir} cannot be written: "
            f"{e.strerror or e}; nothing was started",
            "make it writable, free disk space, or set home to another directory",
        ) from None
    with lock:  # `execute` removes a state directory this run made and left empty
        if opts.resume:
            return session.resume(run_id, Answer(*opts.answer) if opts.answer else None)
        return session.start(opts.goal or "")
